"""The ``harness`` command: parses arguments, delegates to the library, picks exit codes.

Exit codes: 0 success · 1 a gate failed · 2 bad input · 3 the run failed ·
130 interrupted. Only this module prints or exits.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console, ConsoleDimensions
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from harness.core.errors import HarnessError, InputError, RunError, ScenarioError
from harness.scenario.loader import load_scenario

if TYPE_CHECKING:
    from harness.run.events import Progress

EXIT_OK, EXIT_GATE, EXIT_INPUT, EXIT_RUN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

app = typer.Typer(
    help="Load-test and chaos-experiment harness for resilience patterns.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _Console(Console):
    """Rich's console, except that logs and pipes get 140 columns.

    They have no width, and rich's 80 would fold figure names mid-word. Decided
    when printing, not at import, so it follows wherever stdout points then.
    """

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        return size if self.is_terminal else ConsoleDimensions(140, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _Console()
err = Console(stderr=True)

ScenarioArg = Annotated[Path, typer.Argument(help="scenario YAML file", show_default=False)]


def _fail_input(exc: InputError) -> typer.Exit:
    if isinstance(exc, ScenarioError):
        for problem in exc.problems:
            err.print(f"[red]error[/red] {escape(str(problem))}", highlight=False, soft_wrap=True)
        err.print(f"{len(exc.problems)} problem(s) found.", highlight=False)
    else:
        err.print(f"[red]error[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_INPUT)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@app.command()
def validate(scenario: ScenarioArg) -> None:
    """Check a scenario file and report every problem (file:line:column: field: message)."""
    try:
        loaded = load_scenario(scenario)
    except InputError as exc:
        raise _fail_input(exc) from None
    s = loaded.scenario
    console.print(
        f"{scenario}: ok — {len(s.traffic)} endpoint(s), {len(s.pg.phases)} phase(s), "
        f"builds: {', '.join(s.builds)}; {s.warmup:g} s warmup + {s.duration:g} s per build",
        highlight=False,
    )


class _ProgressView:
    """One live line per build; plain lines every 10 s when not on a terminal (CI logs)."""

    def __init__(self) -> None:
        self.live: Live | None = None
        self.last_print = 0.0

    def started(self, name: str) -> None:
        console.print(f"[bold]build {name}[/bold]: starting gateway, target and load generator")
        if console.is_terminal:
            self.live = Live(Text(""), console=console, refresh_per_second=4, transient=False)
            self.live.start()

    def progress(self, p: Progress) -> None:
        rates = "  ".join(
            f"{ep} {p.achieved_rps[ep]:.1f}/{p.offered_rps[ep]:g} rps" for ep in p.offered_rps
        )
        busy = "-" if p.busy_workers is None else f"{p.busy_workers:.0f}"
        pool = "-" if p.max_workers is None else f"{p.max_workers:.0f}"
        line = (
            f"[{p.build}] {min(p.elapsed_s, p.total_s):5.0f}/{p.total_s:.0f}s  {rates}  "
            f"busy {busy}/{pool}  breaker {p.breaker_state or '-'}"
        )
        if self.live is not None:
            self.live.update(Text(line))
        elif time.monotonic() - self.last_print >= 10:
            console.print(line, highlight=False, markup=False, soft_wrap=True)
            self.last_print = time.monotonic()

    def finished(self, name: str, status: str) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
        console.print(f"[bold]build {name}[/bold]: {status}")


def _report(run_dir: Path) -> None:
    from harness.report.make import make_report
    from harness.report.tables import terminal_table

    report = make_report(run_dir)
    if report["builds"]:
        console.print(terminal_table(report))
    html = " report.html, charts/" if (run_dir / "report.html").exists() else ""
    console.print(f"results: {run_dir}  (report.json, report.md,{html})", highlight=False)


@app.command()
def run(
    scenario: ScenarioArg,
    results: Annotated[Path, typer.Option(help="where run folders are written")] = Path("results"),
    build: Annotated[
        list[str] | None, typer.Option("--build", "-b", help="run only these builds (repeatable)")
    ] = None,
    repeat: Annotated[
        int, typer.Option(min=1, max=50, help="run each build N times, interleaved (A B A B)")
    ] = 1,
    junit: Annotated[
        Path | None, typer.Option(help="write the gates' verdicts as JUnit XML here")
    ] = None,
) -> None:
    """Run every build of a scenario under the same load and faults, report, then gate."""
    try:
        loaded = load_scenario(scenario)
    except InputError as exc:
        raise _fail_input(exc) from None
    unknown = sorted(set(build or []) - set(loaded.scenario.builds))
    if unknown:
        raise _fail_input(
            InputError(
                f"unknown build(s) {unknown}; the scenario has {list(loaded.scenario.builds)}"
            )
        )
    # Imported here: the run pulls in pandas, which `validate` and `--help` do not need.
    from harness.run.events import RunListener
    from harness.run.experiment import Experiment

    signal.signal(signal.SIGTERM, _raise_interrupt)
    view = _ProgressView()
    listener = RunListener(
        build_started=view.started, progress=view.progress, build_finished=view.finished
    )
    experiment = Experiment(loaded, results, listener, build or None, repeat=repeat)
    code = EXIT_OK
    try:
        experiment.run()
    except KeyboardInterrupt:
        err.print("interrupted: every process was stopped; partial results kept.")
        code = EXIT_INTERRUPTED
    except RunError as exc:
        err.print(f"[red]run failed[/red]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        code = EXIT_RUN
    finally:
        if view.live is not None:
            view.live.stop()
    try:
        _report(experiment.run_dir)
    except HarnessError as exc:
        err.print(f"no report: {exc}", highlight=False)
        raise typer.Exit(code if code != EXIT_OK else EXIT_RUN) from None
    if code == EXIT_OK and loaded.scenario.gates:
        code = _gate(experiment.run_dir, junit, None, [])
    raise typer.Exit(code)


@app.command()
def report(
    run_dir: Annotated[
        Path, typer.Argument(help="a run folder under results/", show_default=False)
    ],
) -> None:
    """Re-render report.json and report.md of a finished run and print its table."""
    try:
        _report(run_dir)
    except InputError as exc:
        raise _fail_input(exc) from None


def _gate(
    run_dir: Path,
    junit: Path | None,
    baseline: Path | None,
    extra: list[str],
    scenario_gates: bool = True,
) -> int:
    """Evaluate the scenario's gates (and ``extra`` ones); print them; return the exit code."""
    from harness.gates.evaluate import evaluate_all, gates_of
    from harness.gates.junit import junit_xml
    from harness.report.compare import load_report
    from harness.scenario.gates import GateSyntaxError, check_gate
    from harness.scenario.gates import parse_gate as parse

    scenario = load_scenario(run_dir / "scenario.yaml").scenario
    gates = gates_of(scenario) if scenario_gates else []
    for text in extra:
        try:
            gate = parse(text)
        except GateSyntaxError as exc:
            raise InputError(f"--gate {text!r}: {exc}") from None
        problems = check_gate(gate, scenario)
        if problems:
            raise InputError(f"--gate {text!r}: " + "; ".join(problems))
        gates.append(gate)
    if not gates:
        raise InputError(f"{run_dir}: the scenario has no gates and none were given (--gate)")
    report = load_report(run_dir)
    base = load_report(baseline) if baseline is not None else None
    results = evaluate_all(gates, report, base)
    table = Table(title=f"gates ({sum(r.passed for r in results)}/{len(results)} pass)")
    for col in ("gate", "measured", "limit", "verdict"):
        table.add_column(col, justify="left" if col in ("gate", "verdict") else "right")
    for r in results:
        colour = {"pass": "green", "fail": "red", "error": "yellow"}[r.verdict]
        measured = "-" if r.left is None else f"{r.left:.4g}"
        limit = "-" if r.right is None else f"{r.op} {r.right:.4g}"
        verdict = r.verdict + (f" ({r.detail})" if r.detail else "")
        table.add_row(escape(r.name), measured, limit, f"[{colour}]{escape(verdict)}[/{colour}]")
    console.print(table)
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(junit_xml(results, scenario.name))
        console.print(f"JUnit XML: {junit}", highlight=False)
    return EXIT_OK if all(r.passed for r in results) else EXIT_GATE


