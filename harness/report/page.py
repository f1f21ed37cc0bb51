"""``report.html``: the whole report as one self-contained page, readable offline.

Everything is inline (CSS in a ``<style>``, charts as base64 ``data:`` URIs),
there is no script, and a Content-Security-Policy forbids any fetch, so the
file can be mailed, attached to a CI run or opened years later and look the
same. All text from the report is escaped. The page has every section
report.md has, in its order: the headline table, the Seed claims and the
per-build tables are drawn here (verdicts coloured, offered rps); every other
section (gates skipped, by phase and the time line, per replica, service kept,
the gateway ledger, not measured) is report.md's own Markdown rendered as HTML
(``markdown-it-py``, raw HTML escaped), so a section added to report.md is on the
page too. Missing optional keys show as "-". Of the gates, those with ``seed:``
(Seed claims) and those skipped appear, as in report.md: the others' verdicts
are ``harness gate``'s, which may be given a baseline run.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from harness.analysis.format import cell as _num
from harness.analysis.format import count_cell
from harness.analysis.model import Report, SeedClaim, plays_pg
from harness.report.charts import CHART_TABLE
from harness.report.claims import CLAIM_HEADER, claim_row
from harness.report.tables import (
    WINDOWS_NOTE,
    headline_notes,
    headline_rows,
    markdown,
    not_measured_lines,
    repeat_note,
    report_warnings,
    table_header,
)
from harness.results.io import harness_version, write_text_atomic

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
"""Nothing may be fetched: images only from data: URIs, styles only inline."""

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #222; max-width: 1240px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
h3 { font-size: 1.05em; margin: 1.4em 0 .4em; }
.status { display: inline-block; padding: .1em .6em; border-radius: .8em; font-weight: 600;
          background: #eee; }
.status-completed { background: #d9f2d9; color: #1e5e1e; }
.status-failed, .status-interrupted, .status-aborted { background: #f8d7d7; color: #7a1a1a; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d0; padding: .28em .7em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f3f3f3; }
tbody tr:nth-child(even) { background: #fafafa; }
.text { text-align: left; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2em 1.2em; }
dt { font-weight: 600; }
dd { margin: 0; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e3e3; }
figcaption { color: #555; font-size: .92em; margin-top: .3em; }
.note { color: #666; font-style: italic; }
footer { margin-top: 3em; color: #888; font-size: .85em; }
.verdict-pass { color: #1e5e1e; font-weight: 600; }
.verdict-fail, .verdict-error { color: #7a1a1a; font-weight: 600; }
.warning { background: #fff4d6; border-left: 4px solid #d9a400; padding: .4em .8em; }
"""


MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")
"""report.md's Markdown (tables, lists, emphasis, code) as HTML; HTML in its text is escaped."""


def page_head(title: str) -> str:
    """The doctype and ``<head>`` every page of ours starts with (one CSP, one style)."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<style>{STYLE}</style>
</head>"""


def esc(value: Any) -> str:
    """Escape anything for HTML text or attribute values; None shows as '-'."""
    return html.escape("-" if value is None else str(value), quote=True)


