"""Compare two runs (main vs a branch) or two builds of one run, figure by figure.

Each row gives both values, the % change and, when both sides were repeated
(``harness run --repeat N``), each value's bootstrap 95% confidence interval and
whether the difference is larger than the noise: the intervals do not overlap. The
verdict column is the judge's (``harness.analysis.judge``) for the figures it knows
(an endpoint's latency and success), from both sides' 5-s blocks: ``better``, ``worse``,
``within noise`` or ``not enough data``, the second side against the first.
Figure names carry their phase in brackets (``p95[outage]``), so the terminal
table is built of plain ``Text``, never markup.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text

from harness.analysis.combine import change_pct, flatten
from harness.analysis.format import change, interval, number
from harness.analysis.judge import blocks_of, judge, policy_of
from harness.analysis.model import BuildFigures, Report, read_report
from harness.core.errors import InputError


@dataclass(frozen=True)
class Row:
    """One figure on both sides."""

    figure: str
    a: float | None
    b: float | None
    change_pct: float | None
    beyond_noise: bool | None
    ci_a: tuple[float, float] | None = None
    ci_b: tuple[float, float] | None = None
    """Each side's 95% interval, when it was repeated."""
    verdict: str = "-"
    """The judge's verdict of ``b`` against ``a`` with its shift (``worse (+24%, p=0.002)``);
    ``-`` for a figure the judge does not know."""

    def cells(self) -> list[str]:
        """The row as text: figure, both values (with their intervals), change, noise."""
        return [
            self.figure,
            _value(self.a, self.ci_a),
            _value(self.b, self.ci_b),
            change(self.change_pct),
            _noise(self),
            self.verdict,
        ]


def _value(value: float | None, ci: tuple[float, float] | None) -> str:
    text = number(value)
    return text if ci is None else interval(text, number(ci[0]), number(ci[1]))


def load_report(run_dir: Path) -> Report:
    """A run's report, rendered from its raw files if report.json is missing (and not
    written, while the run is still going on)."""
    from harness.report.make import make_report
    from harness.run.manifest import in_progress

    path = Path(run_dir) / "report.json"
    live = in_progress(Path(run_dir))
    if path.exists() and live is None:
        return read_report(path)
    return make_report(run_dir, write=live is None)


def _interval(build: BuildFigures, key: str) -> tuple[float, float] | None:
    ci = build.get("ci95", {}).get(key)
    if not ci or ci[0] is None or ci[1] is None:
        return None
    return float(ci[0]), float(ci[1])


def compare_builds(a: BuildFigures, b: BuildFigures) -> list[Row]:
    """Rows for every figure the two build sections share."""
    flat_a, flat_b = flatten(a), flatten(b)
    rows = []
    for key in flat_a:
        if key not in flat_b:
            continue
        ia, ib = _interval(a, key), _interval(b, key)
        beyond = None if ia is None or ib is None else (ia[1] < ib[0] or ib[1] < ia[0])
        pct = change_pct(flat_a[key], flat_b[key])
        verdict = _verdict(a, b, key)
        rows.append(Row(key, flat_a[key], flat_b[key], pct, beyond, ia, ib, verdict))
    return rows


def _verdict(a: BuildFigures, b: BuildFigures, key: str) -> str:
    """The judge's verdict of ``b``'s figure against ``a``'s, from their blocks."""
    policy = policy_of(key)
    if policy is None:
        return "-"
    first, second = blocks_of(a, key), blocks_of(b, key)
    if first is None or second is None:
        return "not enough data"
    return judge(first, second, policy).short()


