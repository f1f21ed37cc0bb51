"""``harness gate --baseline`` with main's run, and the pull request's summary (issue 31, 3-4).

The stored quickstart run is the pull request's run; its copy, changed the way another
run would have written it, is main's. A baseline of another scenario, of another harness
version, or without a figure a gate reads is refused (exit 2) before any verdict; a
report.json kept alone is a baseline as its folder is. The summary puts the verdicts
first, the failing ones on top, then only the figures the judge or the intervals say
moved, then links to the charts; in a GitHub job it is appended to the job's summary.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from harness.cli import app
from harness.gates.evaluate import GateResult
from harness.report.compare import Row
from harness.report.summary import moved, pr_summary
from tests.report.runfolders import RUN

PAIR = "after.products.p95[outage] <= 1.5 * baseline.after.products.p95[outage]"


def _main_run(tmp_path: Path, change: Callable[[dict[str, Any]], None] = lambda r: None) -> Path:
    run_dir = tmp_path / "main-run"
    shutil.copytree(RUN, run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    change(report)
    (run_dir / "report.json").write_text(json.dumps(report))
    return run_dir


def _gate(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, ["gate", str(RUN), *args], env=env)


def _one_line(result: Result) -> str:
    return " ".join(result.output.split())


def test_main_s_run_is_a_baseline_as_a_folder_or_its_report_json_alone(tmp_path: Path) -> None:
    main = _main_run(tmp_path)
    folder = _gate("--baseline", str(main), "--gate", PAIR, "--no-scenario-gates")
    assert folder.exit_code == 0, folder.output
    kept = tmp_path / "artifact" / "report.json"
    kept.parent.mkdir()
    shutil.copy(main / "report.json", kept)
    alone = _gate("--baseline", str(kept), "--gate", PAIR, "--no-scenario-gates")
    assert alone.exit_code == 0, alone.output
    assert "warning" not in alone.output


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda r: r.update(scenario="seed-003-slow-gateway"),
            "is a run of scenario 'seed-003-slow-gateway' and the run one of 'quickstart'",
        ),
        (
            lambda r: r.update(harness_version="0.0.1"),
            "was made by harness 0.0.1 and the run by harness 9.9.9",
        ),
        (
            lambda r: r["builds"].pop("after"),
            "baseline.after.products.p95[outage]: the baseline has no build 'after' "
            "(it ran before)",
        ),
        (
            lambda r: r["builds"]["after"]["endpoints"].pop("products"),
            "baseline.after.products.p95[outage]: the baseline has no such figure",
        ),
    ],
    ids=["another-scenario", "another-harness", "no-build", "no-figure"],
)
def test_a_baseline_that_cannot_be_main_s_run_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], said: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    report = json.loads((run / "report.json").read_text())
    report["harness_version"] = "9.9.9"
    (run / "report.json").write_text(json.dumps(report))
    main = _main_run(tmp_path, change)
    args = ["gate", str(run), "--baseline", str(main), "--gate", PAIR, "--no-scenario-gates"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert said in _one_line(result)
    assert "Traceback" not in result.output


def test_a_missing_baseline_is_said(tmp_path: Path) -> None:
    result = _gate("--baseline", str(tmp_path / "nowhere"), "--gate", PAIR)
    assert result.exit_code == 2
    assert "no such run folder or report.json" in _one_line(result)


def test_the_summary_puts_failures_first_and_links_the_charts(tmp_path: Path) -> None:
    out, job = tmp_path / "summary.md", tmp_path / "step-summary.md"
    job.write_text("earlier step\n")
    run = tmp_path / "run"  # the stored run keeps no charts: as a run draws them
    shutil.copytree(RUN, run)
    (run / "charts").mkdir()
    for chart in ("latency_over_time", "busy_workers"):
        (run / "charts" / f"{chart}.png").write_bytes(b"\x89PNG")
    failing = "after.products.p95[outage] <= 0.001 * before.products.p95[outage]"
    result = CliRunner().invoke(
        app,
        [
            "gate",
            str(run),
            "--gate",
            failing,
            "--summary",
            str(out),
            "--charts-url",
            "https://ci.example/artifacts/run/",
        ],
        env={"GITHUB_STEP_SUMMARY": str(job)},
    )
    assert result.exit_code == 1, result.output
    text = out.read_text()
    assert text.startswith("## Resilience gates: quickstart: ❌ failed (5/6 pass)")
    table = [line for line in text.splitlines() if line.startswith("| ") and "fail" in line]
    first_row = text.split("|---|---|---|---|\n", 1)[1].splitlines()[0]
    assert table and first_row == table[0] and failing.split(" <=")[0] in first_row
    assert "**before → after**" in text  # no baseline: each build against the run's first
    url = "https://ci.example/artifacts/run/charts"
    assert f"### Charts\n\n- [busy_workers]({url}/busy_workers.png)\n" in text
    assert f"- [latency_over_time]({url}/latency_over_time.png)" in text
    assert job.read_text() == "earlier step\n" + text + "\n"  # appended, never replaced


def test_only_figures_beyond_noise_count_as_moved() -> None:
    def row(verdict: str, beyond: bool | None) -> Row:
        return Row("products.p99", 1.0, 2.0, 100.0, beyond, verdict=verdict)

    assert moved(row("worse (+24%, p=0.002)", None)) and moved(row("better (-30%)", None))
    assert moved(row("-", True))  # repeated runs whose intervals do not overlap
    assert not moved(row("within noise", False)) and not moved(row("not enough data", None))
    assert not moved(row("-", None))  # a +100 % change of one run each is not "moved"


def test_a_summary_escapes_what_would_break_its_tables() -> None:
    result = GateResult("a | b", "x", 1.0, "<=", 2.0, "pass", detail="one\ntwo")
    report: Any = {"scenario": "s", "run_id": "r", "builds": {}}
    text = pr_summary(report, [result], None, [])
    assert "| a \\| b |" in text and "(one two)" in text
    assert "nothing to compare against" in text


def test_a_judge_that_could_only_say_not_enough_data_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    from harness.gates.evaluate import gates_of, judge_shortfalls
    from harness.scenario.loader import load_scenario_text
    from tests.gates.test_abort import SCENARIO

    gates = (
        'gates: ["slow.payments.p99[outage] not worse than quick by 10%",'
        ' "slow.payments.p99 not worse than quick"]\n'
    )
    scenario = load_scenario_text(SCENARIO + gates).scenario
    once = judge_shortfalls(gates_of(scenario), scenario, repeat=1)
    assert len(once) == 2
    assert "phase 'outage' (4 s) gives 1 in 1 run(s)" in once[0]
    assert "lengthen it to 25 s or run with --repeat 5" in once[0]
    assert "the measured window (20 s) gives 4 in 1 run(s)" in once[1]
    assert "--repeat 2" in once[1]
    assert len(judge_shortfalls(gates_of(scenario), scenario, repeat=2)) == 1
    assert judge_shortfalls(gates_of(scenario), scenario, repeat=5) == []
    path = tmp_path / "short-judge.yaml"
    path.write_text(SCENARIO + gates)
    args = ["run", str(path), "--results", str(tmp_path / "results")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "needs at least 5 blocks" in _one_line(result)
    assert not (tmp_path / "results").exists()  # refused before anything started
