"""One page over several runs: each run's scenario, verdict, report link and seed claims.

``make seeds`` runs every seed scenario and ends here: ``index.html`` (and
``index.md`` beside it, for a README or a PR) lists each run with its
scenario's name and description, its gates passed out of total, a link to
its ``report.html`` and its Seed claims rows. A run is named by its folder,
or by its scenario file: then the latest run of that scenario under the
results folder (``results/<scenario name>/<run id>``). Nothing is re-analysed:
figures come from each run's ``report.json``; a run without one is listed
with the reason, never left out, so a failed seed run shows on the page.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.analysis.model import SeedClaim, read_report
from harness.core.errors import InputError
from harness.gates.evaluate import GateResult, evaluate_all, gates_of
from harness.report.claims import CLAIM_HEADER, claim_row, seed_claims
from harness.report.page import claims_table, esc, page_head
from harness.results.io import harness_version, write_error, write_text_atomic
from harness.scenario.loader import load_scenario

MAX_DESCRIPTION_CHARS = 400
"""A description longer than this is cut on the index page (the report has all of it)."""


@dataclass
class IndexEntry:
    """One row of the index: a run (or a scenario that has none), and what it showed."""

    source: str
    """What was asked for: a run folder, or a scenario file."""
    scenario: str
    description: str = ""
    run_dir: Path | None = None
    run_id: str | None = None
    status: str | None = None
    gates: list[GateResult] = field(default_factory=list)
    claims: list[SeedClaim] = field(default_factory=list)
    problem: str | None = None
    """Why there is no verdict: no run yet, no report.json, an unreadable scenario."""

    @property
    def passed(self) -> int:
        return sum(g.passed for g in self.gates)

    @property
    def answered(self) -> int:
        """Gates with a verdict (not skipped: a build they name was not run)."""
        return sum(g.verdict != "skip" for g in self.gates)

    @property
    def ok(self) -> bool:
        """A run with a report whose gates all pass (a run without gates too)."""
        return self.problem is None and self.passed == self.answered

    def verdict(self) -> str:
        if self.problem is not None:
            return self.problem
        if not self.gates:
            return "no gates"
        skipped = len(self.gates) - self.answered
        return f"{self.passed}/{self.answered} gates pass" + (
            f", {skipped} skipped" if skipped else ""
        )


def is_run_dir(path: Path) -> bool:
    """A run folder holds the scenario it ran (``scenario.yaml``) and its ``manifest.json``."""
    return (path / "scenario.yaml").is_file() and (path / "manifest.json").is_file()


STAMP = re.compile(r"\d{8}T\d{6}Z")
"""How a run id begins: its start in UTC (``20261130T031500Z``); ``--since`` takes one."""


def check_stamp(since: str) -> str:
    if not STAMP.fullmatch(since):
        raise InputError(f"--since {since!r}: expected a UTC stamp like 20261130T031500Z")
    return since


def latest_run(results: Path, scenario_name: str, since: str | None = None) -> Path | None:
    """The newest run folder of a scenario under ``results`` (run ids start with a UTC stamp),
    started at ``since`` or later when given."""
    folder = results / scenario_name
    if not folder.is_dir():
        return None
    runs = [
        p
        for p in folder.iterdir()
        if p.is_dir() and is_run_dir(p) and (since is None or p.name[:16] >= since)
    ]
    if not runs:
        return None
    return max(runs, key=lambda p: (p.name[:16], p.stat().st_mtime))


def run_entry(run_dir: Path, source: str | None = None) -> IndexEntry:
    """What one run folder shows: its gates' verdict and seed claims, from ``report.json``."""
    if not is_run_dir(run_dir):
        raise InputError(f"{run_dir}: not a run folder (no scenario.yaml and manifest.json)")
    source = source or str(run_dir)
    try:
        scenario = load_scenario(run_dir / "scenario.yaml").scenario
    except InputError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return IndexEntry(source, run_dir.parent.name, run_dir=run_dir, problem=f"invalid: {first}")
    entry = IndexEntry(
        source, scenario.name, scenario.description.strip(), run_dir, run_id=run_dir.name
    )
    path = run_dir / "report.json"
    if not path.is_file():
        entry.problem = "no report.json (the run stopped before its report)"
        return entry
    try:
        report = read_report(path)
    except InputError as exc:  # cut short, of another schema, a figure mistyped
        entry.problem = f"report.json unreadable: {exc}"
        return entry
    entry.run_id = report.get("run_id") or run_dir.name
    entry.status = report.get("status")
    entry.gates = evaluate_all(gates_of(scenario), report)
    entry.claims = seed_claims(scenario, report)
    return entry


def scenario_entry(scenario_file: Path, results: Path, since: str | None = None) -> IndexEntry:
    """The latest run of a scenario file under ``results``, or a row saying there is none."""
    if not scenario_file.is_file():
        raise InputError(f"{scenario_file}: no such scenario file")
    try:
        scenario = load_scenario(scenario_file).scenario
    except InputError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return IndexEntry(str(scenario_file), scenario_file.stem, problem=f"invalid: {first}")
    run_dir = latest_run(results, scenario.name, since)
    if run_dir is None:
        after = f" started since {since}" if since else ""
        return IndexEntry(
            str(scenario_file),
            scenario.name,
            scenario.description.strip(),
            problem=f"not run (no run under {results / scenario.name}{after})",
        )
    return run_entry(run_dir, str(scenario_file))


