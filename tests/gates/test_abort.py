"""Gates with ``abort: true``: which are refused, when each is decided, and its verdict on a
build's live CSVs (what ``harness run`` reads after a phase, the build still running)."""

from __future__ import annotations

import json
from collections.abc import Collection
from functools import partial
from pathlib import Path

import pytest

from harness.analysis.figures import analyse
from harness.core.errors import ScenarioError
from harness.gates.abort import GateAbort, abort_gates
from harness.gates.evaluate import evaluate
from harness.results.manifest import BuildRecord, ManifestRecord, manifest_record
from harness.results.model import RunResult, live_build
from harness.run.abort import AbortAsk, live_run
from harness.scenario.abort import checkpoints, decided_after, due, settle_s
from harness.scenario.gates import parse_gate
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario

SCENARIO = """\
name: abort-unit
warmup: 0s
duration: 20s
traffic:
  payments: {method: POST, path: /api/payments, rate: 5, timeout: 2s, calls-gateway: true}
pg: {phases: [{name: outage, start: 0s, duration: 4s, fault: {type: timeout}},
              {name: mid, start: 4s, duration: 6s, fault: {type: healthy}},
              {name: late, start: 10s, duration: 10s, fault: {type: healthy}}]}
builds:
  slow: {profile: retry-only, workers: 8}
  quick: {profile: retry-only, workers: 8}
"""


def _scenario(*gates: str) -> Scenario:
    listed = "".join(f"\n  - {g}" for g in gates) or " []"
    return load_scenario_text(SCENARIO + f"gates:{listed}\n").scenario


def _problems(gate: str) -> str:
    with pytest.raises(ScenarioError) as caught:
        _scenario(gate)
    return str(caught.value)


def test_abort_refuses_whole_window_and_baseline_figures_at_the_gate_line() -> None:
    whole = _problems('{expr: "slow.payments.p99 <= 1s", abort: true}')
    assert "<scenario>:13:46:" in whole and "gates.0.abort" in whole
    assert "slow.payments.p99 covers the whole window" in whole
    mixed = _problems('{expr: "slow.payments.p99[outage] <= quick.payments.p99", abort: true}')
    assert "quick.payments.p99 covers the whole window" in mixed
    base = _problems('{expr: "slow.payments.p99[outage] <= baseline.slow.payments.p99[outage]", '
                     "abort: true}")  # fmt: skip
    assert "baseline" in base and "gates.0.abort" in base
    # k6's delayAbortEval has no counterpart: the phase's end is when a gate is decided.
    assert "delay" in _problems('{expr: "slow.payments.p99[outage] <= 1s", abort: true, delay: 5s}')
    # Without abort, a whole-window gate is as before; cut to phases, abort is taken.
    _scenario('{expr: "slow.payments.p99 <= 1s"}')
    ok = _scenario(
        '{expr: "slow.payments.p99[outage] + slow.payments.p99[mid] <= 1s", abort: true}'
    )
    assert [g.name for g in abort_gates(ok)] == [
        "slow.payments.p99[outage] + slow.payments.p99[mid] <= 1s"
    ]


def test_a_gate_is_decided_after_its_last_phase_settles_while_one_of_its_builds_runs() -> None:
    scenario = _scenario()
    assert settle_s(scenario) == 4.0  # the 2 s timeout, and the live logs' flush
    own = parse_gate("slow.payments.p99[mid] <= 1s + slow.payments.p99[outage]")
    pair = parse_gate("quick.payments.p99[outage] <= slow.payments.p99[late]")
    assert decided_after(own, scenario) == "mid" and decided_after(pair, scenario) == "late"
    assert checkpoints([own, pair], scenario, "slow") == [("mid", 14.0), ("late", 24.0)]
    assert checkpoints([own, pair], scenario, "quick") == [("late", 24.0)]
    assert due(own, scenario, "slow", "mid", finished=())
    assert not due(own, scenario, "slow", "outage", finished=())  # mid not over yet
    assert not due(own, scenario, "quick", "mid", finished=("slow",))  # not quick's gate
    # Comparing builds: only once the other has finished in this run.
    assert not due(pair, scenario, "quick", "late", finished=())
    assert due(pair, scenario, "quick", "late", finished=("slow",))


T0 = 1_800_000_000.0


