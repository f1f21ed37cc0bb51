"""A tune's report: ``tune.json`` (docs/report.md), ``tune.md`` (the ranked table, the front,
the sensitivity, the recommendation in the target's own language) and ``front.png``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.report.chart_style import new_figure, save
from harness.results.io import write_error, write_json_atomic, write_text_atomic
from harness.tune.candidates import abbreviation
from harness.tune.folder import TuneFolder
from harness.tune.plan import Plan
from harness.tune.rank import Outcome, judge, rank, recommended, sensitivity
from harness.tune.recommend import recommended_config
from harness.tune.refine import pool
from harness.tune.screen import errors, simulated_reports

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
    if best is not None:
        language, config = recommended_config(plan.candidate(best.name), plan.axes)
    missing = [o.name for o in ranked if o.measured == "missing"]
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
        "candidates": [dataclasses.asdict(o) | {"feasible": o.feasible} for o in ranked],
        "front": [o.name for o in ranked if o.on_front],
        "sensitivity": sensitivity(plan, ranked),
        "recommended": None if best is None else best.name,
        "recommended_config": {"language": language, "text": config},
        "missing": missing,
        "complete": not missing,
        "failed": [{"name": o.name, "error": o.error} for o in ranked if o.measured == "failed"],
        "screened": bool(simulated),
        "simulator_error": errors(ranked, simulated),
        "refined": folder.refinement(),
    }


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
        lines.append("No candidate that ran meets every constraint: nothing is recommended.")
    else:
        cfg = result["recommended_config"]
        lines += [
            f"`{result['recommended']}`: the best feasible candidate by the objective.",
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
    """The two scores of every candidate: filled when feasible, hollow when not, a triangle
    when simulated, the current setting a star; the front joined by a line; ``--repeat``
    intervals as error bars."""
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
    if front:
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
    ax.set_title(
        "candidates: filled = feasible, hollow = fails a constraint, * = current, ^ = simulated",
        fontsize=8,
    )
    return save(fig, path)


def _err(value: float, interval: list[float] | None) -> list[list[float]] | None:
    if interval is None:
        return None
    return [[max(0.0, value - interval[0])], [max(0.0, interval[1] - value)]]


__all__ = ["Outcome", "tune_result", "write_tune_report"]
