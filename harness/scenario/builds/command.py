"""The ``command`` kind's settings: a process the harness starts, stops, and logs.

Its output goes to ``<build>/target.log``; the code that runs it is
``harness.run.kinds.command``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from harness.scenario.builds.base import Recommendation, SimulatorModel, YamlPath
from harness.scenario.builds.service import ServiceBuild
from harness.scenario.builds.spring_properties import SetSetting, settings_given
from harness.scenario.placeholders import Argv, Env, Plain


class CommandBuild(ServiceBuild):
    """A process the harness starts in its own process group and stops at the end."""

    kind: ClassVar[str] = "command"
    recommendation: ClassVar[Recommendation] = Recommendation.ENVIRONMENT
    simulator_model: ClassVar[SimulatorModel] = SimulatorModel.NODE_GATEWAY
    command: Argv = Field(description="argv list, or a string split like a shell would")
    cwd: Plain = Field(
        ".", min_length=1, description="working folder, relative to the scenario file's folder"
    )
    env: Env = Field(default_factory=dict)
    port: int | None = Field(
        None, ge=1, le=65535, description="fixed port the service listens on; default: {port}"
    )
    simulate_as: Literal["node-gateway"] | None = Field(
        None,
        description="node-gateway: this command runs targets/node-gateway, the reference Node "
        "service, which harness simulate (and tune --screen) may model; without it a command "
        "build is refused by the simulator",
    )

    def spring_settings(self) -> list[SetSetting]:
        return settings_given({}, self.env, list(self.command[1:]))

    def templated(self) -> Iterator[str]:
        yield from self.command
        yield from self.env.values()

    @model_validator(mode="after")
    def _told_where_to_listen(self) -> CommandBuild:
        self._check_port_given(self.port, "command or env")
        return self

    def folder_problems(self, at: YamlPath, base_dir: Path) -> list[tuple[YamlPath, str]]:
        folder = base_dir / self.cwd
        if not folder.is_dir():
            return [((*at, "cwd"), f"{self.cwd!r} is not a folder (looked for {folder})")]
        return []