def entries(paths: Sequence[Path], results: Path, since: str | None = None) -> list[IndexEntry]:
    """An entry per path, in the order given: a run folder, or a scenario file's latest run
    (started at ``since`` or later)."""
    if since is not None:
        check_stamp(since)
    out = []
    for path in paths:
        if path.is_dir():
            out.append(run_entry(path))
        elif path.suffix in (".yaml", ".yml"):
            out.append(scenario_entry(path, results, since))
        else:
            raise InputError(f"{path}: neither a run folder nor a scenario file (.yaml)")
    return out


def _report_link(entry: IndexEntry, out_dir: Path) -> str | None:
    """The run's report.html relative to the index page, so the folder can be moved whole."""
    if entry.run_dir is None or not (entry.run_dir / "report.html").is_file():
        return None
    return Path(os.path.relpath(entry.run_dir / "report.html", out_dir)).as_posix()


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DESCRIPTION_CHARS else text[: MAX_DESCRIPTION_CHARS - 1] + "…"


def render_index_html(items: Sequence[IndexEntry], out_dir: Path, title: str) -> str:
    """The index page: a summary table, then each run's seed claims."""
    rows, sections = [], []
    for i, entry in enumerate(items):
        link = _report_link(entry, out_dir)
        report = f'<a href="{esc(link)}">report.html</a>' if link else "-"
        verdict_class = "verdict-pass" if entry.ok else "verdict-fail"
        rows.append(
            f'<tr><th scope="row" class="text"><a href="#run-{i}">{esc(entry.scenario)}</a></th>'
            f'<td class="text">{esc(_short(entry.description) or None)}</td>'
            f'<td class="text">{esc(entry.run_id)}</td>'
            f'<td class="text">{esc(entry.status)}</td>'
            f'<td class="text {verdict_class}">{esc(entry.verdict())}</td>'
            f'<td class="text">{report}</td></tr>'
        )
        claims = (
            claims_table(entry.claims)
            if entry.claims
            else '<p class="note">No gate of this scenario has <code>seed:</code>.</p>'
        )
        sections.append(
            f'<section id="run-{i}"><h2>{esc(entry.scenario)}</h2>'
            f'<p class="note">{esc(entry.source)}</p>{claims}</section>'
        )
    head = "".join(
        f'<th scope="col" class="text">{h}</th>'
        for h in ("scenario", "description", "run", "status", "verdict", "report")
    )
    passed = sum(e.ok for e in items)
    return f"""{page_head(title)}
<body>
<header>
<h1>{esc(title)}</h1>
<p>{passed}/{len(items)} runs pass every gate.</p>
</header>
<main>
<table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>
{"".join(sections)}
</main>
<footer>harness {esc(harness_version())}</footer>
</body>
</html>
"""


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_index_md(items: Sequence[IndexEntry], out_dir: Path, title: str) -> str:
    """The same as Markdown: the runs, then one table of every seed claim."""
    lines = [f"# {title}", "", "| scenario | run | verdict | report |", "|---|---|---|---|"]
    for entry in items:
        link = _report_link(entry, out_dir)
        report = f"[report.html]({link})" if link else "-"
        lines.append(
            f"| {_md(entry.scenario)} | {_md(entry.run_id or '-')} | {_md(entry.verdict())} "
            f"| {report} |"
        )
    claims = [(e, c) for e in items for c in e.claims]
    if claims:
        header = ["scenario", *CLAIM_HEADER]
        lines += ["", "## Seed claims", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "---|" * len(header))
        for entry, claim in claims:
            cells = [entry.scenario, *claim_row(claim)]
            lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


MARK = "<!-- written by harness index; the next harness index replaces it -->"
"""The first line of both pages: a file without it is not ours to replace."""


def write_index(items: Sequence[IndexEntry], out: Path, title: str = "Runs") -> list[Path]:
    """Write ``out`` (HTML) and the Markdown beside it (``.md``); returns both paths.

    Either file may be replaced only if an earlier ``harness index`` wrote it (``MARK``):
    ``--out README.html`` silently replaced the README.md beside it.
    """
    out_dir = out.parent
    md = out.with_suffix(".md")
    for path in (out, md):
        _check_ours(path, out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(out_dir, exc) from exc
    write_text_atomic(out, MARK + "\n" + render_index_html(items, out_dir, title))
    write_text_atomic(md, MARK + "\n" + render_index_md(items, out_dir, title))
    return [out, md]


def _check_ours(path: Path, out: Path) -> None:
    """Refuse to replace a file ``harness index`` did not write."""
    try:
        with path.open("rb") as f:
            first = f.readline().rstrip(b"\r\n")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return  # nothing to replace, or the write fails saying where (exit 3)
    except OSError as exc:
        raise InputError(f"--out {out}: {path} cannot be read ({exc.strerror})") from exc
    if first != MARK.encode():
        beside = "" if path == out else f" (the Markdown written beside --out {out})"
        raise InputError(
            f"--out {out}: {path}{beside} exists and was not written by harness index; "
            "it would be replaced: choose another --out, or move that file"
        )
