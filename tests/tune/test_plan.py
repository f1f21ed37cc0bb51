"""A sweep file read into candidates, and its bad input refused at the sweep's own line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import ScenarioError
from harness.scenario.sweep import Sample
from harness.tune.candidates import abbreviation, latin_hypercube
from harness.tune.folder import TuneFolder
from harness.tune.paths import get_path, set_path
from harness.tune.plan import MAX_REAL_RUNS, cut_to_phase, load_plan
from harness.tune.report import tune_result
from tests.tune.test_rank import _build as _rank_build

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "scenarios/ci/tune-short.yaml"
CB = "resilience4j.circuitbreaker"


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = CI.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "sweep.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        load_plan(path)
    return [str(p) for p in caught.value.problems]


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_ci_sweep_is_the_base_and_the_grid_named_by_their_values() -> None:
    plan = load_plan(CI)
    names = [c.name for c in plan.candidates]
    assert names == [
        "current",
        "fr25-w10",
        "fr25-w20",
        "fr25-w60",
        "fr90-w10",
        "fr90-w20",
        "fr90-w60",
    ]
    assert [c.current for c in plan.candidates] == [True] + [False] * 6
    fr25_w60 = plan.candidate("fr25-w60").build["resilience4j"]["circuitbreaker"]
    assert fr25_w60["failure-rate-threshold"] == 25 and fr25_w60["sliding-window-size"] == 60
    assert fr25_w60["minimum-number-of-calls"] == 10  # the base's other settings kept
    assert plan.candidate("current").values == {
        f"{CB}.failure-rate-threshold": 50,
        f"{CB}.sliding-window-size": 20,
    }


def test_the_generated_scenario_runs_the_candidates_with_each_constraint_as_a_gate() -> None:
    plan = load_plan(CI)
    loaded = plan.loaded(plan.batches()[0])
    assert list(loaded.scenario.builds) == [c.name for c in plan.candidates]
    exprs = [g.expr for g in loaded.scenario.gate_specs()]
    assert "fr90-w60.payments.success_pct[calm] >= 50" in exprs
    assert loaded.scenario.sweep is None and loaded.scenario.pg == plan.scenario.pg


def test_a_grid_point_equal_to_the_base_is_the_base(tmp_path: Path) -> None:
    path = _variant(tmp_path, "failure-rate-threshold: [25, 90]", "failure-rate-threshold: [50]")
    plan = load_plan(path)
    assert plan.candidate("fr50-w20").name == "current"
    assert "fr50-w20" in plan.candidate("current").aliases
    assert len(plan.candidates) == 3


def test_an_axis_over_a_setting_the_build_does_not_have_is_said_at_the_axis(
    tmp_path: Path,
) -> None:
    path = _variant(
        tmp_path, "circuitbreaker.sliding-window-size: [", "circuitbreaker.sliding-windw: ["
    )
    line = _line_of(path, "sliding-windw: [")
    problems = _problems(path)
    assert len(problems) == 1
    assert f"sweep.yaml:{line}:" in problems[0] and "unknown key" in problems[0]
    assert "did you mean" in problems[0]


def test_a_value_the_schema_refuses_is_said_at_the_axis(tmp_path: Path) -> None:
    path = _variant(
        tmp_path, "failure-rate-threshold: [25, 90]", "failure-rate-threshold: [25, 190]"
    )
    problems = _problems(path)
    line = _line_of(path, "failure-rate-threshold: [25, 190]")
    assert len(problems) == 1 and f"sweep.yaml:{line}:" in problems[0], problems


def test_an_env_axis_must_name_a_variable_the_base_sets(tmp_path: Path) -> None:
    path = tmp_path / "cmd.yaml"
    path.write_text(
        "name: cmd\nduration: 3s\ntraffic: {a: {path: /, rate: 1}}\n"
        "builds:\n  svc:\n    command: [node, server.js]\n"
        "    env: {PORT: '{port}', ERROR_THRESHOLD: '50'}\n"
        "sweep:\n  base: svc\n  grid:\n    env.ERROR_THRESHOLD: ['25', '75']\n"
        "    env.ERORR_THRESHOLD: ['1']\n"
        "  abbrev: {env.ERROR_THRESHOLD: et, env.ERORR_THRESHOLD: eo}\n"
        "  objective: {minimize: a.p99}\n  front: [a.p99, a.error_pct]\n",
        encoding="utf-8",
    )
    problems = _problems(path)
    assert len(problems) == 1 and "cmd.yaml:12:" in problems[0], problems
    assert "ERORR_THRESHOLD" in problems[0]


def test_unknown_figures_and_an_objective_that_is_no_figure_are_refused(tmp_path: Path) -> None:
    path = _variant(tmp_path, 'minimize: "products.p99[outage]"', 'minimize: "2 * 3"')
    text = path.read_text().replace("blocked_pct_healthy <= 25", "blocked_pct_healthi <= 25")
    path.write_text(text)
    problems = _problems(path)
    assert any("names no figure" in p for p in problems)
    assert any(
        f":{_line_of(path, 'blocked_pct_healthi')}:" in p and "unknown figure" in p
        for p in problems
    )


def test_an_empty_grid_axis_is_refused(tmp_path: Path) -> None:
    path = _variant(tmp_path, "failure-rate-threshold: [25, 90]", "failure-rate-threshold: []")
    assert any("has no values" in p for p in _problems(path))


def test_more_real_runs_than_the_cap_are_refused_at_the_grid(tmp_path: Path) -> None:
    values = ", ".join(str(v) for v in range(10, 10 + MAX_REAL_RUNS))
    path = _variant(
        tmp_path, "failure-rate-threshold: [25, 90]", f"failure-rate-threshold: [{values}]"
    )
    problems = _problems(path)
    assert len(problems) == 1 and f"at most {MAX_REAL_RUNS} run for real" in problems[0]
    assert f"sweep.yaml:{_line_of(path, 'failure-rate-threshold: [10')}:" in problems[0]


def test_the_cli_says_bad_input_at_its_line_and_exits_2(tmp_path: Path) -> None:
    path = _variant(
        tmp_path, "circuitbreaker.sliding-window-size: [", "circuitbreaker.sliding-windw: ["
    )
    result = CliRunner().invoke(app, ["tune", str(path), "--plan"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_a_latin_hypercube_uses_each_stratum_of_each_axis_once() -> None:
    sample = Sample(budget=8, seed=3, ranges={"a": [0, 79], "b": [0.0, 1.0], "c": ["1s", "9s"]})
    points = latin_hypercube(sample, {})
    assert len(points) == 8
    assert sorted(p["a"] // 10 for p in points) == list(range(8))  # integers, one per stratum
    assert sorted(int(p["b"] * 8) for p in points) == list(range(8))
    assert all(p["c"].endswith("ms") and 1000 <= int(p["c"][:-2]) <= 9000 for p in points)
    assert latin_hypercube(sample, {}) == points  # seeded


def test_paths_reach_dotted_keys_and_list_items() -> None:
    build = {
        "properties": {"pg.base-url": "x", "resilience4j": {"a": {"b": 1}}},
        "command": ["n", "s", "5"],
    }
    assert get_path(build, "properties.pg.base-url") == "x"
    assert (
        get_path(set_path(build, "properties.resilience4j.a.b", 2), "properties.resilience4j.a.b")
        == 2
    )
    assert set_path(build, "command.2", "7")["command"] == ["n", "s", "7"]
    assert build["command"][2] == "5"  # a copy


def test_names_and_phase_cuts() -> None:
    assert abbreviation(f"{CB}.wait-duration-in-open-state") == "wdios"
    assert abbreviation("env.ERROR_THRESHOLD") == "et"
    assert abbreviation("env.resetTimeout") == "rt"
    assert cut_to_phase("payments.success_pct[calm] >= 50")
    assert not cut_to_phase("blocked_pct_healthy <= 25")


def test_a_grid_of_thousands_is_refused_before_it_is_made(tmp_path: Path) -> None:
    values = ", ".join(str(v) for v in range(1, 101))
    path = _variant(
        tmp_path, "sliding-window-size: [10, 20, 60]", f"sliding-window-size: [{values}]"
    )
    text = path.read_text().replace(
        "failure-rate-threshold: [25, 90]", f"failure-rate-threshold: [{values}]"
    )
    path.write_text(text)
    problems = _problems(path)
    assert len(problems) == 1 and "10,001 candidates; a sweep has at most 1,000" in problems[0]


def test_the_seed_sweeps_are_plans() -> None:
    seed4 = load_plan(ROOT / "scenarios/seeds/004-thresholds-sweep.yaml")
    assert [c.name for c in seed4.candidates][:4] == ["rate-based", "naive", "probe-1", "probe-5"]
    assert len(seed4.candidates) == 8
    seed0 = load_plan(ROOT / "scenarios/seeds/000-pg-timeout-sweep.yaml")
    assert len(seed0.candidates) == 9 and seed0.candidates[0].current
    base = seed0.candidate("after").build
    assert base["resilience4j"]["retry"] == {"max-attempts": 2, "wait-duration": "100ms"}


def test_a_screen_the_simulator_cannot_make_is_refused_before_a_tune_folder(
    tmp_path: Path,
) -> None:
    """``--screen`` on what the model refuses (here a gateway with finite capacity): exit 2
    saying why, and nothing written under --results (no tune folder left half made)."""
    sweep = ROOT / "scenarios" / "ci" / "tune-short.yaml"
    text = sweep.read_text().replace(
        "pg:\n", "pg:\n  capacity: {concurrency: 10, service: {delay: 20ms}}\n", 1
    )
    scenario = tmp_path / "capacity-sweep.yaml"
    scenario.write_text(text)
    results = tmp_path / "results"
    done = CliRunner().invoke(app, ["tune", str(scenario), "--screen", "--results", str(results)])
    assert done.exit_code == 2, done.output
    assert "pg.capacity" in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)  # no traceback
    assert not results.exists() or not any(results.rglob("*"))


@pytest.mark.parametrize("bound", [".nan", ".inf", "-.inf"])
def test_a_sampled_range_bound_that_is_no_number_is_refused_at_its_line(
    tmp_path: Path, bound: str
) -> None:
    """``.nan``/``.inf`` in a sample's range: said at the range's line by validate and by
    tune (exit 2), never a YAML representer traceback (issue 32, item 5)."""
    path = _variant(
        tmp_path,
        "  grid:\n    resilience4j.circuitbreaker.failure-rate-threshold: [25, 90]\n",
        "  sample:\n    budget: 4\n    ranges:\n"
        f"      resilience4j.circuitbreaker.failure-rate-threshold: [10, {bound}]\n  grid:\n",
    )
    line = _line_of(path, "failure-rate-threshold: [10,")
    problems = _problems(path)
    assert len(problems) == 1, problems
    assert f"sweep.yaml:{line}:" in problems[0] and "finite" in problems[0], problems
    for command in (["validate", str(path)], ["tune", str(path), "--plan"]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert f"sweep.yaml:{line}:" in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_sampled_float_range_makes_candidates_the_scenario_can_write(tmp_path: Path) -> None:
    """A float range's values are plain floats (numpy's float64 is no YAML the generated
    scenario can write)."""
    points = latin_hypercube(Sample(budget=4, seed=1, ranges={"b": [0.5, 0.9]}), {})
    assert all(type(p["b"]) is float for p in points)


def _colliding_command_sweep(tmp_path: Path) -> Path:
    """Axis values a candidate's name cannot tell apart (``a.b``/``apb``, ``a/b``/``a_b``,
    two long values cut to one prefix) and a point named as a grid candidate would be."""
    long = "x" * 120
    path = tmp_path / "cmd.yaml"
    path.write_text(
        "name: cmd\nduration: 3s\ntraffic: {a: {path: /, rate: 1}}\n"
        "builds:\n  svc:\n    command: [node, server.js]\n"
        "    env: {PORT: '{port}', MODE: plain, LIMIT: '5'}\n"
        "sweep:\n  base: svc\n"
        "  points:\n    modea_b: {env.LIMIT: '7'}\n"
        f"  grid:\n    env.MODE: [a.b, apb, a/b, a_b, {long}1, {long}2]\n"
        "  abbrev: {env.MODE: mode, env.LIMIT: lim}\n"
        "  objective: {minimize: a.p99}\n  front: [a.p99, a.error_pct]\n",
        encoding="utf-8",
    )
    return path


def _colliding_shop_sweep(tmp_path: Path) -> Path:
    """25 and 25.0 on one axis, and a point named as the grid's ``fr25-w10``."""
    path = _variant(
        tmp_path, "failure-rate-threshold: [25, 90]", "failure-rate-threshold: [25, 25.0]"
    )
    text = path.read_text().replace(
        "  grid:\n",
        f"  points:\n    fr25-w10: {{{CB}.failure-rate-threshold: 30, "
        f"{CB}.sliding-window-size: 10}}\n  grid:\n",
        1,
    )
    path.write_text(text)
    return path


