"""Commands that read a finished run: report, gate, compare, plot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from harness.cli._app import (
    EXIT_GATE,
    EXIT_OK,
    EXIT_RUN,
    RunDirArg,
    app,
    console,
    err,
    fail_input,
    fail_run,
    refuse_repeated_builds,
    write_output,
)
from harness.core.errors import InputError, RunError
from harness.scenario.loader import load_scenario

if TYPE_CHECKING:
    from harness.analysis.model import Report


def render_report(run_dir: Path) -> None:
    """Write a run's report; print its headline table, warnings and notes, and the files.
    A run still going on is read as it stands and nothing is written into it."""
    from harness.report.make import make_report
    from harness.report.tables import (
        headline_notes,
        not_measured_lines,
        report_warnings,
        terminal_table,
    )
    from harness.run.manifest import in_progress

    live = in_progress(run_dir)
    report = make_report(run_dir, write=live is None)
    if report["builds"]:
        console.print(terminal_table(report))
        for warning in report_warnings(report):
            console.print(Text.assemble(("warning", "bold yellow"), f": {warning}"))
        for note in headline_notes(report):
            console.print(Text(f"note: {note}"))
        for line in not_measured_lines(report):  # why a cell reads "-"
            console.print(Text.assemble(("not measured", "dim"), f": {line}"))
    if live is not None:
        console.print(
            f"{run_dir}: {live}: reported as it stands, nothing written (its report is "
            "written when it ends)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return
    files = ["report.json", "report.md"]
    files += ["report.html", "charts/"] if (run_dir / "report.html").exists() else []
    console.print(
        f"results: {run_dir}  ({', '.join(files)})", highlight=False, markup=False, soft_wrap=True
    )


def _warn(warnings: list[str]) -> None:
    """Warnings on stderr, so a table or Markdown on stdout stays what it is."""
    for warning in warnings:
        err.print(Text.assemble(("warning", "bold yellow"), f": {warning}"), soft_wrap=True)


@app.command()
def report(
    run_dir: Annotated[
        Path, typer.Argument(help="a run folder under results/", show_default=False)
    ],
) -> None:
    """Re-render report.json and report.md of a finished run and print its table."""
    try:
        render_report(run_dir)
    except InputError as exc:
        raise fail_input(exc) from None
    except RunError as exc:
        err.print(f"[red]no report[/red]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_RUN) from None


def _read_baseline(path: Path) -> Report:
    """``--baseline``: a run folder, or a ``report.json`` kept on its own."""
    from harness.analysis.model import read_report
    from harness.report.compare import load_report

    if path.is_file():
        return read_report(path)
    if not path.is_dir():
        raise InputError(f"--baseline {path}: no such run folder or report.json")
    return load_report(path)


def run_gates(
    run_dir: Path,
    junit: Path | None,
    baseline: Path | None,
    extra: list[str],
    scenario_gates: bool = True,
    summary: Path | None = None,
    charts_url: str | None = None,
) -> int:
    """Evaluate the scenario's gates (and ``extra`` ones); print them; return the exit code.
    The pull request's markdown goes to ``summary`` and, in a GitHub Actions job, is added
    to the job's summary (``$GITHUB_STEP_SUMMARY``)."""
    from harness.gates.evaluate import baseline_gaps, evaluate_all, gates_of
    from harness.gates.junit import junit_xml
    from harness.report.compare import baseline_refused, load_report, unrelated
    from harness.scenario.gates import GateSyntaxError, check_gate
    from harness.scenario.gates import parse_gate as parse

    scenario = load_scenario(run_dir / "scenario.yaml").scenario
    gates = gates_of(scenario) if scenario_gates else []
    # The seed's own figure of each gate (seed:), in the gates' order; --gate ones have none.
    seeds = [s.seed for s in scenario.gate_specs()] if scenario_gates else []
    for text in extra:
        try:
            gate = parse(text)
        except GateSyntaxError as exc:
            shown = text if len(text) <= 80 else text[:77] + "..."
            raise InputError(f"--gate {shown!r}: {exc}") from None
        problems = check_gate(gate, scenario)
        if problems:
            raise InputError(f"--gate {text!r}: " + "; ".join(problems))
        gates.append(gate)
    if not gates:
        raise InputError(f"{run_dir}: the scenario has no gates and none were given (--gate)")
    report = load_report(run_dir)
    base = None
    if baseline is not None:  # a run folder, or its report.json kept alone (an artifact)
        base = _read_baseline(baseline)
        refused = baseline_refused(report, base, str(baseline)) + [
            f"--baseline {baseline}: {gap}" for gap in baseline_gaps(gates, base)
        ]
        if refused:
            raise InputError("; ".join(refused))
        _warn(unrelated(report, base, "the run and its --baseline"))  # a plan edited: said
    results = evaluate_all(gates, report, base)
    seeds += [None] * (len(results) - len(seeds))
    skipped = sum(r.verdict == "skip" for r in results)
    title = f"gates ({sum(r.passed for r in results)}/{len(results) - skipped} pass"
    table = Table(title=title + (f", {skipped} skipped)" if skipped else ")"))
    with_seeds = any(seeds)
    columns = ("gate", "measured", "limit", "verdict") + (("seed",) if with_seeds else ())
    for col in columns:
        table.add_column(col, justify="left" if col in ("gate", "verdict", "seed") else "right")
    for r, seed in zip(results, seeds, strict=True):
        colour = {"pass": "green", "fail": "red", "error": "yellow", "skip": "cyan"}[r.verdict]
        measured = r.show(r.left)  # in the figure's unit: 7 ms <= 1.83 s
        limit = "-" if r.right is None else f"{r.op} {r.show(r.right)}"
        verdict = r.verdict + (f" ({r.detail})" if r.detail else "")
        cells = [escape(r.name), measured, limit, f"[{colour}]{escape(verdict)}[/{colour}]"]
        if with_seeds:  # the seed article's own figure for the claim (gates with seed:)
            cells.append(escape(seed or "-"))
        table.add_row(*cells)
    console.print(table)
    if junit is not None:
        write_output(junit, junit_xml(results, scenario.name))
        console.print(f"JUnit XML: {junit}", highlight=False, markup=False)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary is not None or step_summary:
        from harness.report.summary import pr_summary

        charts = sorted(p.name for p in (run_dir / "charts").glob("*.png"))
        text = pr_summary(report, results, base, charts, charts_url)
        if summary is not None:
            write_output(summary, text)
            console.print(f"summary: {summary}", highlight=False, markup=False)
        if step_summary:  # GitHub's file for this step, which it appends to the job's page
            try:
                with open(step_summary, "a", encoding="utf-8") as job:
                    job.write(text + "\n")
            except OSError as exc:
                _warn([f"GITHUB_STEP_SUMMARY {step_summary}: not written ({exc.strerror})"])
    return EXIT_GATE if any(r.failed for r in results) else EXIT_OK


