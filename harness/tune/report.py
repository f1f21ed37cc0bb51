"""A tune's report: ``tune.json`` (docs/report.md), ``tune.md`` (the ranked table, the front,
the sensitivity, the recommendation in the target's own language) and ``front.png``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from textwrap import fill
from typing import TYPE_CHECKING, Any

from harness.report.chart_style import new_figure, save
from harness.results.io import write_error, write_json_atomic, write_text_atomic
from harness.scenario.sweep import Refine
from harness.tune.candidates import abbreviation
from harness.tune.folder import TuneFolder
from harness.tune.plan import Plan
from harness.tune.rank import (
    Outcome,
    check,
    flat_scores,
    judge,
    lead,
    passed_over,
    rank,
    recommended,
    sensitivity,
)
from harness.tune.recommend import recommended_config
from harness.tune.refine import pool
from harness.tune.screen import errors, simulated_reports

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TUNE_SCHEMA = "harness.tune/1"


def ranked_outcomes(folder: TuneFolder, plan: Plan) -> list[Outcome]:
    """Every candidate judged from the runs it finished in (pooled over its rounds when
    refined), or simulated, or missing; ranked."""
    return rank(plan, _outcomes(folder, plan)[0])


def _outcomes(folder: TuneFolder, plan: Plan) -> tuple[list[Outcome], dict[str, Outcome]]:
    finished = folder.rounds()
    failures = folder.failures()
    simulated_reports_ = simulated_reports(folder)
    simulated = {
        c.name: judge(plan, c, simulated_reports_[c.name], "simulated", "simulated")
        for c in plan.candidates
        if c.name in simulated_reports_
    }
    outcomes = []
    for c in plan.candidates:
        if c.name in failures:  # it could not be run: infeasible, with why
            failed = failures[c.name]
            outcomes.append(
                Outcome(
                    c.name,
                    c.origin,
                    c.values,
                    "failed",
                    status="failed",
                    run=failed["run"],
                    aliases=c.aliases,
                    error=failed["error"],
                )
            )
            continue
        rounds = finished.get(c.name, [])
        if not rounds and c.name in simulated:
            outcomes.append(simulated[c.name])
            continue
        judged = [
            judge(plan, c, report, str(run_dir.relative_to(folder.path)), "measured")
            for report, run_dir in rounds
        ]
        outcomes.append(
            pool(judged, plan.scenario.seed) if judged else judge(plan, c, None, "", "measured")
        )
    return outcomes, simulated


def tune_result(folder: TuneFolder, plan: Plan) -> dict[str, Any]:
    """Every candidate judged from the runs it finished in; the ranking, front, sensitivity
    and the recommendation, as ``tune.json`` holds them."""
    outcomes, simulated = _outcomes(folder, plan)
    ranked = rank(plan, outcomes)
    best = recommended(ranked)
    language, config = ("", "")
    ahead: list[dict[str, str]] = []
    lead_: dict[str, Any] | None = None
    if best is not None:
        language, config = recommended_config(plan.candidate(best.name), plan.axes)
        ahead = [{"name": n, "why": why} for n, why in passed_over(ranked, best)]
        tolerance = (plan.sweep.refine or Refine()).tolerance
        found = lead(ranked, best, plan.sweep.objective.sense, tolerance)
        lead_ = None if found is None else dataclasses.asdict(found)
    missing = [o.name for o in ranked if o.measured == "missing"]
    front = [o.name for o in ranked if o.on_front]
    return {
        "schema": TUNE_SCHEMA,
        "sweep_file": str(plan.path),
        "folder": str(folder.path),
        "repeat": folder.repeat,
        "base": plan.sweep.base,
        "axes": plan.axes,
        "abbrev": plan.abbrev,
        "objective": {"sense": plan.sweep.objective.sense, "expr": plan.sweep.objective.expr},
        "subject_to": plan.constraints,
        "front_scores": list(plan.sweep.front),
        "candidates": [_candidate(o, front) for o in ranked],
        "front": front,
        "flat_scores": [
            {"score": plan.sweep.front[i], "value": value} for i, value in flat_scores(ranked)
        ],
        "sensitivity": sensitivity(plan, ranked),
        "recommended": None if best is None else best.name,
        "recommended_config": {"language": language, "text": config},
        "recommended_lead": lead_,
        "passed_over": ahead,
        "missing": missing,
        "complete": not missing,
        "failed": [{"name": o.name, "error": o.error} for o in ranked if o.measured == "failed"],
        "screened": bool(simulated),
        "simulator_error": errors(ranked, simulated),
        "refined": folder.refinement(),
    }


def _candidate(o: Outcome, front: list[str]) -> dict[str, Any]:
    """A candidate as ``tune.json`` holds it: its blocks left in its runs' reports."""
    record = dataclasses.asdict(o) | {"feasible": o.feasible, "check": _check(o, front)}
    for key in ("blocks", "block_notes"):
        record.pop(key)
    return record