@pytest.mark.parametrize("make", [_colliding_command_sweep, _colliding_shop_sweep])
def test_candidates_whose_names_would_collide_each_get_a_name_of_their_own(
    tmp_path: Path, make: Any
) -> None:
    """Every candidate (and alias) a name no other has, and what runs under that name is
    that candidate's build (issue 32, item 1: only one of each pair ran, both rows showed
    its figures)."""
    plan = load_plan(make(tmp_path))
    names = [n for c in plan.candidates for n in (c.name, *c.aliases)]
    assert len(names) == len(set(names)), names
    assert all(len(n) <= 100 for n in names)
    for c in plan.candidates:
        assert plan.candidate(c.name) is c
    for batch in plan.batches():
        builds = plan.loaded(batch).scenario.builds
        assert list(builds) == [c.name for c in batch]


def _cmd_build(p99: float) -> dict[str, Any]:
    """A report's build with both front scores (``a.error_pct`` is read from its success):
    only a candidate on the front is recommended."""
    endpoint = {"latency_s": {"p99": p99}, "success_pct": 100.0}
    return {"status": "completed", "endpoints": {"a": endpoint}}


@pytest.mark.parametrize("make", [_colliding_command_sweep, _colliding_shop_sweep])
def test_the_recommendation_is_the_settings_of_the_candidate_that_ran(
    tmp_path: Path, make: Any
) -> None:
    """Whichever candidate is best, the settings printed are the ones it ran with (issue 32,
    item 1: ``export MODE=a/b`` was printed although only ``MODE=a_b`` ran)."""
    plan = load_plan(make(tmp_path))
    is_cmd = plan.sweep.base == "svc"
    for i, best in enumerate(plan.candidates):
        folder = TuneFolder.create(tmp_path / str(i), plan, 1)
        if is_cmd:
            builds = {c.name: _cmd_build(0.1 if c is best else 0.5) for c in plan.candidates}
        else:
            figures = {c.name: (0.1 if c is best else 0.5, 1.0, 99.0) for c in plan.candidates}
            builds = {n: _rank_build(*v) for n, v in figures.items()}
        run = folder.runs / "x" / "run"
        run.mkdir(parents=True)
        (run / "manifest.json").write_text("{}")
        (run / "report.json").write_text(json.dumps({"builds": builds}))
        result = tune_result(folder, plan)
        assert result["recommended"] == best.name
        text = result["recommended_config"]["text"]
        if is_cmd:
            assert f"export MODE={best.values['env.MODE']}\n" in text.replace("'", ""), text
        else:
            frt = best.values[f"{CB}.failure-rate-threshold"]
            assert f"failure-rate-threshold: {frt}\n" in text, (best.name, text)


