"""What every build kind's settings model is: a ``BuildSettings`` with a ``kind`` name.

Each kind's model (``shop``, ``command``, ``docker``, ``url``: a module each in
this package) checks its own keys; what it can only check against the rest of
the scenario (``pg.port``, ``allow-remote``) or the scenario's folder (a ``cwd``,
a Docker context) it says through the two hooks here, which the loader calls for
every build without asking which kind it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from harness.core.yamlmodel import StrictModel

YamlPath = tuple[str | int, ...]


class BuildSettings(StrictModel):
    """One build of the service under test, as the scenario gives it."""

    kind: ClassVar[str]
    """The kind's name: the manifest's ``builds.<name>.kind``, and how the harness
    finds the code that runs it (``harness.run.kinds.registry``)."""

    cappable: ClassVar[bool] = True
    """Whether a phase's ``target`` caps (CPU, memory) can apply to it: the harness
    runs its processes or its container (``harness.run.caps``)."""

    def scenario_problems(
        self, at: YamlPath, *, pg_port: int | None, allow_remote: bool
    ) -> list[tuple[YamlPath, str]]:
        """What the build gets wrong given the rest of the scenario: ``(yaml path, message)``."""
        return []

    def folder_problems(self, at: YamlPath, base_dir: Path) -> list[tuple[YamlPath, str]]:
        """Folders the build names that do not exist, relative to ``base_dir``."""
        return []