def compare_runs(
    report_a: Report, report_b: Report | None, builds: list[str]
) -> tuple[list[str], dict[str, list[Row]]]:
    """Pick what to compare; returns the two column labels and the rows per comparison.

    One run and two builds: build vs build within it. Two runs: the same builds
    (all shared ones, or those named) in each.
    """
    if report_b is None:
        if len(builds) != 2:
            raise InputError("with one run, name exactly two builds: --build A --build B")
        missing = [n for n in builds if n not in report_a["builds"]]
        if missing:
            raise InputError(f"no results for build(s) {missing} in {report_a.get('run_id')}")
        first, second = builds
        rows = compare_builds(report_a["builds"][first], report_a["builds"][second])
        return [first, second], {f"{first} vs {second}": rows}
    shared = [n for n in report_a["builds"] if n in report_b["builds"]]
    if not shared:
        raise InputError(
            f"no build in common: run {report_a.get('run_id')} has "
            f"{', '.join(report_a['builds']) or 'no build'}, run {report_b.get('run_id')} has "
            f"{', '.join(report_b['builds']) or 'no build'}; nothing to compare (two builds "
            "of one run: --build A --build B)"
        )
    chosen = builds or shared
    missing = [n for n in chosen if n not in shared]
    if missing:
        raise InputError(f"build(s) {missing} are not in both runs; both have {shared}")
    labels = [str(report_a.get("run_id")), str(report_b.get("run_id"))]
    return labels, {
        name: compare_builds(report_a["builds"][name], report_b["builds"][name]) for name in chosen
    }


PLAN_KEYS = ("duration_s", "warmup_s", "phases")
"""What two runs of one scenario share unless the scenario was edited between them."""


def baseline_refused(run: Report, base: Report, where: str) -> list[str]:
    """Why ``base`` cannot be ``run``'s baseline (empty when it can): it is another
    scenario's run, or another harness version computed its figures. A plan edited between
    them is only said (``unrelated``): a pull request may change its own scenario."""
    problems = []
    if run["scenario"] != base["scenario"]:
        problems.append(
            f"--baseline {where} is a run of scenario {base['scenario']!r} and the run one of "
            f"{run['scenario']!r}: a baseline is the same scenario's run (on the main branch)"
        )
    mine, theirs = run.get("harness_version"), base.get("harness_version")
    if mine and theirs and mine != theirs:
        problems.append(
            f"--baseline {where} was made by harness {theirs} and the run by harness {mine}: "
            "figures another version computed are not compared; run the baseline again "
            f"with harness {mine}"
        )
    return problems


def unrelated(report_a: Report, report_b: Report, what: str = "the two runs") -> list[str]:
    """Why the figures of two reports may not be comparable (warnings; empty when they are):
    other scenarios, or one scenario whose plan changed (duration, warmup, phases, endpoints)."""
    a, b = report_a["scenario"], report_b["scenario"]
    if a != b:
        return [f"{what} are of different scenarios ({a} and {b}): figures of different plans"]
    changed = [key for key in PLAN_KEYS if report_a.get(key) != report_b.get(key)]
    if sorted(report_a["endpoints"]) != sorted(report_b["endpoints"]):
        changed.append("endpoints")
    if not changed:
        return []
    return [f"{what} are of scenario {a}, edited between them: {', '.join(changed)} differ"]


def _noise(row: Row) -> str:
    if row.beyond_noise is None:
        return "n/a"
    return "yes" if row.beyond_noise else "no"


def rich_tables(labels: list[str], groups: dict[str, list[Row]]) -> list[Table]:
    """The comparison for the terminal: one table per comparison, every text literal."""
    tables = []
    for title, rows in groups.items():
        table = Table(title=Text(title))
        for col in ("figure", labels[0], labels[1], "change", "beyond noise", "verdict"):
            table.add_column(Text(col), justify="left" if col == "figure" else "right")
        for r in rows:
            table.add_row(*(Text(c) for c in r.cells()))
        tables.append(table)
    return tables


def markdown(
    labels: list[str], groups: dict[str, list[Row]], warnings: list[str] | None = None
) -> str:
    """The comparison as Markdown, for a pull-request comment (its warnings first)."""
    out = [f"> **warning**: {w}" for w in warnings or []]
    out += [""] if out else []
    for title, rows in groups.items():
        out += [
            f"### {title}",
            "",
            f"| figure | {labels[0]} | {labels[1]} | change | beyond noise | verdict |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            out.append("| " + " | ".join(r.cells()) + " |")
        out.append("")
    return "\n".join(out)
