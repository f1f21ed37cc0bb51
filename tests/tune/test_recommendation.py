"""The recommendation passes its own check, says when its lead is within noise, and the front
chart says when a score does not vary (issue 30, item 7: ``harness tune --report DIR --check
<recommended>``, the very line tune.md prints, exited 1 "dominated (front: ...)"; the front
chart was degenerate, every point at 0 on one axis; the pick between two settings was 0.9
points of noise, unsaid). Tune folders are made as ``tests/tune/test_rank.py`` makes them:
the CI sweep's plan and run folders holding each candidate's report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.tune.folder import TuneFolder
from harness.tune.plan import load_plan
from harness.tune.report import front_figure, tune_result
from tests.tune.test_rank import CI, FIGURES, _build, _run

P99 = "products.latency_s.p99[outage]"
"""The objective's key in a report's ``ci95`` (the CI sweep minimises products.p99[outage])."""


def _sweep(tmp_path: Path, objective: str | None = None) -> Path:
    text = CI.read_text()
    if objective is not None:
        old = 'objective: {minimize: "products.p99[outage]"}'
        assert old in text
        text = text.replace(old, f"objective: {objective}")
    path = tmp_path / "tune-short.yaml"
    path.write_text(text)
    return path


def _tune(
    tmp_path: Path,
    figures: dict[str, tuple[float, float, float]],
    objective: str | None = None,
    ci: dict[str, list[float]] | None = None,
    repeat: int = 1,
) -> tuple[TuneFolder, Any]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    plan = load_plan(_sweep(tmp_path, objective))
    folder = TuneFolder.create(tmp_path / "results", plan, repeat)
    builds = {n: _build(*v) for n, v in figures.items()}
    for name, interval in (ci or {}).items():
        builds[name]["ci95"] = {P99: interval}
    _run(folder, "a", builds)
    return folder, plan


def _check(folder: TuneFolder, name: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["tune", "--report", str(folder.path), "--check", name])
    return done.exit_code, " ".join(done.output.split())


# Every candidate refuses no healthy call (blocked 0 %: the degenerate axis) and the
# objective is that very score: all tie at 0, and the first name ("current") ranked first,
# while the others beat it on the products' p99.
FLAT = {
    "current": (0.45, 0.0, 90.0),
    "fr25-w10": (0.30, 0.0, 95.0),
    "fr25-w20": (0.25, 0.0, 95.0),
    "fr25-w60": (0.40, 0.0, 99.0),
    "fr90-w10": (0.35, 0.0, 99.0),
    "fr90-w20": (0.50, 0.0, 99.0),
    "fr90-w60": (0.60, 0.0, 99.0),
}


def test_the_recommendation_passes_its_own_check_on_a_flat_score(tmp_path: Path) -> None:
    folder, plan = _tune(tmp_path, FLAT, objective="{minimize: blocked_pct_healthy}")
    result = tune_result(folder, plan)
    best = result["recommended"]
    assert best == "fr25-w20" and result["front"] == ["fr25-w20"]  # the best p99 at 0 blocked
    code, said = _check(folder, best)  # the very line tune.md prints
    assert code == 0, said
    assert f"check {best}: pass: feasible and on the front" in said
    md = (folder.path / "tune.md").read_text()
    assert f"--check {best}`" in md
    # "current" ranks first by the objective (0, as every one, first by name): said why not.
    assert result["candidates"][0]["name"] == "current"
    said = "- `current` ranks before it by the objective: dominated by fr25-w10, fr25-w20"
    assert said in md
    assert result["recommended_lead"] is None  # the front's only point: no other choice
    code, said = _check(folder, "current")
    assert code == 1 and "check current: fail: dominated by fr25-w10, fr25-w20" in said
    assert "(front: fr25-w20)" in said


def test_a_score_that_does_not_vary_is_said_not_drawn_as_a_front(tmp_path: Path) -> None:
    folder, plan = _tune(tmp_path, FLAT)
    result = tune_result(folder, plan)
    assert result["flat_scores"] == [{"score": "blocked_pct_healthy", "value": 0.0}]
    said = "blocked_pct_healthy does not vary (0 for every feasible candidate): the front is "
    said += "the best by products.p99[outage] alone."
    done = CliRunner().invoke(app, ["tune", "--report", str(folder.path)])
    assert said in " ".join(done.output.split())
    assert said in (folder.path / "tune.md").read_text()
    (ax,) = front_figure(result).axes
    assert "blocked_pct_healthy does not vary" in ax.get_title()
    assert "Pareto front" not in [line.get_label() for line in ax.lines]
    varied = tune_result(*_tune(tmp_path / "varied", FIGURES))
    assert varied["flat_scores"] == []
    (ax,) = front_figure(varied).axes
    assert "Pareto front" in [line.get_label() for line in ax.lines]


def test_the_best_by_the_objective_when_dominated_is_not_recommended(tmp_path: Path) -> None:
    """An objective that is neither front score: the best payments' success in the calm is
    beaten on both front scores by the next; the next is recommended, and passes its check."""
    figures = {
        "current": (0.50, 20.0, 99.0),  # the best by the objective, dominated
        "fr25-w10": (0.30, 5.0, 98.0),
        "fr25-w20": (0.20, 10.0, 60.0),
    }
    folder, plan = _tune(tmp_path, figures, objective='{maximize: "payments.success_pct[calm]"}')
    result = tune_result(folder, plan)
    assert result["recommended"] == "fr25-w10"
    assert result["passed_over"] == [{"name": "current", "why": "dominated by fr25-w10, fr25-w20"}]
    assert _check(folder, "fr25-w10")[0] == 0
    # Its lead is over the front's other choice, not over what it dominates.
    assert result["recommended_lead"]["over"] == "fr25-w20"
    assert result["recommended_lead"]["by"] == pytest.approx(38.0)


def test_a_lead_within_the_objectives_noise_is_said(tmp_path: Path) -> None:
    """With --repeat, each objective has its 95 % interval (report.json's ci95): fr25-w20
    (0.25 s) leads fr25-w60 (0.40 s, the front's other point), but their intervals overlap:
    "within noise"."""
    ci = {"fr25-w20": [0.15, 0.40], "fr25-w60": [0.30, 0.45]}
    folder, plan = _tune(tmp_path, FIGURES, ci=ci, repeat=3)
    result = tune_result(folder, plan)
    assert result["recommended"] == "fr25-w20"
    lead = result["recommended_lead"]
    assert lead["over"] == "fr25-w60" and lead["within_noise"] is True
    assert lead["by"] == pytest.approx(0.15)
    said = "fr25-w20 is within noise of fr25-w60 on the objective, all on the front (95% "
    said += "intervals overlap ([0.15, 0.4] and [0.3, 0.45]); told by today's rule, overlapping "
    said += "95% intervals: not the judge: fr25-w20: its report has no blocks of "
    said += "products.latency_s.p99[outage] (a report made before the judge"
    done = CliRunner().invoke(app, ["tune", "--report", str(folder.path)])
    assert done.exit_code == 0, done.output
    assert said in " ".join(done.output.split())
    assert said in " ".join((folder.path / "tune.md").read_text().split())
    assert json.loads((folder.path / "tune.json").read_text())["recommended_lead"] == lead


def test_a_lead_beyond_noise_is_said_as_such(tmp_path: Path) -> None:
    ci = {"fr25-w20": [0.24, 0.26], "fr25-w60": [0.39, 0.41]}
    folder, plan = _tune(tmp_path, FIGURES, ci=ci, repeat=3)
    result = tune_result(folder, plan)
    assert result["recommended_lead"]["within_noise"] is False
    done = CliRunner().invoke(app, ["tune", "--report", str(folder.path)])
    said = " ".join(done.output.split())
    assert "fr25-w20 leads fr25-w60 on the objective by 0.15, beyond noise (95% intervals" in said
    assert "within noise" not in said


def test_one_repetition_says_its_noise_is_not_measured(tmp_path: Path) -> None:
    """Without intervals the refinement's tolerance decides (10 %): 0.25 against 0.40 is
    beyond it, and the lead says the noise itself was not measured."""
    result = tune_result(*_tune(tmp_path, FIGURES))
    lead = result["recommended_lead"]
    assert lead["over"] == "fr25-w60" and lead["within_noise"] is False
    assert "no interval" in lead["why"] and "--repeat 3" in lead["why"]
