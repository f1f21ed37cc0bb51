"""What a build's watch asks after each phase (``Experiment``'s ``AbortCheck`` seam), with a
check of the test's own: when, with which builds over, and what an answer does."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import InputError
from harness.results.manifest import BuildRecord
from harness.run.abort import AbortAsk, AbortVerdict
from harness.run.events import RunListener
from harness.run.experiment import Experiment
from harness.scenario.loader import load_scenario_text

SCENARIO = """\
name: abort-watch
duration: 20s
traffic:
  payments: {method: POST, path: /api/payments, rate: 5, timeout: 2s}
pg: {phases: [{name: outage, start: 0s, duration: 4s, fault: {type: timeout}},
              {name: rest, start: 4s, duration: 16s, fault: {type: healthy}}]}
builds: {first: {profile: retry-only}, second: {profile: retry-only}}
"""


class Scripted:
    """Answers each check in turn from ``answers`` (a verdict, None, or an error to raise)."""

    def __init__(self, *answers: AbortVerdict | Exception | None) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str, set[str]]] = []

    def checkpoints(self, build: str) -> Sequence[tuple[str, float]]:
        return [("outage", 8.0), ("rest", 24.0)]

    def __call__(self, ask: AbortAsk) -> AbortVerdict | None:
        self.asked.append((ask.build, ask.phase, set(ask.finished)))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _watch(tmp_path: Path, check: Scripted, warnings: list[str]) -> tuple[Experiment, BuildRecord]:
    listener = RunListener(warning=lambda key, text: warnings.append(f"{key}: {text}"))
    experiment = Experiment(load_scenario_text(SCENARIO), tmp_path, listener, abort_check=check)
    done: BuildRecord = {"build": "first", "repetition": 1, "status": "completed",
                         "started_at": "x", "kind": "shop", "preset": "shop",
                         "metrics_map": {}, "breaker": None}  # fmt: skip
    experiment.manifest.builds["first"] = done
    info: BuildRecord = {**done, "build": "second", "status": "running", "t0": 1000.0}
    experiment.manifest.builds["second"] = info
    return experiment, info


def test_each_phase_is_checked_once_when_due_and_a_failing_gate_stops(tmp_path: Path) -> None:
    verdict = AbortVerdict("g", "second.payments.p95[rest] <= 1s", 2.5, 1.0)
    check = Scripted(None, verdict)
    experiment, info = _watch(tmp_path, check, [])
    stop = experiment._abort_watch("second", info)
    assert stop is not None
    assert not stop(1007.9) and check.asked == []  # the outage settles at 8 s
    assert not stop(1008.5) and not stop(1012.0)  # asked once, the gate passed
    assert check.asked == [("second", "outage", {"first"})]
    assert stop(1024.2)  # after rest: the gate failed, the watch stops the load
    assert info["abort"] == {"gate": "g", "expr": verdict.expr, "phase": "rest",
                             "at_s": info["abort"]["at_s"], "value": 2.5, "limit": 1.0}  # fmt: skip
    experiment.folder.close()


def test_a_check_that_cannot_read_the_data_so_far_warns_and_the_build_goes_on(
    tmp_path: Path,
) -> None:
    warnings: list[str] = []
    check = Scripted(InputError("samples.csv: not a CSV"), None)
    experiment, info = _watch(tmp_path, check, warnings)
    stop = experiment._abort_watch("second", info)
    assert stop is not None and not stop(1030.0)  # both phases asked, in order
    assert [phase for _, phase, _ in check.asked] == ["outage", "rest"]
    assert warnings == [
        "second: abort gates after phase 'outage' unchecked: samples.csv: not a CSV"
    ]
    assert "abort" not in info
    experiment.folder.close()
