"""The docs' figure tables, generated from the catalogue (``harness.core.catalogue``).

docs/scenario.md holds the gate figures and the replica figures, docs/report.md the
canonical series and the statistics (``core.canonical``), each between markers;
``tests/core/test_catalogue.py`` fails when one differs from the catalogue, and
``python -m harness.core.figure_docs docs/*.md`` rewrites them.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.core.canonical import STATISTICS
from harness.core.catalogue import DEPENDENCY, ENDPOINT, FIGURES, SERIES, Figure


def _window_text(figure: Figure) -> str:
    if figure.window == "run" or not figure.cut:
        return "(not cut)"
    return "fault window" if figure.window == "fault" else "whole measured window"


def gate_table(replicas: bool = False) -> str:
    """The docs' table of gate figures (``replicas``: a replica's own), from ``FIGURES``.

    Figures in a row have the same meaning and window: ``<endpoint>.p50`` ``.p95`` ...
    """
    rows: list[tuple[list[str], str, str]] = []
    for figure in FIGURES:
        if figure.gate is None or (replicas and figure.replica_key is None):
            continue
        name = figure.gate.replace(ENDPOINT, "<endpoint>").replace(DEPENDENCY, "<dependency>")
        window = _window_text(figure)
        if rows and rows[-1][1:] == (figure.meaning, window):
            prefix = rows[-1][0][0].rsplit(".", 1)[0]
            if name.startswith(prefix + ".") and "." not in name[len(prefix) + 1 :]:
                rows[-1][0].append(name[len(prefix) :])
                continue
        rows.append(([name], figure.meaning, window))
    head = "replica figure" if replicas else "figure"
    lines = [f"| {head} | meaning | without `[phase]` |", "|---|---|---|"]
    for names, meaning, window in rows:
        lines.append(f"| {' '.join(f'`{n}`' for n in names)} | {meaning} | {window} |")
    return "\n".join(lines) + "\n"


def series_table() -> str:
    """The docs' table of canonical series: kind, meaning, and the report keys read from it."""
    lines = ["| series | kind | what | figures (report keys) |", "|---|---|---|---|"]
    for series in SERIES:
        keys = [f"`{f.key}`" for f in FIGURES if f.source == series.name]
        what = series.what + ("; optional: absent when not exposed" if series.optional else "")
        lines.append(f"| `{series.name}` | {series.kind} | {what} | {', '.join(keys)} |")
    return "\n".join(lines) + "\n"


def statistic_table() -> str:
    """The docs' table of statistics: what each means, what reads it, across a scrape gap."""
    lines = ["| statistic | what | from a series | across a scrape gap |", "|---|---|---|---|"]
    for stat in STATISTICS:
        by = "by its reducer" if stat.from_series else "no: its source's code"
        gap = "not measured" if stat.gap_blind else "kept"
        lines.append(f"| `{stat.name}` | {stat.what} | {by} | {gap} |")
    return "\n".join(lines) + "\n"


TABLES: dict[str, Callable[[], str]] = {
    "gate figures": gate_table,
    "replica figures": lambda: gate_table(replicas=True),
    "canonical series": series_table,
    "statistics": statistic_table,
}
"""The docs' generated tables by marker name."""


def sync_docs(text: str) -> str:
    """``text`` (a docs page) with each generated table in it rewritten from the catalogue.

    A table sits between ``<!-- catalogue: NAME -->`` and ``<!-- /catalogue -->``.
    """
    for name, table in TABLES.items():
        start = f"<!-- catalogue: {name} -->\n"
        if start not in text:
            continue
        head, rest = text.split(start, 1)
        _, tail = rest.split("<!-- /catalogue -->", 1)
        text = head + start + table() + "<!-- /catalogue -->" + tail
    return text


if __name__ == "__main__":  # python -m harness.core.figure_docs docs/*.md
    import sys
    from pathlib import Path

    for arg in sys.argv[1:]:
        path = Path(arg)
        path.write_text(sync_docs(path.read_text(encoding="utf-8")), encoding="utf-8")