def _check(o: Outcome, front: list[str]) -> dict[str, Any]:
    passed, why = check(o, front)
    return {"pass": passed, "why": why}


def lead_text(result: dict[str, Any]) -> str:
    """The recommended candidate's lead over the next on the front, in words: "within noise
    of" the others noise does not tell it from, or by how much it leads, and by which rule
    (the judge on 5-s blocks, or today's where the reports have none, saying why); "" without
    a recommendation or another candidate on the front."""
    found = result.get("recommended_lead")
    if not result["recommended"] or not found:
        return ""
    name, over = result["recommended"], found["over"]
    rule = rule_text(found)
    if found["within_noise"]:
        of = found.get("within_noise_of") or [over]
        return (
            f"{name} is within noise of {', '.join(of)} on the objective, all on the front "
            f"({found['why']}; {rule}): the pick between them is not the objective's; tell "
            f"them apart with more rounds (harness tune --resume {result['folder']} --refine "
            "2), or choose by the front's other score."
        )
    also = [n for n in found.get("within_noise_of") or [] if n != over]
    tail = f" It is within noise of {', '.join(also)}, further down." if also else ""
    return (
        f"{name} leads {over} on the objective by {found['by']:.4g}, beyond noise "
        f"({found['why']}; {rule}).{tail}"
    )


def rule_text(found: dict[str, Any]) -> str:
    """Which rule told the lead (``harness.tune.rank.tell``), and why not the judge."""
    rule = found.get("rule", "tolerance")
    if rule == "judge":
        return "told by the judge"
    today = "overlapping 95% intervals" if rule == "intervals" else "a fixed tolerance"
    note = found.get("rule_note") or "not the judge"
    return f"told by today's rule, {today}: {note}"


def flat_text(result: dict[str, Any]) -> str:
    """What the front is when a front score does not vary ("" when both vary)."""
    flat = result.get("flat_scores") or []
    if not flat:
        return ""
    scores = result["front_scores"]
    if len(flat) == 2:
        return (
            f"Neither front score varies ({scores[0]} = {flat[0]['value']:.4g}, {scores[1]} = "
            f"{flat[1]['value']:.4g} for every feasible candidate): every one is on the front."
        )
    (only,) = flat
    other = scores[1] if only["score"] == scores[0] else scores[0]
    return (
        f"{only['score']} does not vary ({only['value']:.4g} for every feasible candidate): "
        f"the front is the best by {other} alone."
    )


def write_tune_report(folder: TuneFolder, plan: Plan) -> dict[str, Any]:
    result = tune_result(folder, plan)
    write_tune_files(folder, result)
    return result


def write_tune_files(folder: TuneFolder, result: dict[str, Any]) -> None:
    """``tune.json``, ``front.png`` and ``tune.md``; ``WriteError`` (a full disk) naming
    the file when one cannot be written."""
    write_json_atomic(folder.path / "tune.json", result)
    front = folder.path / "front.png"
    try:
        draw_front(result, front)
    except OSError as exc:
        raise write_error(front, exc) from exc
    write_text_atomic(folder.path / "tune.md", markdown(result))


