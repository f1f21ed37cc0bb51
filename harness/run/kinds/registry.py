"""Every kind of build, registered once: which ``Kind`` runs a build, and what it can do.

A build's kind comes from its keys (``harness.scenario.builds.build_kind``):
``profile`` makes a shop (with ``replicas``, several behind nginx: the
``replicas`` kind), ``command:``, ``jar:``, ``docker:`` and ``url:`` the others. Each kind
is a sub-package of ``harness.run.kinds`` whose ``target`` module ends with its
``KIND`` (``harness.run.targets.Kind``); ``KINDS`` lists them. The orchestrator
(``harness.run.experiment``), ``harness.run.cleanup`` and the CLI reach a kind
only through the functions here, and ask it what it can do, never its name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.core.errors import InputError, RunError
from harness.run.kinds.command.target import KIND as COMMAND
from harness.run.kinds.docker.target import KIND as DOCKER
from harness.run.kinds.jar.target import KIND as JAR
from harness.run.kinds.replicas.target import KIND as REPLICAS
from harness.run.kinds.shop.target import KIND as SHOP
from harness.run.kinds.url.target import KIND as URL
from harness.run.targets import Kind, Leftovers, Target
from harness.scenario.schema import Scenario

KINDS: tuple[Kind, ...] = (SHOP, REPLICAS, COMMAND, JAR, DOCKER, URL)
"""Every kind of build the harness runs; each build is run by exactly one."""


def kind_of(build: Any) -> Kind:
    """The kind that runs ``build`` (a validated build of the scenario)."""
    for kind in KINDS:
        if isinstance(build, kind.settings) and kind.runs(build):
            return kind
    raise RunError(
        f"{getattr(build, 'kind', type(build).__name__)} builds cannot run yet: this harness "
        f"has targets for {', '.join(sorted({k.settings.kind for k in KINDS}))}"
    )


def target_for(build: Any) -> Target:
    """The target that runs ``build``."""
    return kind_of(build).target(build)


def check_remote(scenario: Scenario, builds: Iterable[str], allowed: bool) -> None:
    """Refuse traffic off this machine unless the scenario and the command line both allow it.

    ``allowed`` is the command line's word (``--allow-remote``); each build's kind says
    its own addresses (``Kind.check_remote``), and one ``InputError`` lists every one.
    """
    found: list[str] = []
    for name in builds:
        build = scenario.builds[name]
        check = kind_of(build).check_remote
        if check is not None:
            found += check(name, build, scenario.allow_remote, allowed)
    if found:
        raise InputError("\n".join(found))


def leftovers_of(builds: Iterable[Any]) -> list[Leftovers]:
    """What the kinds of ``builds`` may leave outside a run's folder (once each)."""
    found: list[Leftovers] = []
    for build in builds:
        leftovers = kind_of(build).leftovers
        if leftovers is not None and leftovers not in found:
            found.append(leftovers)
    return found


def leftovers_named(names: Iterable[object]) -> list[Leftovers]:
    """What builds of the kinds ``names`` (as a manifest records them) may leave outside."""
    wanted = set(names)
    found: list[Leftovers] = []
    for kind in KINDS:
        leftovers = kind.leftovers
        if kind.settings.kind in wanted and leftovers is not None and leftovers not in found:
            found.append(leftovers)
    return found


def all_leftovers() -> list[Leftovers]:
    """What any kind may leave outside a run's folder (``harness clean`` looks for all)."""
    return leftovers_named(kind.settings.kind for kind in KINDS)