@app.command()
def gate(
    run_dir: RunDirArg,
    junit: Annotated[Path | None, typer.Option(help="write JUnit XML here")] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="main's run of the same scenario (its folder or report.json) for baseline.* "
            "figures; another scenario's or harness version's is refused (exit 2)"
        ),
    ] = None,
    extra: Annotated[
        list[str] | None, typer.Option("--gate", "-g", help="an extra gate expression")
    ] = None,
    scenario_gates: Annotated[
        bool, typer.Option(help="also check the gates written in the run's scenario")
    ] = True,
    summary: Annotated[
        Path | None,
        typer.Option(
            help="write the pull request's markdown here: verdicts, the figures that moved "
            "beyond noise, links to the charts (added to $GITHUB_STEP_SUMMARY when set)"
        ),
    ] = None,
    charts_url: Annotated[
        str | None,
        typer.Option(help="where the run folder is published, for the summary's chart links"),
    ] = None,
) -> None:
    """Check a finished run against its scenario's gates; exit 1 when one fails."""
    try:
        code = run_gates(run_dir, junit, baseline, extra or [], scenario_gates, summary, charts_url)
    except InputError as exc:
        raise fail_input(exc) from None
    except RunError as exc:
        raise fail_run(exc) from None
    raise typer.Exit(code)