def _ci(interval: list[float] | None) -> str:
    return "" if not interval else f" [{_num(interval[0])}, {_num(interval[1])}]"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def markdown(result: dict[str, Any]) -> str:
    """The ranked table, the front, the sensitivity and the recommendation."""
    obj = result["objective"]
    x, y = result["front_scores"]
    axes = result["axes"]
    lines = [
        f"# Tune of `{Path(result['sweep_file']).name}`",
        "",
        f"Objective: {obj['sense']} `{obj['expr']}`; subject to: "
        + (", ".join(f"`{c}`" for c in result["subject_to"]) or "nothing")
        + f". Front: `{x}` against `{y}` (both lower is better).",
        "",
    ]
    if flat_text(result):
        lines += [flat_text(result), ""]
    lines += [
        "| rank | candidate | "
        + " | ".join(f"`{result['abbrev'].get(a) or abbreviation(a)}`" for a in axes)
        + f" | {obj['expr']} | {x} | {y} | constraints | front |",
        "|---|---|" + "---|" * len(axes) + "---|---|---|---|---|",
    ]
    for c in result["candidates"]:
        mark = " (current)" if c["origin"] == "current" else ""
        if c["name"] == result["recommended"]:
            mark += " **recommended**"
        if c.get("rounds", 1) > 1:
            mark += f" ({c['rounds']} rounds)"
        failed = [k["text"] for k in c["checks"] if k["verdict"] != "pass"]
        if c["measured"] == "missing":
            verdict = "not run"
        elif c["measured"] == "failed":
            verdict = "failed to start: " + c["error"].replace("|", "/").replace("\n", " ")
        elif c["status"] == "aborted":
            verdict = "stopped early: " + str((c.get("abort") or {}).get("gate", ""))
        else:
            verdict = "all met" if not failed else "fails " + "; ".join(failed)
        values = " | ".join(str(c["values"].get(a)) for a in axes)
        lines.append(
            f"| {c['rank'] or '-'} | {c['name']}{mark} | {values} | "
            f"{_num(c['objective'])}{_ci(c.get('objective_interval'))} | "
            f"{_num(c['scores'][0])} | {_num(c['scores'][1])} | {verdict} | "
            f"{'yes' if c['on_front'] else ''} |"
        )
    lines += ["", "## Sensitivity", "", "| axis | objective by value | spread |", "|---|---|---|"]
    for axis, s in result["sensitivity"].items():
        means = ", ".join(f"{v}: {_num(m)}" for v, m in s["means"].items())
        lines.append(f"| `{axis}` | {means} | {_num(s['spread'])} |")
    lines += ["", "## Recommendation", ""]
    if result["recommended"] is None:
        feasible = any(c["feasible"] and c["measured"] == "measured" for c in result["candidates"])
        lines.append(
            "No feasible candidate is on the front (a front score was not measured): nothing "
            "is recommended."
            if feasible
            else "No candidate that ran meets every constraint: nothing is recommended."
        )
    else:
        cfg = result["recommended_config"]
        lines += [
            f"`{result['recommended']}`: the best by the objective of the feasible candidates "
            "on the front (so it passes its own check, below).",
        ]
        lines += [f"- `{p['name']}` ranks before it by the objective: {p['why']}." for p in
                  result.get("passed_over", [])]  # fmt: skip
        if lead_text(result):
            lines += ["", lead_text(result)]
        lines += [
            "",
            f"```{cfg['language']}",
            cfg["text"].rstrip(),
            "```",
            "",
            "CI can keep it: `harness tune --report "
            f"{result['folder']} --check {result['recommended']}` (exit 1 when it is no "
            "longer feasible or on the front of a new tune of the same sweep).",
        ]
    lines += refined_lines(result.get("refined"))
    if result["missing"]:
        lines += ["", f"Not run yet: {', '.join(result['missing'])} (`harness tune --resume`)."]
    if result.get("failed"):
        names = ", ".join(f["name"] for f in result["failed"])
        lines += [
            "",
            f"Could not be run: {names} (infeasible; `--resume` does not retry them: delete "
            f"`{Path(result['folder']) / 'failed.json'}` to try them again).",
        ]
    return "\n".join(lines) + "\n"


