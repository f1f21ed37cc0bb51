"""The ``command`` target: a process of the user's the harness starts, watches and stops.

The process gets loopback ports the harness picked (each bound to port 0,
read, closed: the process binds it itself), filled into its arguments and
environment with the gateway's URL and the run's folder
(``harness.scenario.placeholders.fill``). It runs in its own process group, with
stdout and stderr in ``<build>/target.log``, and stops with the run's
``ProcessGroup``. ``target.json`` records the command as it was started.

``placeholder_values`` and ``metrics_url`` are shared with the other kinds the
harness starts (a Docker container fills the same placeholders):
``harness.run.kinds.service``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from harness.core.errors import RunError
from harness.core.handoff import Handoff
from harness.results.io import write_text_atomic
from harness.run.caps.leftovers import CGROUPS
from harness.run.kinds.service import ServiceTarget, find_program, placeholder_values
from harness.run.targets import Kind, Launch, TargetContext
from harness.scenario.builds.command import CommandBuild
from harness.scenario.placeholders import fill


class CommandRecord(TypedDict):
    """A command build's ``target.json``: the process as it was started (for people: no
    child reads it, but it has the shape of the hand-offs that are read)."""

    kind: str
    argv: list[str]
    cwd: str
    env: dict[str, str]


COMMAND_RECORD: Handoff[CommandRecord] = Handoff("command-record", 1)
"""A command build's ``target.json`` (``harness.core.handoff``)."""


class CommandTarget(ServiceTarget[CommandBuild]):
    """A ``command`` build: the user's own process, started in the build's folder setting."""

    def prepare(self, ctx: TargetContext) -> Launch:
        build = self.build
        values = placeholder_values(ctx, build.port)
        argv = [fill(arg, values) for arg in build.command]
        env = {name: fill(value, values) for name, value in build.env.items()}
        cwd = (ctx.scenario_dir / build.cwd).resolve()
        if not cwd.is_dir():
            raise RunError(f"the build's cwd {build.cwd!r} is not a folder (looked for {cwd})")
        if find_program(argv[0], cwd, env) is None:
            where = f"in {cwd}" if "/" in argv[0] else "on PATH"
            raise RunError(
                f"the build's command {argv[0]!r} was not found {where} (or is not executable)"
            )
        record: CommandRecord = {"kind": build.kind, "argv": argv, "cwd": str(cwd), "env": env}
        write_text_atomic(ctx.build_dir / "target.json", COMMAND_RECORD.text(record))
        return self.started(values, argv=tuple(argv), env=env, cwd=cwd)

    def collect(self, build_dir: Path) -> None:
        """Nothing to collect: its log is already ``target.log``."""


KIND = Kind("command", CommandBuild, CommandTarget, leftovers=CGROUPS)
"""A process of the user's, started, watched and stopped by the harness."""
