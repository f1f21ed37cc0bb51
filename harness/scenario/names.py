"""Names of endpoints, builds and phases checked against the gate grammar's own words.

A gate reads ``build.figure`` and ``build.endpoint.figure`` (``harness.scenario.gates``):
an endpoint called ``busy_workers`` would make ``after.busy_workers.max`` ambiguous
(the busy-worker figure, or that endpoint's slowest request?), and a build called
``baseline`` could never be named, since a gate's first ``baseline`` means the
``--baseline`` run. So such names are refused where they are written, as are names
the grammar cannot spell at all (a build ``2x``, a phase ``1st``). A phase is read
only inside ``[...]``, so it may share a figure's word.
"""

from __future__ import annotations

import re

from harness.core.catalogue import ENDPOINT, GATED
from harness.scenario.gates import BASELINE, NAME_PATTERN, NAME_WORD, REPLICAS
from harness.scenario.schema import Scenario

YamlPath = tuple[str | int, ...]

RESERVED_BUILD_NAMES = (BASELINE,)
"""A gate's first word ``baseline`` is the ``--baseline`` run, never a build."""

_WORD = re.compile(NAME_WORD)
_NAME = re.compile(NAME_PATTERN)


def reserved_endpoint_names() -> frozenset[str]:
    """The words a gate reads right after a build: the first word of every figure that is
    not an endpoint's (``busy_workers``, ``breaker``, ``pg``...) and ``replicas``."""
    return frozenset({g.split(".", 1)[0] for g in GATED if ENDPOINT not in g} | {REPLICAS})


def name_problems(scenario: Scenario) -> list[tuple[YamlPath, str]]:
    """(YAML path, message) of each endpoint, build or phase name a gate could not tell apart
    from its own words, or could not write."""
    found: list[tuple[YamlPath, str]] = []
    reserved = reserved_endpoint_names()
    for section, what, names, taken in (
        ("traffic", "endpoint", scenario.traffic, reserved),
        ("builds", "build", scenario.builds, frozenset(RESERVED_BUILD_NAMES)),
    ):
        for name in names:
            if name in taken:
                found.append(((section, name), _collision(what, name, reserved)))
            elif not _WORD.fullmatch(name):
                found.append(((section, name), _unwritable(what, name)))
    for dep in scenario.played():
        for i, phase in enumerate(dep.phases):
            if not _NAME.fullmatch(phase.name):
                found.append(((*dep.at, "phases", i, "name"), _unwritable("phase", phase.name)))
    return found


def _collision(what: str, name: str, reserved: frozenset[str]) -> str:
    if what == "build":
        return (
            f"build {name!r} collides with the gate word {BASELINE!r}, which means the run "
            f"given with --baseline ({BASELINE}.<build>.<figure>): a gate could never name "
            "this build; rename it"
        )
    return (
        f"endpoint {name!r} collides with the gate figure {_figure_of(name)!r}: a gate's "
        f"build.{name}... would read the figure, not the endpoint; rename the endpoint "
        f"(reserved: {', '.join(sorted(reserved))})"
    )


def _figure_of(word: str) -> str:
    """The first figure whose gate name starts with ``word`` (for the message)."""
    if word == REPLICAS:
        return f"{REPLICAS}.I.<figure>"
    return next(g for g in GATED if ENDPOINT not in g and g.split(".", 1)[0] == word)


def _unwritable(what: str, name: str) -> str:
    rule = (
        "each of its dot-separated parts must start with a letter or '_' (or, after a dot, "
        "be all digits)"
        if what == "phase"
        else "it must start with a letter or '_'"
    )
    return f"{what} {name!r}: a gate could not name it; {rule}"
