"""The run's journal, ``manifest.json``: what ran, on what, and how it ended.

Someone who finds a run folder a year later can tell from it which scenario
ran (a copy and its hash), with which harness on which host, and whether the
run completed, was interrupted or failed. It is rewritten atomically at every
step, so even a run killed half-way leaves one that says how far it got.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.results.io import harness_version, host_info, utc_now, write_json_atomic
from harness.scenario.schema import LoadedScenario


@dataclass
class Manifest:
    """The fields of ``manifest.json``; ``builds`` maps a build key to what it recorded."""

    scenario_name: str
    scenario_file: str
    scenario_sha256: str
    seed: int
    harness_version: str
    host: dict[str, Any]
    started_at: str
    run_id: str
    repeat: int = 1
    status: str = "running"
    ended_at: str | None = None
    error: str | None = None
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def begin(cls, loaded: LoadedScenario, run_id: str, repeat: int = 1) -> Manifest:
        """A manifest for a run starting now, on this host, with this harness."""
        return cls(
            scenario_name=loaded.scenario.name,
            scenario_file=loaded.path,
            scenario_sha256=loaded.sha256,
            seed=loaded.scenario.seed,
            harness_version=harness_version(),
            host=host_info(),
            started_at=utc_now(),
            run_id=run_id,
            repeat=repeat,
        )

    def end(self, status: str, error: str | None) -> None:
        """Record how the run ended (``completed``, ``interrupted`` or ``failed``)."""
        self.status = status
        self.error = error
        self.ended_at = utc_now()

    def save(self, run_dir: Path) -> None:
        write_json_atomic(run_dir / "manifest.json", asdict(self))