def test_a_point_named_as_a_build_it_runs_beside_is_refused_at_its_line(tmp_path: Path) -> None:
    """A point's name is the sweep's word for it: one a build taken as a candidate already
    has is refused at the point's line, exit 2, never renamed (issue 32, item 1)."""
    path = _variant(
        tmp_path,
        "  grid:\n",
        f"  points:\n    current: {{{CB}.failure-rate-threshold: 30}}\n  grid:\n",
    )
    problems = _problems(path)
    line = _line_of(path, "    current: {")
    assert len(problems) == 1 and f"sweep.yaml:{line}:" in problems[0], problems
    assert "current" in problems[0] and "name" in problems[0]


def test_screen_plan_refuses_the_sweep_screen_refuses(tmp_path: Path) -> None:
    """``--screen --plan`` says what ``--screen`` would refuse, exit 2, where it listed the
    candidates and exited 0 (issue 32, item 8)."""
    text = CI.read_text().replace(
        "pg:\n", "pg:\n  capacity: {concurrency: 10, service: {delay: 20ms}}\n", 1
    )
    scenario = tmp_path / "capacity-sweep.yaml"
    scenario.write_text(text)
    done = CliRunner().invoke(app, ["tune", str(scenario), "--screen", "--plan"])
    assert done.exit_code == 2, done.output
    assert "pg.capacity" in done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)


