"""The refinement's selection: the recommended candidate and the neighbours within noise of
it (overlapping intervals, else a relative tolerance), none when all are far apart, the
40-run cap; the rounds pooled into one mean and interval; the record in tune.json."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.scenario.sweep import Refine
from harness.tune.folder import TuneFolder
from harness.tune.plan import load_plan
from harness.tune.rank import Check, Outcome
from harness.tune.refine import pool, select
from harness.tune.report import markdown, tune_result
from tests.tune.test_rank import CI, FIGURES, _build, _run


def _o(
    name: str,
    objective: float,
    interval: list[float] | None = None,
    feasible: bool = True,
    scores: list[float | None] | None = None,
    on_front: bool = True,
) -> Outcome:
    """A measured candidate; on the front unless told (only a candidate on the front may be
    recommended: ``harness.tune.rank.admissible``)."""
    out = Outcome(name, "grid", {}, "measured", status="completed", objective=objective)
    out.objective_interval = interval
    out.scores = scores or [None, None]
    out.on_front = on_front
    if not feasible:
        out.checks = [Check("x <= 1", "fail", 2.0, 1.0)]
    return out


def test_one_repetition_picks_the_neighbours_within_the_tolerance_nearest_first() -> None:
    ranked = [_o("best", 0.20), _o("a", 0.215), _o("b", 0.205), _o("far", 0.30)]
    sel = select(ranked, Refine(repeats=2, within="10%"), repeat=1, used=4)
    assert sel.names == ["best", "b", "a"]
    assert sel.picked[0]["why"] == "recommended" and "within 10% of 0.2" in sel.picked[1]["why"]
    assert sel.extra_runs == 6 and sel.note == ""


def test_intervals_decide_when_both_have_one_not_the_tolerance() -> None:
    ranked = [
        _o("best", 0.20, [0.18, 0.22]),
        _o("overlaps", 0.26, [0.21, 0.30]),  # 30 % away, and noise cannot tell them apart
        _o("tight", 0.205, [0.2201, 0.23]),  # 2.5 % away, and told apart
    ]
    sel = select(ranked, Refine(within=0.1), repeat=3, used=9)
    assert sel.names == ["best", "overlaps"] and "intervals overlap" in sel.picked[1]["why"]
    assert sel.extra_runs == 2 * 2 * 3  # 2 candidates x 2 rounds x --repeat 3


def test_none_when_all_are_far_apart_or_the_near_ones_fail_a_constraint() -> None:
    ranked = [_o("best", 0.20), _o("near-but-infeasible", 0.201, feasible=False)]
    ranked += [_o("far", 0.40)]
    sel = select(ranked, Refine(), repeat=1, used=3)
    assert sel.picked == [] and "no candidate within noise of best" in sel.note
    assert select([_o("x", 1.0, feasible=False)], Refine(), 1, 1).note.startswith("nothing")


def test_front_neighbours_within_noise_on_a_score_only_when_asked() -> None:
    ranked = [
        _o("best", 0.20, scores=[10.0, 0.2], on_front=True),
        _o("side", 0.40, scores=[10.5, 0.4], on_front=True),
    ]
    assert select(ranked, Refine(), 1, 2).picked == []
    sel = select(ranked, Refine(front=True), 1, 2)
    assert sel.names == ["best", "side"] and sel.picked[1]["why"].startswith("front score 1")


def test_the_cap_trims_the_farthest_or_refuses() -> None:
    ranked = [_o("best", 0.20), _o("a", 0.201), _o("b", 0.202), _o("c", 0.203)]
    trimmed = select(ranked, Refine(repeats=2), repeat=1, used=35)  # 5 left: 2 candidates
    assert trimmed.names == ["best", "a"] and trimmed.extra_runs == 4
    assert "left out, the farthest: b, c" in trimmed.note
    refused = select(ranked, Refine(repeats=2), repeat=1, used=37)  # 3 left: 1 candidate
    assert refused.picked == [] and "nothing refined" in refused.note


def test_rounds_pool_to_their_mean_and_interval_and_any_failing_round_fails() -> None:
    rounds = [_o("c", 0.2, scores=[1.0, 0.2]), _o("c", 0.3, scores=[3.0, 0.3])]
    pooled = pool(rounds)
    assert pooled.rounds == 2 and abs((pooled.objective or 0) - 0.25) < 1e-12
    assert pooled.objective_interval is not None
    assert 0.2 <= pooled.objective_interval[0] <= pooled.objective_interval[1] <= 0.3
    assert pooled.scores == [2.0, 0.25] and pooled.feasible
    assert not pool([*rounds, _o("c", 0.2, feasible=False)]).feasible


def test_a_refined_tune_ranks_on_every_round_and_says_why(tmp_path: Path) -> None:
    plan = load_plan(CI)
    folder = TuneFolder.create(tmp_path, plan, 1)
    first = {n: _build(*v) for n, v in FIGURES.items()} | {"fr90-w60": _build(1, 1, 1)}
    _run(folder, "a", first)
    _run(folder, "b", {"fr25-w20": _build(0.55, 10.0, 95.0)})  # its 2nd round: worse
    record = {"repeats": 1, "within": "10%", "note": "", "extra_runs": 1}
    record["picked"] = [{"name": "fr25-w20", "why": "recommended"}]
    folder.refine_record.write_text(json.dumps(record))
    result = tune_result(folder, plan)
    by_name = {c["name"]: c for c in result["candidates"]}
    refined = by_name["fr25-w20"]
    assert refined["rounds"] == 2 and abs(refined["objective"] - 0.40) < 1e-12
    assert refined["objective_interval"] is not None
    assert result["recommended"] == "fr90-w10"  # 0.35: the mean of both rounds is worse
    assert result["refined"] == record
    text = markdown(result)
    assert "## Refinement" in text and "- `fr25-w20`: recommended" in text


def test_the_cli_refines_nothing_when_all_are_far_apart_and_says_so(tmp_path: Path) -> None:
    plan = load_plan(CI)
    folder = TuneFolder.create(tmp_path, plan, 1)
    _run(folder, "a", {n: _build(*v) for n, v in FIGURES.items()} | {"fr90-w60": _build(1, 1, 1)})
    out = CliRunner().invoke(app, ["tune", "--resume", str(folder.path), "--refine", "1"])
    assert out.exit_code == 0, out.output
    assert "no candidate within noise of fr25-w20" in out.output
    assert json.loads(folder.refine_record.read_text())["picked"] == []
    assert json.loads((folder.path / "tune.json").read_text())["refined"]["picked"] == []