RunDirArg = Annotated[Path, typer.Argument(help="a run folder under results/", show_default=False)]


@app.command()
def gate(
    run_dir: RunDirArg,
    junit: Annotated[Path | None, typer.Option(help="write JUnit XML here")] = None,
    baseline: Annotated[
        Path | None, typer.Option(help="a saved run (e.g. from main) for baseline.* figures")
    ] = None,
    extra: Annotated[
        list[str] | None, typer.Option("--gate", "-g", help="an extra gate expression")
    ] = None,
    scenario_gates: Annotated[
        bool, typer.Option(help="also check the gates written in the run's scenario")
    ] = True,
) -> None:
    """Check a finished run against its scenario's gates; exit 1 when one fails."""
    try:
        code = _gate(run_dir, junit, baseline, extra or [], scenario_gates)
    except InputError as exc:
        raise _fail_input(exc) from None
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
    from harness.report.compare import compare_runs, load_report, rich_tables
    from harness.report.compare import markdown as to_markdown

    try:
        report_a = load_report(run_a)
        report_b = load_report(run_b) if run_b is not None else None
        labels, groups = compare_runs(report_a, report_b, build or [])
    except InputError as exc:
        raise _fail_input(exc) from None
    for table in rich_tables(labels, groups):
        console.print(table)
    if markdown is not None:
        markdown.write_text(to_markdown(labels, groups))
        console.print(f"Markdown: {markdown}", highlight=False)


@app.command()
def plot(run_dir: RunDirArg) -> None:
    """(Re)draw a run's charts into RUN_DIR/charts/ (PNG, fault phases shaded)."""
    from harness.report.charts import draw_charts
    from harness.results.model import load

    try:
        run = load(run_dir)
        scenario = load_scenario(run_dir / "scenario.yaml").scenario
        charts = draw_charts(run, scenario, run_dir / "charts")  # an unknown preset: InputError
    except InputError as exc:
        raise _fail_input(exc) from None
    for name, path in charts.items():
        console.print(f"{name}: {path}", highlight=False)


_FORWARDED = {"allow_extra_args": True, "ignore_unknown_options": True}
"""The process's own parser reads every argument (``--help`` included): one set of options."""


@app.command(context_settings=_FORWARDED, add_help_option=False)
def pg(ctx: typer.Context) -> None:
    """Run the fault-injecting payment gateway alone, so your own service can call it.

    Options: harness pg --help (--scenario, --port, --control-port, --ledger, --host...).
    """
    from harness.gateway.main import main as gateway_main

    gateway_main(ctx.args, prog="harness pg", standalone=True)


@app.command(context_settings=_FORWARDED, add_help_option=False)
def proxy(ctx: typer.Context) -> None:
    """Forward TCP to a local dependency and break it with Toxiproxy-style toxics on a schedule.

    Options: harness proxy --help (--upstream, --listen, --schedule, --seed, --metrics-port...).
    """
    from harness.proxy.main import main as proxy_main

    proxy_main(ctx.args, prog="harness proxy")


def main() -> None:  # pragma: no cover - console entry point alias
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
