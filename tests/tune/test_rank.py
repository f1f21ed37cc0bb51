"""Candidates ranked from their runs' reports: constraints, objective, front, resume, check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from harness.cli import app
from harness.tune.folder import TuneFolder
from harness.tune.plan import load_plan
from harness.tune.recommend import recommended_config
from harness.tune.report import tune_result, write_tune_report
from harness.tune.screen import picks

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "scenarios/ci/tune-short.yaml"

# name -> (products p99 in the outage, blocked_pct_healthy, payments success in calm)
FIGURES = {
    "current": (0.30, 28.0, 90.0),
    "fr25-w10": (0.20, 27.0, 40.0),
    "fr25-w20": (0.25, 10.0, 95.0),
    "fr25-w60": (0.40, 5.0, 99.0),
    "fr90-w10": (0.35, 12.0, 99.0),
    "fr90-w20": (0.50, 20.0, 99.0),
}


def _build(p99: float, blocked: float, calm: float, status: str = "completed") -> dict[str, Any]:
    endpoints = {"products": {"latency_s": {"p99": p99}}, "payments": {"success_pct": calm}}
    return {
        "status": status,
        "endpoints": endpoints,
        "timeline": {"blocked_pct_healthy": blocked},
        "phases": {
            "outage": {"endpoints": {"products": {"latency_s": {"p99": p99}}}},
            "calm": {"endpoints": {"payments": {"success_pct": calm}}},
        },
    }


def _run(folder: TuneFolder, stamp: str, builds: dict[str, dict[str, Any]]) -> None:
    run = folder.runs / "tune-short" / stamp
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (run / "report.json").write_text(json.dumps({"builds": builds}))


def _folder(tmp_path: Path) -> tuple[TuneFolder, Any]:
    plan = load_plan(CI)
    folder = TuneFolder.create(tmp_path, plan, 1)
    first = dict(list(FIGURES.items())[:3])
    _run(folder, "a", {n: _build(*v) for n, v in first.items()})
    rest = dict(list(FIGURES.items())[3:])
    _run(
        folder,
        "b",
        {n: _build(*v) for n, v in rest.items()} | {"fr90-w60": _build(1, 1, 1, "failed")},
    )
    return folder, plan


def _brute_force() -> str:
    feasible = {n: v for n, v in FIGURES.items() if v[1] <= 25 and v[2] >= 50}
    return min(feasible, key=lambda n: feasible[n][0])


def test_the_recommendation_is_the_best_feasible_by_the_objective(tmp_path: Path) -> None:
    folder, plan = _folder(tmp_path)
    result = tune_result(folder, plan)
    assert result["recommended"] == _brute_force() == "fr25-w20"
    ranked = [c["name"] for c in result["candidates"]]
    assert ranked[:4] == ["fr25-w20", "fr90-w10", "fr25-w60", "fr90-w20"]  # feasible first
    assert ranked[-1] == "fr90-w60" and result["missing"] == ["fr90-w60"]  # failed: not kept
    by_name = {c["name"]: c for c in result["candidates"]}
    assert not by_name["fr25-w10"]["feasible"] and by_name["fr25-w10"]["rank"] == 5


def test_the_front_is_every_feasible_candidate_no_other_beats_on_both(tmp_path: Path) -> None:
    folder, plan = _folder(tmp_path)
    result = tune_result(folder, plan)
    points = {n: (v[1], v[0]) for n, v in FIGURES.items() if v[1] <= 25 and v[2] >= 50}
    brute = {
        n
        for n, (x, y) in points.items()
        if not any(a <= x and b <= y and (a, b) != (x, y) for a, b in points.values())
    }
    assert set(result["front"]) == brute == {"fr25-w20", "fr25-w60"}


def test_the_sensitivity_is_the_spread_of_the_objective_means_per_value(tmp_path: Path) -> None:
    folder, plan = _folder(tmp_path)
    s = tune_result(folder, plan)["sensitivity"][
        "resilience4j.circuitbreaker.failure-rate-threshold"
    ]
    assert s["means"]["25"] == (0.20 + 0.25 + 0.40) / 3
    assert abs(s["spread"] - ((0.35 + 0.50) / 2 - (0.20 + 0.25 + 0.40) / 3)) < 1e-9


def test_resume_runs_only_the_missing_and_report_and_check_read_the_folder(tmp_path: Path) -> None:
    folder, plan = _folder(tmp_path)
    assert set(folder.finished()) == set(FIGURES)
    assert [c.name for b in plan.batches(["fr90-w60"]) for c in b] == ["fr90-w60"]
    runner = CliRunner()
    ok = runner.invoke(app, ["tune", "--report", str(folder.path), "--check", "fr25-w20"])
    assert ok.exit_code == 0, ok.output
    assert (folder.path / "tune.json").is_file() and (folder.path / "front.png").is_file()
    dominated = runner.invoke(app, ["tune", "--report", str(folder.path), "--check", "fr90-w20"])
    assert dominated.exit_code == 1 and "dominated" in dominated.output
    infeasible = runner.invoke(app, ["tune", "--report", str(folder.path), "--check", "fr25-w10"])
    assert infeasible.exit_code == 1 and "fails a constraint" in infeasible.output


def test_the_recommended_config_is_an_application_yml_block(tmp_path: Path) -> None:
    folder, plan = _folder(tmp_path)
    text = write_tune_report(folder, plan)["recommended_config"]["text"]
    assert text.startswith("resilience4j:\n  circuitbreaker:\n    instances:\n      pgClient:\n")
    assert "failure-rate-threshold: 25" in text and "sliding-window-size: 20" in text
    md = (folder.path / "tune.md").read_text()
    assert "fr25-w20 **recommended**" in md and "--check fr25-w20" in md


def test_a_command_build_is_recommended_as_its_environment() -> None:
    plan_like = load_plan(CI).candidates[0]
    plan_like.build = {
        "command": "node server.js",
        "env": {"ERROR_THRESHOLD": "25", "PORT": "{port}"},
    }
    assert recommended_config(plan_like, ["env.ERROR_THRESHOLD"])[1].endswith("\nnode server.js\n")
    plan_like.build = {
        "command": ["node", "server.js"],
        "env": {"ERROR_THRESHOLD": "25", "PORT": "{port}"},
    }
    language, text = recommended_config(plan_like, ["env.ERROR_THRESHOLD"])
    assert language == "sh" and text == "export ERROR_THRESHOLD=25\nnode server.js\n"


def test_the_screen_runs_the_current_setting_the_best_and_a_spread_of_others() -> None:
    plan = load_plan(CI)
    plan.sweep.screen.best, plan.sweep.screen.others = 2, 2
    reports: dict[str, Any] = {n: {"builds": {n: _build(*v)}} for n, v in FIGURES.items()} | {
        "fr90-w60": {"builds": {"fr90-w60": _build(0.9, 1.0, 99.0)}}
    }
    chosen = picks(plan, reports)
    # simulated ranking, the current setting apart: fr25-w20, fr90-w10 (the best 2), then
    # fr25-w60, fr90-w20, fr25-w10, fr90-w60 (its p99 0.9 s fails a constraint): 2 others
    # spread over those are the first and the last
    assert chosen == ["current", "fr25-w20", "fr90-w10", "fr25-w60", "fr90-w60"]


def test_with_no_feasible_candidate_the_front_is_empty(tmp_path: Path) -> None:
    """The front is drawn among the feasible candidates (docs/tune.md): with none, no front,
    where it listed the infeasible ones, so --check passed on one (issue 32, item 8)."""
    plan = load_plan(CI)
    folder = TuneFolder.create(tmp_path, plan, 1)
    builds = {n: _build(v[0], 60.0, v[2]) for n, v in FIGURES.items()}  # all block > 25 %
    _run(folder, "a", builds | {"fr90-w60": _build(0.3, 60.0, 99.0)})
    result = tune_result(folder, plan)
    assert result["recommended"] is None
    assert result["front"] == [] and not any(c["on_front"] for c in result["candidates"])
    done = CliRunner().invoke(app, ["tune", "--report", str(folder.path), "--check", "fr25-w20"])
    assert done.exit_code == 1 and "fails a constraint" in done.output


def test_check_of_an_unknown_candidate_is_bad_input(tmp_path: Path, monkeypatch: Any) -> None:
    """``--check NAME`` of no candidate is exit 2 before anything runs (exit 1 means a
    check that failed), for a fresh tune (no tune folder made) and a tune folder."""
    folder, _ = _folder(tmp_path)
    done = CliRunner().invoke(app, ["tune", "--report", str(folder.path), "--check", "fr26-w20"])
    assert done.exit_code == 2, done.output
    assert "fr26-w20" in done.output and "fr25-w20" in done.output  # the candidates named

    def no_run(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing may run")

    monkeypatch.setattr("harness.run.experiment.Experiment", no_run)
    results = tmp_path / "fresh"
    fresh = CliRunner().invoke(
        app, ["tune", str(CI), "--results", str(results), "--check", "fr26-w20"]
    )
    assert fresh.exit_code == 2, fresh.output
    assert not results.exists()
