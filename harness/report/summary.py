"""The markdown a pull request gets from ``harness gate --summary`` (and GitHub's job summary).

Verdicts first, the failing ones on top; then the figures that moved, each build
against the baseline run (``--baseline``, main's run) or, without one, each build
against the run's first; then the charts, as links a reviewer follows into the
run folder kept as an artifact. A figure moved when the judge says ``better`` or
``worse`` or the repeated runs' intervals do not overlap: what noise alone does
not explain, never the raw % change, which a noisy runner moves on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.analysis.format import change
from harness.analysis.model import Report
from harness.gates.evaluate import GateResult
from harness.report.compare import Row, compare_builds

MAX_MOVED = 25
"""Rows of moved figures shown per comparison; the rest are counted."""

_ORDER = {"fail": 0, "error": 1, "pass": 2, "skip": 3}
_MARK = {"fail": "❌ fail", "error": "⚠️ error", "pass": "✅ pass", "skip": "⏭️ skip"}


def _cell(text: str) -> str:
    """Text safe in a markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def moved(row: Row) -> bool:
    """Whether the figure changed beyond noise (see the module)."""
    return row.verdict.startswith(("better", "worse")) or row.beyond_noise is True


def _comparisons(report: Report, baseline: Report | None) -> dict[str, list[Row]]:
    if baseline is not None:
        return {
            f"{name}: baseline run {baseline.get('run_id')} → this run": compare_builds(
                baseline["builds"][name], build
            )
            for name, build in report["builds"].items()
            if name in baseline["builds"]
        }
    names = list(report["builds"])
    return {
        f"{first} → {other}": compare_builds(report["builds"][first], report["builds"][other])
        for first in names[:1]
        for other in names[1:]
    }


def pr_summary(
    report: Report,
    results: Sequence[GateResult],
    baseline: Report | None,
    charts: Sequence[str],
    charts_url: str | None = None,
) -> str:
    """The summary as markdown. ``charts``: the chart file names of the run folder;
    ``charts_url``: where the run folder is published (links are relative without it)."""
    failed = [r for r in results if r.failed]
    counted = [r for r in results if r.verdict != "skip"]
    head = "❌ failed" if failed else "✅ passed"
    lines = [
        f"## Resilience gates: {report['scenario']}: {head} "
        f"({sum(r.passed for r in results)}/{len(counted)} pass)",
        "",
        f"Run {report.get('run_id')}"
        + (f", against baseline run {baseline.get('run_id')}" if baseline is not None else "")
        + (f" (harness {report['harness_version']})" if report.get("harness_version") else "")
        + ".",
        "",
        "| gate | measured | limit | verdict |",
        "|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: _ORDER[r.verdict]):
        limit = "-" if r.right is None else f"{r.op} {r.show(r.right)}"
        verdict = _MARK[r.verdict] + (f" ({r.detail})" if r.detail else "")
        lines.append(
            f"| {_cell(r.name)} | {_cell(r.show(r.left))} | {_cell(limit)} | {_cell(verdict)} |"
        )
    lines += ["", "### Figures that moved beyond noise", ""]
    comparisons = _comparisons(report, baseline)
    if not comparisons:
        lines.append("One build and no `--baseline`: nothing to compare against.")
    for title, rows in comparisons.items():
        shown = [row for row in rows if moved(row)]
        lines.append(f"**{_cell(title)}**: {len(shown)} of {len(rows)} figures moved.")
        if shown:
            lines += ["", "| figure | before | after | change | verdict |", "|---|---|---|---|---|"]
            for row in shown[:MAX_MOVED]:
                a, b = row.cells()[1:3]
                lines.append(
                    f"| {_cell(row.figure)} | {_cell(a)} | {_cell(b)} | "
                    f"{_cell(change(row.change_pct))} | {_cell(row.verdict)} |"
                )
            if len(shown) > MAX_MOVED:
                lines.append(f"| and {len(shown) - MAX_MOVED} more | | | | |")
        lines.append("")
    if charts:
        base = (charts_url.rstrip("/") + "/") if charts_url else ""
        lines += ["### Charts", ""]
        lines += [f"- [{Path(c).stem}]({base}charts/{c})" for c in charts]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