def _table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], text_cols: Iterable[int] = ()
) -> str:
    """A semantic table; ``text_cols`` are left-aligned (numbers align right)."""
    left = set(text_cols)
    head = "".join(f'<th scope="col"{_cls(i in left)}>{esc(h)}</th>' for i, h in enumerate(header))
    body = []
    for cells in rows:
        tds = []
        for i, cell in enumerate(cells):
            if i == 0:
                tds.append(f'<th scope="row">{esc(cell)}</th>')
            else:
                tds.append(f"<td{_cls(i in left)}>{esc(cell)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _cls(text: bool) -> str:
    return ' class="text"' if text else ""


def _get(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...`` or None when any level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _summary(report: Report) -> str:
    """Seed, window and warmup, then the phases and the traffic the scenario asked for."""
    fault = report.get("fault_window_s") or []
    facts = [
        ("seed", report.get("seed")),
        ("measured window", f"{_num(report.get('duration_s'))} s"),
        ("warmup (excluded)", f"{_num(report.get('warmup_s'))} s"),
        ("fault window", f"{_num(fault[0])}–{_num(fault[1])} s" if len(fault) == 2 else "none"),
        ("baseline build", report.get("baseline")),
    ]
    parts = ["<dl>", *(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts), "</dl>"]
    phases = [
        [p.get("name"), _num(p.get("start_s")), _num(p.get("end_s")), p.get("fault")]
        for p in report.get("phases") or []
        if isinstance(p, Mapping)
    ]
    if phases:
        parts.append("<h3>Phases</h3>")
        parts.append(_table(["phase", "start (s)", "end (s)", "fault"], phases, text_cols=[3]))
    pg = plays_pg(report)  # which endpoints call pg: only where the run played it
    endpoints = [
        [
            name,
            e.get("method"),
            e.get("path"),
            _num(e.get("rate")),
            *(["yes" if e.get("calls_gateway") else "no"] if pg else []),
        ]
        for name, e in (report.get("endpoints") or {}).items()
        if isinstance(e, Mapping)
    ]
    if endpoints:
        parts.append("<h3>Traffic (open model)</h3>")
        header = ["endpoint", "method", "path", "rate (req/s)"]
        header += ["calls the gateway"] if pg else []
        parts.append(_table(header, endpoints, text_cols=[1, 2, 4]))
    return "\n".join(parts)


def _headline(report: Report) -> str:
    """The before/after table of report.md with its warnings and notes, or a note saying
    why it cannot be built."""
    try:
        table = _table(table_header(report), headline_rows(report))
        warnings = [f'<p class="warning">Warning: {esc(w)}</p>' for w in report_warnings(report)]
        notes = [
            f"<p>Note: {esc(n)}</p>" for n in [*repeat_note(report)[:1], *headline_notes(report)]
        ]
        unmeasured = [
            f'<p class="note">Not measured: {esc(n)}</p>' for n in not_measured_lines(report)
        ]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f'<p class="note">No headline table: the report lacks {esc(exc)}.</p>'
    return "\n".join([table, *warnings, *notes, *unmeasured])


def claims_table(claims: Sequence[SeedClaim]) -> str:
    """The Seed claims table (also on the index page), each verdict coloured."""
    rows = []
    for claim in claims:
        cells = [esc(c) for c in claim_row(claim)]
        tds = [f'<th scope="row" class="text">{cells[0]}</th>']
        tds += [f'<td class="text">{c}</td>' for c in cells[1:-1]]
        tds.append(f'<td class="text verdict-{esc(claim["verdict"])}">{cells[-1]}</td>')
        rows.append("<tr>" + "".join(tds) + "</tr>")
    head = "".join(f'<th scope="col" class="text">{esc(h)}</th>' for h in CLAIM_HEADER)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _claims(report: Report) -> str:
    """The Seed claims section, or nothing when no gate has ``seed:``."""
    claims = report.get("seed_claims") or []
    if not claims:
        return ""
    passed = sum(c.get("verdict") == "pass" for c in claims)
    return f"""<section id="seed-claims">
<h2>Seed claims</h2>
<p>{passed}/{len(claims)} hold. The gate decides the verdict (the claim's direction);
the seed's own figure is beside ours for scale.</p>
{claims_table(claims)}
</section>
"""


def build_title(name: str, build: Mapping[str, Any]) -> str:
    """A build's section title, as report.md has it (``tables.markdown``)."""
    stopped = ", aborted" if build.get("status") == "aborted" else ""
    return f"{name} ({build.get('profile', '-')}{stopped})"


def _build_tables(report: Report) -> str:
    """Per build, one row per endpoint: volume, success, latency percentiles, errors."""
    header = ["endpoint", "requests", "rps", "offered rps", "success"]
    header += ["p50", "p95", "p99", "max", "errors"]
    parts = []
    for name, build in (report.get("builds") or {}).items():
        if not isinstance(build, Mapping):
            continue
        title = build_title(name, build)
        rows = []
        for ep, s in (build.get("endpoints") or {}).items():
            lat = _get(s, "latency_s") or {}
            errors = _get(s, "errors") or {}
            error_text = ", ".join(f"{k}: {count_cell(v)}" for k, v in errors.items()) or "-"
            rows.append(
                [ep, count_cell(_get(s, "requests")), _num(_get(s, "achieved_rps"))]
                + [_num(_get(s, "offered_rps")), _num(_get(s, "success_pct"), "%")]
                + [_num(lat.get(q), "s") for q in ("p50", "p95", "p99", "max")]
                + [error_text]
            )
        parts.append(f"<h3>{esc(title)}</h3>")
        parts.append(f'<p class="note">Status: {esc(build.get("status"))}.</p>')
        parts.append(_table(header, rows, text_cols=[9]) if rows else '<p class="note">-</p>')
    return "\n".join(parts) or '<p class="note">No build produced samples.</p>'


def markdown_sections(text: str) -> list[tuple[str, str]]:
    """The ``## `` sections of report.md's text, in order: (title, the Markdown under it)."""
    sections: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
    return [(title, "\n".join(body)) for title, body in sections]


def _sections(report: Report) -> str:
    """Every section of report.md after its headline, in its order: the Seed claims and
    the per-build tables drawn here, every other one from report.md's own Markdown."""
    builds = _builds_section(report)
    try:
        sections = markdown_sections(markdown(report))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        note = f'<p class="note">Sections of report.md left out: the report lacks {esc(exc)}.</p>'
        return "\n".join([_claims(report), builds, note])
    titles = {
        build_title(name, b)
        for name, b in (report.get("builds") or {}).items()
        if isinstance(b, Mapping)
    }
    parts: list[str] = []
    placed = False
    for title, body in sections:
        if title == "Seed claims":
            parts.append(_claims(report))
        elif title in titles:
            if not placed:  # the builds' sections follow one another: drawn in one place
                parts.append(builds)
                placed = True
        else:
            anchor = re.sub(r"[^a-z0-9]+", "-", title.split(" (")[0].lower()).strip("-")
            parts.append(
                f'<section id="{esc(anchor)}">\n<h2>{esc(title)}</h2>\n'
                f"{MARKDOWN.render(body)}</section>"
            )
    if not placed:  # no build produced samples: said where the builds would be
        parts.append(builds)
    return "\n".join(parts)


def _builds_section(report: Report) -> str:
    return f"""<section id="builds">
<h2>Per build and endpoint</h2>
{_build_tables(report)}
</section>"""


def _charts(charts: Mapping[str, Path]) -> str:
    """Each chart inline as a data: URI, in the usual order, with its caption."""
    captions = {chart.key: chart.caption for chart in CHART_TABLE}
    keys = [k for k in captions if k in charts] + [k for k in charts if k not in captions]
    parts = []
    for key in keys:
        caption = captions.get(key, key.replace("_", " "))
        try:
            data = base64.b64encode(Path(charts[key]).read_bytes()).decode("ascii")
        except OSError:
            parts.append(f'<p class="note">Chart {esc(key)} is missing.</p>')
            continue
        parts.append(
            f'<figure id="chart-{esc(key)}"><img src="data:image/png;base64,{data}" '
            f'alt="{esc(caption)}"><figcaption>{esc(caption)}</figcaption></figure>'
        )
    return "\n".join(parts) or '<p class="note">No charts.</p>'


def render_html(report: Report, charts: Mapping[str, Path]) -> str:
    """The report as one HTML page: summary, headline table, every other section of
    report.md, charts."""
    scenario, run_id, status = report.get("scenario"), report.get("run_id"), report.get("status")
    status_class = "".join(c for c in str(status) if c.isalnum())
    title = f"{scenario} — run {run_id} ({status})"
    return f"""{page_head(title)}
<body>
<header>
<h1>{esc(scenario)} <small>run {esc(run_id)}</small></h1>
<p>Status: <span class="status status-{status_class}">{esc(status)}</span></p>
</header>
<main>
<section id="scenario">
<h2>Scenario</h2>
{_summary(report)}
</section>
<section id="headline">
<h2>Before / after</h2>
<p>Latency is completion minus <em>intended</em> start (no coordinated omission).
{esc(WINDOWS_NOTE.replace("*", ""))}</p>
{_headline(report)}
</section>
{_sections(report)}
<section id="charts">
<h2>Charts</h2>
{_charts(charts)}
</section>
</main>
<footer>harness {esc(harness_version())} · schema {esc(report.get("schema"))}</footer>
</body>
</html>
"""


def write_html(run_dir: Path, report: Report, charts: Mapping[str, Path]) -> Path:
    """Write ``run_dir/report.html`` atomically; returns its path."""
    path = Path(run_dir) / "report.html"
    write_text_atomic(path, render_html(report, charts))
    return path
