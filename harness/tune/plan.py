"""A sweep file read into a plan: its candidates, each checked through its build kind's own
schema, the objective, constraints and front scores checked against the figures, and the
scenarios (batches of at most ``MAX_BUILDS`` candidates) the candidates run as.

Every problem is said at the sweep's own line (the axis, the point, the objective), exit 2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.core.errors import Problem, ScenarioError
from harness.core.yamlmodel import (
    Validated,
    display_name,
    problem_at,
    read_text_file,
    validate_yaml,
)
from harness.core.yamlread import parse_yaml
from harness.scenario.abort import abort_problems
from harness.scenario.bounds import MAX_BUILDS
from harness.scenario.gates import (
    BinOp,
    GateSyntaxError,
    Neg,
    Node,
    Number,
    check_gate,
    expression_figures,
    figure_names,
    parse_gate,
    prefix_figures,
)
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import LoadedScenario, Scenario
from harness.scenario.sweep import MAX_CANDIDATES, Sweep
from harness.tune.candidates import Candidate, abbreviation, axes_of, expand
from harness.tune.paths import MISSING, get_path, in_open_mapping, set_path

MAX_REAL_RUNS = 40
"""Candidates x repetitions a tune runs for real: each is a whole build run (warmup, the
measured window, drain, start and stop), so 40 of seed 004's are about 90 minutes. More is
refused at the sweep's line; with the simulator the rest are screened first."""


@dataclass
class Plan:
    """What ``harness tune`` runs and how it judges the result."""

    file: str
    path: Path
    text: str
    scenario: Scenario
    sweep: Sweep
    axes: list[str]
    candidates: list[Candidate]
    constraints: list[str] = field(default_factory=list)
    abbrev: dict[str, str] = field(default_factory=dict)
    """Axis path -> the word naming its values in candidates' names."""

    def candidate(self, name: str) -> Candidate:
        for c in self.candidates:
            if c.name == name or name in c.aliases:
                return c
        raise KeyError(name)

    def batches(self, names: list[str] | None = None) -> list[list[Candidate]]:
        """The candidates (or those named) in runs of at most ``MAX_BUILDS`` builds."""
        chosen = [c for c in self.candidates if names is None or c.name in names]
        return [chosen[i : i + MAX_BUILDS] for i in range(0, len(chosen), MAX_BUILDS)]

    def scenario_text(self, batch: list[Candidate], abort: bool = False) -> str:
        """The scenario the batch runs as: the sweep file's, its builds the candidates, its
        gates each constraint per candidate (``abort: true`` when cut to a phase and
        ``abort``), without ``sweep:``."""
        data = _raw(self.text, self.file)
        data.pop("sweep", None)
        data["builds"] = {c.name: c.build for c in batch}
        gates: list[dict[str, Any]] = []
        for c in batch:
            for text in self.constraints:
                gate: dict[str, Any] = {"name": f"{c.name}: {text}"}
                gate["expr"] = prefix_figures(text, c.name)
                if abort and cut_to_phase(text):
                    gate["abort"] = True
                gates.append(gate)
        data["gates"] = gates
        head = f"# harness tune: candidates of {self.file} (generated; edit the sweep file)\n"
        return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)

    def loaded(self, batch: list[Candidate], abort: bool = False) -> LoadedScenario:
        """The batch's scenario, validated (its path the sweep file's: builds' relative
        folders start there)."""
        text = self.scenario_text(batch, abort)
        done = load_scenario_text(text, self.file, base_dir=self.path.parent)
        return LoadedScenario(path=str(self.path), text=text, scenario=done.scenario)


def cut_to_phase(text: str) -> bool:
    """Whether a constraint can stop a candidate early (``abort: true``): every figure it
    names is cut to a phase (``[outage]``), so it is decided when that phase is over."""
    try:
        return not abort_problems(parse_gate(prefix_figures(text, "x")))
    except GateSyntaxError:
        return False


def _raw(text: str, file: str) -> dict[str, Any]:
    data = parse_yaml(text, file, lambda root: None)
    return data if isinstance(data, dict) else {}


