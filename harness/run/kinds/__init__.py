"""Build kinds: one sub-package per kind of build the harness runs.

- ``shop``: the reference shop (``targets/shop``) alone;
- ``replicas``: a shop build with ``replicas`` above 1, its shops behind nginx;
- ``command``: a process of the user's the harness starts and stops;
- ``docker``: an image the harness runs (or builds first) on a Docker Engine;
- ``url``: a service already running.

Each holds its ``Target`` (``<kind>/target.py``, ending with its ``KIND``: what it
can do) and whatever else only it needs (nginx's config, the Docker Engine, the
container runner, its cleanup); its settings model is
``harness.scenario.builds.<kind>``, where the scenario can validate it. What the
user's service kinds share is ``service``. ``registry`` lists every kind once;
nothing outside this package imports a kind but through it, and no kind imports
another, but ``replicas``, whose replicas are shops (the import contracts in
``pyproject.toml``).

A new kind: its settings model in ``harness/scenario/builds/<kind>.py`` (a
``BuildSettings``; a ``ServiceBuild`` for the user's service), a variant of
``Build`` and its key in ``KIND_KEYS`` there; here ``<kind>/target.py`` with its
``Target`` (``prepare``, ``collect``; ``preflight`` if it checks something before
the run) ending with its ``KIND``; ``KIND`` in ``registry.KINDS``; the package in
the kind contracts of ``pyproject.toml``; a build of it in
``tests/run/test_kind_registry.py``.

This module imports nothing: ``python -m harness.run.kinds.docker.runner`` must
start without the rest.
"""