def refined_lines(refined: dict[str, Any] | None) -> list[str]:
    """The refinement in words: which candidates got more rounds and why, or why none."""
    if refined is None:
        return []
    lines = ["", "## Refinement", ""]
    if refined["picked"]:
        lines.append(
            f"Within noise after the first pass, so {refined['repeats']} more round(s) each "
            f"({refined['extra_runs']} real runs); their figures are the mean over every round, "
            "with its 95 % interval:"
        )
        lines += [f"- `{p['name']}`: {p['why']}" for p in refined["picked"]]
    if refined["note"]:
        lines.append(("" if not refined["picked"] else "\n") + refined["note"] + ".")
    return lines


def draw_front(result: dict[str, Any], path: Path) -> Path:
    """``front_figure`` as a PNG at ``path``."""
    return save(front_figure(result), path)


def front_figure(result: dict[str, Any]) -> Figure:
    """The two scores of every candidate: filled when feasible, hollow when not, a triangle
    when simulated, the current setting a star; the front joined by a line; ``--repeat``
    intervals as error bars. A front score that does not vary (``flat_scores``) is said on
    the chart, the front's points ringed, and no line drawn: along one axis it would say
    nothing of the other."""
    fig, (ax,) = new_figure(1, 4.2, sharex=False)
    x_name, y_name = result["front_scores"]
    done = [c for c in result["candidates"] if None not in c["scores"]]
    for c in done:
        x, y = c["scores"]
        marker = "*" if c["origin"] == "current" else ("^" if c["measured"] == "simulated" else "o")
        color = "tab:blue" if c["feasible"] else "tab:gray"
        face = color if c["feasible"] else "none"
        size = 14 if marker == "*" else 8
        xerr = _err(x, c["intervals"][0])
        yerr = _err(y, c["intervals"][1])
        if xerr is not None or yerr is not None:
            ax.errorbar([x], [y], xerr=xerr, yerr=yerr, color=color, alpha=0.5, linewidth=1)
        ax.plot(
            [x],
            [y],
            marker=marker,
            markersize=size,
            color=color,
            markerfacecolor=face,
            linestyle="none",
        )
        label = c["name"] + (" (recommended)" if c["name"] == result["recommended"] else "")
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    front = sorted((c["scores"] for c in done if c["on_front"]), key=lambda s: s[0])
    flat = flat_text(result)
    if front and flat:
        ax.plot(
            [s[0] for s in front],
            [s[1] for s in front],
            marker="o",
            markersize=16,
            markerfacecolor="none",
            color="tab:red",
            linestyle="none",
            label="on the front",
        )
        ax.legend(loc="upper right", fontsize=8)
        for item in result["flat_scores"]:  # one tick, its value: the axis has no range
            axis = ax.xaxis if item["score"] == x_name else ax.yaxis
            axis.set_ticks([item["value"]])
    elif front:
        ax.plot(
            [s[0] for s in front],
            [s[1] for s in front],
            color="tab:red",
            linewidth=1,
            label="Pareto front",
        )
        ax.legend(loc="upper right", fontsize=8)
    if not done:
        ax.text(0.5, 0.5, "no candidate measured yet", ha="center", transform=ax.transAxes)
    ax.set_xlabel(f"{x_name} (lower is better)")
    ax.set_ylabel(f"{y_name} (lower is better)")
    title = "candidates: filled = feasible, hollow = fails a constraint, * = current, ^ = simulated"
    ax.set_title(title + ("\n" + fill(flat, 110) if flat else ""), fontsize=8)
    return fig


def _err(value: float, interval: list[float] | None) -> list[list[float]] | None:
    if interval is None:
        return None
    return [[max(0.0, value - interval[0])], [max(0.0, interval[1] - value)]]


__all__ = ["Outcome", "front_figure", "tune_result", "write_tune_report"]