def load_plan(
    path: str | Path,
    repeat: int = 1,
    screened: bool = False,
    text: str | None = None,
    shown: str | Path | None = None,
) -> Plan:
    """Read a sweep file; ``ScenarioError`` with every problem at its line.

    ``screened``: the simulator ranks the candidates first, so more than
    ``MAX_REAL_RUNS`` may be described (only the screen's picks run for real). ``text``:
    the file's text as a tune folder kept it (``--resume``), read as if at ``path``;
    ``shown``: the file its problems are said at (that copy), ``path`` when not given.
    """
    file = display_name(path if shown is None else shown)
    if text is None:
        text = read_text_file(path, what="scenario")
    load_scenario_text(text, file, base_dir=Path(path).resolve().parent)  # the rest of it
    done = validate_yaml(Scenario, text, file, expected="a mapping of scenario keys")
    sweep = done.model.sweep
    if sweep is None:
        raise ScenarioError([Problem(file, 1, 1, "sweep", "no `sweep:` section to tune")])
    raw = _raw(text, file)
    builds: dict[str, dict[str, Any]] = dict(raw.get("builds") or {})
    problems: list[Problem] = []

    def say(where: tuple[str | int, ...], what: str, message: str) -> None:
        problems.append(problem_at(file, done.node(where), what, message))

    for name in [sweep.base, *sweep.include]:
        if name not in builds:
            say(("sweep", "base"), "sweep", f"no build {name!r}; builds: {list(builds)}")
    for i, name in enumerate(sweep.include):
        if name == sweep.base:
            say(
                ("sweep", "include", i),
                f"sweep.include.{i}",
                f"{name!r} is the base build: it runs already (marked current); `include` "
                "names other builds",
            )
        elif name in sweep.include[:i]:
            say(("sweep", "include", i), f"sweep.include.{i}", f"build {name!r} is included twice")
    for name in sweep.points:
        if name in (sweep.base, *sweep.include):
            say(
                ("sweep", "points", name),
                f"sweep.points.{name}",
                f"point {name!r} has the name of build {name!r}, a candidate too: name the "
                "point apart (a candidate's name says what ran)",
            )
    if problems:
        raise ScenarioError(problems)
    axes = axes_of(sweep)
    abbrev = {p: sweep.abbrev.get(p) or abbreviation(p) for p in axes}
    _check_axes(done, sweep, builds[sweep.base], axes, abbrev, say)
    if problems:
        raise ScenarioError(problems)
    described = math.prod(len(v) for v in sweep.grid.values()) if sweep.grid else 0
    described += len(sweep.points) + len(sweep.include) + 1
    described += sweep.sample.budget if sweep.sample else 0
    where: tuple[str | int, ...] = ("sweep", "grid") if sweep.grid else ("sweep", "sample")
    if described > MAX_CANDIDATES:
        say(where, "sweep", f"{described:,} candidates; a sweep has at most {MAX_CANDIDATES:,}")
        raise ScenarioError(problems)
    candidates = expand(sweep, builds, abbrev)
    _check_candidates(done, file, candidates, text, path, say)
    for word_of in sweep.abbrev if not problems else ():  # a typo in an axis: said there
        if word_of not in axes:
            say(
                ("sweep", "abbrev", word_of),
                f"sweep.abbrev.{word_of}",
                f"no axis {word_of!r} to name: the axes are {axes}",
            )
    plan = Plan(file, Path(path).resolve(), text, done.model, sweep, axes, candidates)
    plan.constraints = list(sweep.subject_to)
    plan.abbrev = abbrev
    _check_figures(plan, say)
    runs = len(candidates) * repeat
    picked = min(len(candidates), 1 + sweep.screen.best + sweep.screen.others) * repeat
    if runs > MAX_REAL_RUNS and screened and picked > MAX_REAL_RUNS:
        say(
            ("sweep", "screen"),
            "sweep.screen",
            f"the screen would run {picked} real runs (the current setting, best, others, x "
            f"{repeat} repetition(s)); at most {MAX_REAL_RUNS}",
        )
    if runs > MAX_REAL_RUNS and not screened:
        say(
            where,
            "sweep",
            f"{len(candidates)} candidates x {repeat} repetition(s) = {runs} real runs; at "
            f"most {MAX_REAL_RUNS} run for real (each is a whole build run): cut the grid or "
            "the sample's budget, or screen them with the simulator",
        )
    if problems:
        raise ScenarioError(problems)
    return plan


def _check_axes(
    done: Validated[Scenario],
    sweep: Sweep,
    base: dict[str, Any],
    axes: list[str],
    abbrev: dict[str, str],
    say: Any,
) -> None:
    """Axes a value cannot be set at, open-mapping keys the base does not set, names that
    cannot tell two axes apart."""
    for path in axes:
        where = _axis_node(sweep, path)
        try:
            set_path(base, path, 0)
        except KeyError as exc:
            say(where, path, f"build {sweep.base!r} has no setting there: {exc.args[0]}")
        if in_open_mapping(path) and get_path(base, path) is MISSING:
            say(
                where,
                path,
                f"build {sweep.base!r} sets no {path!r}: an axis under `properties` or `env` "
                "must name a key the base build sets (no schema can tell a typo there)",
            )
    words = list(abbrev.values())
    for word in dict.fromkeys(w for w in words if words.count(w) > 1):
        paths = [p for p, w in abbrev.items() if w == word]
        say(
            ("sweep", "abbrev") if sweep.abbrev else ("sweep",),
            "sweep.abbrev",
            f"axes {paths} would all name their values {word!r}: give each a word in "
            "`sweep.abbrev`",
        )


