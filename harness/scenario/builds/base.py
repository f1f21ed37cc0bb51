"""What every build kind's settings model is: a ``BuildSettings`` with a ``kind`` name.

Each kind's model (``shop``, ``command``, ``jar``, ``docker``, ``url``: a module each in
this package) checks its own keys; what it can only check against the rest of
the scenario (``pg.port``, ``allow-remote``) or the scenario's folder (a ``cwd``,
a Docker context) it says through the two hooks here, which the loader calls for
every build without asking which kind it is.

What the harness can do with a kind's builds besides running them is declared on the
model too, and read from there, never guessed from its keys: the language ``harness
tune`` writes its recommendation in (``Recommendation``, rendered by
``harness.tune.recommend``) and how ``harness simulate`` models it (``SimulatorModel``,
by ``harness.simulate.services``). Both read them with a ``match`` that mypy checks
is exhaustive; ``tests/tune/test_kind_declarations.py`` checks every kind declares both.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import ClassVar

from harness.core.yamlmodel import StrictModel
from harness.scenario.builds.spring_properties import SetSetting

YamlPath = tuple[str | int, ...]


class Recommendation(Enum):
    """The language ``harness tune`` writes a kind's recommended settings in."""

    SHOP_RESILIENCE4J = "shop-resilience4j"
    """The shop's layers as an ``application.yml`` ``resilience4j:`` block for a Spring
    service whose client instance is ``pgClient`` (yaml)."""
    SPRING_PROPERTIES = "spring-properties"
    """The build's own ``resilience4j`` properties, any other swept property dotted (yaml)."""
    ENVIRONMENT = "environment"
    """``export VAR=...`` for each swept variable, then the command line (sh)."""
    BUILD_KEYS = "build-keys"
    """The swept keys as the scenario's build writes them (yaml): the kind has no settings
    language of its own here (a container, a service already running)."""


class SimulatorModel(Enum):
    """How ``harness simulate`` models a kind's builds, or that it does not."""

    SHOP = "shop"
    """The shop's own settings (one replica; replicas behind a balancer are refused)."""
    SPRING_SHOP = "spring-shop"
    """``targets/spring-shop`` from the build's Spring properties."""
    NODE_GATEWAY = "node-gateway"
    """``targets/node-gateway`` (opossum) from its env and flags; other commands are refused."""
    NONE = "none"
    """Not modelled: every build of the kind is refused, by name."""


class BuildSettings(StrictModel):
    """One build of the service under test, as the scenario gives it."""

    kind: ClassVar[str]
    """The kind's name: the manifest's ``builds.<name>.kind``, and how the harness
    finds the code that runs it (``harness.run.kinds.registry``)."""

    cappable: ClassVar[bool] = True
    """Whether a phase's ``target`` caps (CPU, memory) can apply to it: the harness
    runs its processes or its container (``harness.run.caps``)."""

    recommendation: ClassVar[Recommendation]
    """The language ``harness tune`` writes a recommended build of this kind in; every kind
    declares its own (no default: a kind that forgets it fails its test, never gets the
    shop's)."""

    simulator_model: ClassVar[SimulatorModel]
    """How ``harness simulate`` models a build of this kind (``NONE``: refused); declared
    by every kind, no default."""

    answers: ClassVar[str] = "default"
    """The outcomes preset (``harness.scenario.outcomes.PRESETS``) a kind's service's answers
    are read with when an endpoint names none and every build of the scenario agrees: any
    service's (``default``), unless the kind is a reference target that says more."""

    def retries_its_calls(self) -> bool | None:
        """Whether the build's own settings make its service retry its calls to the
        gateway; None: they do not say (the service's own code or configuration does).
        ``harness.analysis.idle`` warns of a Retry that never retried only where it knows."""
        return None

    def spring_settings(self) -> list[SetSetting]:
        """The Spring settings (Resilience4j's among them) the build gives its service, which
        the run reads back from the service and compares (``harness.run.settings_in_force``);
        none for a kind that gives none."""
        return []

    def scenario_problems(
        self, at: YamlPath, *, pg_port: int | None, allow_remote: bool
    ) -> list[tuple[YamlPath, str]]:
        """What the build gets wrong given the rest of the scenario: ``(yaml path, message)``."""
        return []

    def folder_problems(self, at: YamlPath, base_dir: Path) -> list[tuple[YamlPath, str]]:
        """Folders the build names that do not exist, relative to ``base_dir``."""
        return []