def _live_build(
    run_dir: Path, name: str, latency_s: float, until_s: float, status_after: int = 200
) -> BuildRecord:
    """A build folder as a running build leaves it: live CSVs, a request every 0.2 s up to
    ``until_s`` answered after ``latency_s`` in the outage (4 s), 10 ms after it."""
    bdir = run_dir / name
    bdir.mkdir(parents=True)
    samples, ledger = (
        ["endpoint,index,intended_start,actual_start,end,status,error,outcome"],
        ["arrival,key,attempt,phase,fault,status,decision,duration_s,client_gone,path"],
    )
    for i in range(int(until_s / 0.2)):
        start = T0 + i * 0.2
        took, status = (latency_s, 200) if i * 0.2 < 4 else (0.01, status_after)
        samples.append(f"payments,{i},{start},{start},{start + took},{status},,ok")
        ledger.append(f"{start},k{i},1,outage,timeout,200,ok,{took},false,/v1/payments/approve")
    samples.append("payments,999,1800000019.5,18")  # a row cut short by the flush: skipped
    (bdir / "samples.csv").write_text("\n".join(samples) + "\n")
    (bdir / "pg-ledger.csv").write_text("\n".join(ledger) + "\n")
    (bdir / "metrics.csv").write_text("t,source,series,labels,value\n")
    record: BuildRecord = {
        "build": name,
        "repetition": 1,
        "status": "running",
        "started_at": "2027-01-15T08:00:00Z",
        "kind": "shop",
        "preset": "shop",
        "metrics_map": {},
        "breaker": None,
        "t0": T0,
    }
    return record


def _manifest(builds: dict[str, BuildRecord]) -> ManifestRecord:
    raw = {
        "scenario_name": "abort-unit",
        "scenario_file": "s.yaml",
        "scenario_sha256": "0" * 64,
        "seed": 0,
        "harness_version": "0",
        "host": {"hostname": "h", "platform": "p", "python": "3", "cpus": 2},
        "started_at": "2027-01-15T08:00:00Z",
        "run_id": "r",
        "repeat": 1,
        "status": "running",
        "ended_at": None,
        "error": None,
        "builds": builds,
    }
    return manifest_record(json.loads(json.dumps(raw)))


def _ask(
    run_dir: Path, manifest: ManifestRecord, build: str, finished: tuple[str, ...] = ()
) -> AbortAsk:
    """The check ``harness run`` makes after the outage phase, on the run folder as it is."""
    return AbortAsk(
        build, "outage", finished, partial(live_run, run_dir, manifest, build, finished)
    )


def test_the_verdict_is_the_final_reports_on_the_phases_already_over(tmp_path: Path) -> None:
    gate = '{name: fast in the outage, expr: "slow.payments.p95[outage] <= 1s", abort: true}'
    scenario = _scenario(gate, '{expr: "slow.payments.p95[late] <= 1s", abort: true}')
    manifest = _manifest({"slow": _live_build(tmp_path, "slow", 2.0, until_s=9.0)})
    check = GateAbort(scenario)
    verdict = check(_ask(tmp_path, manifest, "slow"))
    assert verdict is not None and verdict.gate == "fast in the outage"
    assert verdict.value == pytest.approx(2.0) and verdict.limit == 1.0
    # The figure it read is the final report's over the same rows.
    done = RunResult(
        tmp_path,
        manifest,
        {"slow": live_build(tmp_path / "slow", "slow", manifest["builds"]["slow"])},
    )
    final = evaluate(parse_gate("slow.payments.p95[outage] <= 1s"), analyse(done, scenario))
    assert final.left == verdict.value
    record = verdict.record("outage", 8.4)
    assert record["phase"] == "outage" and record["at_s"] == 8.4
    assert (record["gate"], record["value"], record["limit"]) == (
        "fast in the outage",
        final.left,
        1,
    )


def test_a_passing_gate_or_one_not_measured_does_not_stop_the_build(tmp_path: Path) -> None:
    scenario = _scenario('{expr: "quick.payments.p95[outage] <= 1s", abort: true}',
                         '{expr: "quick.busy_workers.max[outage] <= 1", abort: true}')  # fmt: skip
    manifest = _manifest({"quick": _live_build(tmp_path, "quick", 0.2, until_s=9.0)})
    check = GateAbort(scenario)
    assert check(_ask(tmp_path, manifest, "quick")) is None
    # No scrape of the target yet: busy workers not measured, an error, which does not stop it.
    assert [r.verdict for _, _, r in check.results] == ["pass", "error"]


