"""The early stop's seam: what a build's run asks, after each phase, of whoever decides.

Which gates may stop a build and what their figures are is the gates'
business (``harness.gates.abort``), above this package, so ``Experiment``
takes an ``AbortCheck``: the CLI gives it one made of the scenario's gates
with ``abort: true``. The run side only knows when to ask (``checkpoints``)
and hands over the data so far: the run as ``load`` would read it, the
running build from its live CSVs (``live_run``), built only when asked.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from harness.results.manifest import AbortRecord, ManifestRecord
from harness.results.model import RunResult, live_build, load_build


@dataclass(frozen=True)
class AbortVerdict:
    """A gate with ``abort: true`` that failed: the build's load stops."""

    gate: str
    expr: str
    value: float | None
    limit: float | None

    def record(self, phase: str, at_s: float) -> AbortRecord:
        """As the manifest keeps it (``abort`` of the build's record)."""
        return {
            "gate": self.gate,
            "expr": self.expr,
            "phase": phase,
            "at_s": round(at_s, 3),
            "value": self.value,
            "limit": self.limit,
        }


@dataclass(frozen=True)
class AbortAsk:
    """One check during a build: after ``phase``, with the builds already over."""

    build: str
    """The scenario's build name of the build running."""
    phase: str
    finished: Collection[str]
    """The builds whose runs are over (a gate comparing builds needs the others')."""
    run: Callable[[Collection[str]], RunResult]
    """The data so far, read when called (``live_run``): the running build's, and of the
    finished builds those named (a gate comparing builds names them). Only those: a sweep's
    last candidate beside six finished ones took 3 s to analyse against 0.6 s alone, and a
    loaded machine's slow check ran past the next one's moment, which the load's end then
    skipped."""


class AbortCheck(Protocol):
    """Decides, during a build, whether a gate with ``abort: true`` stops it."""

    def checkpoints(self, build: str) -> Sequence[tuple[str, float]]:
        """(phase, measured-window seconds) at which ``build``'s run asks, by time."""
        ...

    def __call__(self, ask: AbortAsk) -> AbortVerdict | None:
        """The failing gate, if one decided at ``ask.phase`` fails."""
        ...


def live_run(
    run_dir: Path,
    manifest: ManifestRecord,
    key: str,
    finished: Collection[str],
    named: Collection[str],
) -> RunResult:
    """The run so far: build ``key`` from its live CSVs, and the records of the builds both
    in ``finished`` and ``named`` (scenario build names) from their folders. Other records
    are left out: a build of the same name's earlier repetition too, so each repetition is
    judged on its own."""
    current = manifest["builds"][key]
    builds = {key: live_build(run_dir / key, key, current)}
    for other, info in manifest["builds"].items():
        name = info["build"]
        if other != key and name in finished and name in named and name != current["build"]:
            builds[other] = load_build(run_dir / other, other, info)
    return RunResult(run_dir, manifest, builds)
