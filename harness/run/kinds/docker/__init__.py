"""The ``docker`` kind: an image run on a Docker Engine (``target``), the Engine (``engine``), the
process that owns the container (``runner``) and what a kill leaves (``cleanup``); settings
``harness.scenario.builds.docker``.

Imports nothing: the runner starts without the rest.
"""