def _axis_node(sweep: Sweep, path: str) -> tuple[str | int, ...]:
    if path in sweep.grid:
        return ("sweep", "grid", path)
    if sweep.sample is not None and path in sweep.sample.ranges:
        return ("sweep", "sample", "ranges", path)
    for name, point in sweep.points.items():
        if path in point:
            return ("sweep", "points", name, path)
    return ("sweep",)


def _check_candidates(
    done: Validated[Scenario],
    file: str,
    candidates: list[Candidate],
    text: str,
    path: str | Path,
    say: Any,
) -> None:
    """Each candidate as a build of the scenario, through its kind's own schema; a problem
    is said once at the axis (or point) that made it, with the first candidate it hit."""
    raw = _raw(text, file)
    raw.pop("sweep", None)
    raw["gates"] = []
    said: set[tuple[tuple[str | int, ...], str]] = set()
    for c in candidates:
        if c.origin in ("current", "include"):
            continue  # the scenario's own builds, checked with the file
        raw["builds"] = {c.name: c.build}
        try:
            load_scenario_text(yaml.safe_dump(raw, sort_keys=False), file)
        except ScenarioError as exc:
            for problem in exc.problems:
                axis = _axis_of(c, problem)
                where = (*c.source, axis) if c.origin != "grid" else ("sweep", "grid", axis)
                if c.origin == "sample":
                    where = ("sweep", "sample", "ranges", axis)
                field_ = problem.field.removeprefix(f"builds.{c.name}.")
                key = (where, f"{field_}: {problem.message}")
                if key not in said:
                    said.add(key)
                    say(where, axis, f"candidate {c.name}: {field_}: {problem.message}")


def _axis_of(c: Candidate, problem: Problem) -> str:
    """The axis a candidate's problem is about: the one its field names, else the first."""
    field_ = problem.field.removeprefix(f"builds.{c.name}.")
    for path in c.values:
        if field_.startswith(path) or path.startswith(field_):
            return path
    return next(iter(c.values), "")


def _check_figures(plan: Plan, say: Any) -> None:
    """The objective, constraints and front scores: gate grammar without the build, each
    figure one the scenario has (checked as the base candidate's)."""
    base = plan.candidates[0].name
    scenario = plan.scenario
    known = set(figure_names(scenario))
    sweep = plan.sweep
    sense = sweep.objective.sense
    exprs: list[tuple[tuple[str | int, ...], str, bool]] = [
        (("sweep", "objective", sense), sweep.objective.expr, False)
    ]
    exprs += [(("sweep", "subject-to", i), t, True) for i, t in enumerate(sweep.subject_to)]
    exprs += [(("sweep", "front", i), t, False) for i, t in enumerate(sweep.front)]
    for where, text, is_gate in exprs:
        try:
            if is_gate:
                gate = parse_gate(prefix_figures(text, base), text)
            else:
                if not expression_figures(prefix_figures(text, base)):
                    raise GateSyntaxError(f"{text!r} names no figure")
                gate = parse_gate(prefix_figures(text, base) + " >= 0", text)
            messages = check_gate(gate, scenario, known)
            for node in (gate.left, gate.right):
                divisor = _zero_divisor(node)
                if divisor is not None:
                    messages.append(
                        f"divides by {divisor}, which is zero: {text!r} has no value for "
                        "any candidate"
                    )
        except GateSyntaxError as exc:
            messages = [str(exc)]
        for message in messages:
            say(where, ".".join(str(p) for p in where), message.replace(f"{base}.", ""))


def _zero_divisor(node: Node) -> str | None:
    """The divisor of a division by a constant zero in ``node`` (``x / 0``, ``x / (2 - 2)``,
    ``x / 0ms``), as written; None when there is none."""
    if isinstance(node, Neg):
        return _zero_divisor(node.operand)
    if not isinstance(node, BinOp):
        return None
    if node.op == "/" and _constant(node.right) == 0:
        return _text(node.right)
    return _zero_divisor(node.left) or _zero_divisor(node.right)


def _constant(node: Node) -> float | None:
    """A node's value when it names no figure (None when it does, or divides by zero)."""
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Neg):
        value = _constant(node.operand)
        return None if value is None else -value
    if isinstance(node, BinOp):
        a, b = _constant(node.left), _constant(node.right)
        if a is None or b is None or (node.op == "/" and b == 0):
            return None
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        return a * b if node.op == "*" else a / b
    return None


def _text(node: Node) -> str:
    if isinstance(node, Number):
        return node.text or f"{node.value:g}"
    if isinstance(node, Neg):
        return "-" + _text(node.operand)
    if isinstance(node, BinOp):
        return f"({_text(node.left)} {node.op} {_text(node.right)})"
    return str(node)