def test_a_gate_comparing_builds_reads_the_finished_one_and_waits_for_it(tmp_path: Path) -> None:
    scenario = _scenario('{expr: "quick.payments.p95[outage] <= 0.5 * slow.payments.p95[outage]", '
                         "abort: true}")  # fmt: skip
    slow = _live_build(tmp_path, "slow", 0.3, until_s=20.0)
    manifest = _manifest({"slow": slow, "quick": _live_build(tmp_path, "quick", 0.2, until_s=9.0)})
    (tmp_path / "slow" / "samples.csv").rename(tmp_path / "slow" / "kept.csv")

    def never(named: Collection[str]) -> RunResult:
        raise AssertionError("no data is read for a gate that is not due")

    check = GateAbort(scenario)
    assert check(AbortAsk("quick", "outage", (), never)) is None  # slow has not run yet
    assert check(AbortAsk("slow", "outage", (), never)) is None  # quick has not run yet
    # slow finished: its samples kept as the run keeps them (here: its CSV read back).
    (tmp_path / "slow" / "kept.csv").rename(tmp_path / "slow" / "samples.csv")
    manifest["builds"]["slow"]["status"] = "completed"
    verdict = check(_ask(tmp_path, manifest, "quick", finished=("slow",)))
    assert verdict is not None and verdict.value == pytest.approx(0.2)
    assert verdict.limit == pytest.approx(0.15)


def test_a_check_reads_only_the_finished_builds_its_gates_name(tmp_path: Path) -> None:
    scenario = _scenario('{expr: "quick.payments.p95[outage] <= 1s", abort: true}')
    slow = _live_build(tmp_path, "slow", 0.3, until_s=20.0)
    slow["status"] = "completed"
    manifest = _manifest({"slow": slow, "quick": _live_build(tmp_path, "quick", 2.0, until_s=9.0)})
    read: list[list[str]] = []

    def run(named: Collection[str]) -> RunResult:
        result = live_run(tmp_path, manifest, "quick", ("slow",), named)
        read.append(sorted(result.builds))
        return result

    verdict = GateAbort(scenario)(AbortAsk("quick", "outage", ("slow",), run))
    assert verdict is not None and verdict.value == pytest.approx(2.0)
    assert read == [["quick"]]  # slow finished, but no gate due names it: not read
    assert sorted(run(["quick", "slow"]).builds) == ["quick", "slow"]  # a comparison reads it


def test_an_aborted_builds_later_phases_are_not_measured_not_zero(tmp_path: Path) -> None:
    scenario = _scenario('{name: g, expr: "slow.payments.p95[outage] <= 1s", abort: true}')
    record = _live_build(tmp_path, "slow", 2.0, until_s=8.4)
    record["status"] = "aborted"
    record["abort"] = {"gate": "g", "expr": "slow.payments.p95[outage] <= 1s", "phase": "outage",
                       "at_s": 8.4, "value": 2.0, "limit": 1.0}  # fmt: skip
    manifest = _manifest({"slow": record})
    run = RunResult(tmp_path, manifest, {"slow": live_build(tmp_path / "slow", "slow", record)})
    report = analyse(run, scenario)
    build = report["builds"]["slow"]
    assert build["status"] == "aborted" and build["abort"]["gate"] == "g"
    assert list(build["phases"]) == ["outage"]  # mid (4-10 s) was cut at 8.4 s, late never ran
    assert "aborted at 8.4 s" in build["not_measured"]["phases.mid"]
    assert "phases.late" in build["not_measured"]
    assert any("aborted at 8.4 s of 20 s" in w for w in build["warnings"])
    later = evaluate(parse_gate("slow.payments.p95[late] <= 1s"), report)
    assert later.verdict == "error" and "aborted at 8.4 s" in later.detail
    assert build["validity"]["scrape_gaps"] == []  # looked for up to the stop only


def test_a_recovery_an_aborted_build_never_saw_is_not_measured_not_bounded(
    tmp_path: Path,
) -> None:
    scenario = _scenario('{name: g, expr: "slow.payments.p95[outage] <= 1s", abort: true}')
    record = _live_build(tmp_path, "slow", 2.0, until_s=8.4, status_after=500)
    done = RunResult(tmp_path, _manifest({"slow": record}), {})
    done.builds["slow"] = live_build(tmp_path / "slow", "slow", record)
    assert "timeline.time_to_recover_s" in analyse(done, scenario)["builds"]["slow"]["not_reached"]
    record["abort"] = {"gate": "g", "expr": "e", "phase": "outage", "at_s": 8.4,
                       "value": 2.0, "limit": 1.0}  # fmt: skip
    done.builds["slow"] = live_build(tmp_path / "slow", "slow", record)
    aborted = analyse(done, scenario)["builds"]["slow"]
    # "> 16 s" would claim 16 s after the outage were seen; the load stopped 4.4 s after it.
    assert "not_reached" not in aborted
    assert "aborted at 8.4 s" in aborted["not_measured"]["timeline.time_to_recover_s"]