@app.command()
def compare(
    run_a: RunDirArg,
    run_b: Annotated[
        Path | None, typer.Argument(help="a second run folder (omit to compare builds of RUN_A)")
    ] = None,
    build: Annotated[
        list[str] | None, typer.Option("--build", "-b", help="builds to compare (repeatable)")
    ] = None,
    markdown: Annotated[
        Path | None, typer.Option(help="also write the comparison as Markdown (PR comment)")
    ] = None,
) -> None:
    """Compare two runs (main vs branch) or two builds of one run, figure by figure."""
    from harness.report.compare import compare_runs, load_report, rich_tables, unrelated
    from harness.report.compare import markdown as to_markdown

    refuse_repeated_builds(build)
    try:
        report_a = load_report(run_a)
        report_b = load_report(run_b) if run_b is not None else None
        labels, groups = compare_runs(report_a, report_b, build or [])
    except InputError as exc:
        raise fail_input(exc) from None
    warnings = unrelated(report_a, report_b) if report_b is not None else []
    _warn(warnings)
    for table in rich_tables(labels, groups):
        console.print(table)
    if markdown is not None:
        try:
            write_output(markdown, to_markdown(labels, groups, warnings))
        except RunError as exc:
            raise fail_run(exc) from None
        console.print(f"Markdown: {markdown}", highlight=False, markup=False)


@app.command()
def plot(run_dir: RunDirArg) -> None:
    """(Re)draw a run's charts into RUN_DIR/charts/ (PNG, fault phases shaded)."""
    from harness.report.charts import draw_charts
    from harness.results.model import load
    from harness.run.manifest import in_progress

    try:
        live = in_progress(run_dir)
        if live is not None:  # a reader never writes into a run going on
            raise InputError(f"{run_dir}: {live}: its charts are drawn when it ends")
        run = load(run_dir)
        scenario = load_scenario(run_dir / "scenario.yaml").scenario
        charts = draw_charts(run, scenario, run_dir / "charts")  # an unknown preset: InputError
    except InputError as exc:
        raise fail_input(exc) from None
    for name, path in charts.items():
        console.print(f"{name}: {path}", highlight=False, markup=False)


@app.command()
def index(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="run folders, or scenario files (each: its latest run under --results)",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option(help="the page to write (index.md is written beside it)")
    ] = Path("results/index.html"),
    results: Annotated[
        Path, typer.Option(help="where a scenario file's runs are looked for")
    ] = Path("results"),
    since: Annotated[
        str | None,
        typer.Option(
            help="for scenario files: only runs started at this UTC stamp or later "
            "(20261130T031500Z), so a run that never started is not stood in for by an older one"
        ),
    ] = None,
    title: Annotated[str, typer.Option(help="the page's title")] = "Runs",
    check: Annotated[
        bool,
        typer.Option("--check", help="exit 1 unless every run has a report and passes every gate"),
    ] = False,
) -> None:
    """One page over several runs: scenario, verdict, report link and seed claims of each."""
    from harness.report.index import entries, write_index

    try:
        items = entries(paths, results, since)
        written = write_index(items, out, title)
    except InputError as exc:
        raise fail_input(exc) from None
    except RunError as exc:
        raise fail_run(exc) from None
    table = Table(title=Text(f"{title} ({sum(e.ok for e in items)}/{len(items)} pass every gate)"))
    for col in ("scenario", "run", "verdict", "seed claims"):
        table.add_column(col)
    for e in items:
        colour = "green" if e.ok else "red"
        claims = f"{sum(c['verdict'] == 'pass' for c in e.claims)}/{len(e.claims)} hold"
        table.add_row(
            escape(e.scenario),
            escape(e.run_id or "-"),
            f"[{colour}]{escape(e.verdict())}[/{colour}]",
            claims if e.claims else "-",
        )
    console.print(table)
    console.print("index: " + ", ".join(str(p) for p in written), highlight=False, markup=False)
    raise typer.Exit(EXIT_GATE if check and not all(e.ok for e in items) else EXIT_OK)