@pytest.mark.parametrize(
    ("old", "new", "marker"),
    [
        (
            'minimize: "products.p99[outage]"',
            'minimize: "products.p99[outage] / 0"',
            "minimize:",
        ),
        ('"blocked_pct_healthy <= 25"', '"blocked_pct_healthy / (2 - 2) <= 25"', "(2 - 2)"),
        (
            'front: [blocked_pct_healthy, "products.p99[outage]"]',
            'front: [blocked_pct_healthy, "products.p99[outage] / 0ms"]',
            "front: [",
        ),
    ],
)
def test_an_expression_dividing_by_zero_is_refused_at_its_line(
    tmp_path: Path, old: str, new: str, marker: str
) -> None:
    """An objective, constraint or front score divided by a constant zero has no value for
    any candidate: refused at its line, exit 2, where every candidate's was silently
    none (issue 32, item 8)."""
    path = _variant(tmp_path, old, new)
    problems = _problems(path)
    assert len(problems) == 1, problems
    assert f"sweep.yaml:{_line_of(path, marker)}:" in problems[0] and "zero" in problems[0]


def test_an_abbreviation_for_no_axis_is_refused_at_its_line(tmp_path: Path) -> None:
    path = _variant(
        tmp_path,
        "    resilience4j.circuitbreaker.sliding-window-size: w\n",
        "    resilience4j.circuitbreaker.sliding-window-size: w\n"
        "    resilience4j.circuitbreaker.sliding-windw-size: sw\n",
    )
    problems = _problems(path)
    assert len(problems) == 1, problems
    assert f"sweep.yaml:{_line_of(path, 'sliding-windw-size: sw')}:" in problems[0]
    assert "no axis" in problems[0]


@pytest.mark.parametrize("include", ["[current]", "[other, other]"])
def test_a_build_included_twice_is_refused_at_its_line(tmp_path: Path, include: str) -> None:
    """The base in ``include``, or one build twice: one candidate run twice under one name
    (issue 32, item 8)."""
    path = _variant(tmp_path, "  base: current\n", f"  base: current\n  include: {include}\n")
    text = path.read_text().replace(
        "sweep:\n", "  other:\n    profile: retry-circuit-breaker\n    workers: 16\nsweep:\n", 1
    )
    path.write_text(text)
    problems = _problems(path)
    assert len(problems) == 1, problems
    assert f"sweep.yaml:{_line_of(path, 'include:')}:" in problems[0]
    assert "twice" in problems[0] or "base" in problems[0]
