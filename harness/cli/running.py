"""Commands that run things: run, clean, worker."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from harness.analysis.format import number
from harness.cli._app import (
    EXIT_GATE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN,
    ResultsOpt,
    ScenarioArg,
    app,
    console,
    err,
    fail_input,
    fail_run,
    refuse_repeated_builds,
    stop_on_signals,
)
from harness.core.errors import HarnessError, InputError, RunError
from harness.scenario.loader import load_scenario

if TYPE_CHECKING:
    from harness.results.manifest import BuildRecord
    from harness.run.cleanup import CleanReport
    from harness.run.events import Progress, RunListener
    from harness.run.targets import Leftovers


class _ProgressView:
    """One live line per build; plain lines every 10 s when not on a terminal (CI logs)."""

    def __init__(self) -> None:
        self.live: Live | None = None
        self.last_print = 0.0
        self.builds: Mapping[str, BuildRecord] = {}
        """The run's build records (the manifest's), for why a build was aborted."""

    def started(self, name: str) -> None:
        console.print(
            f"[bold]build {escape(name)}[/bold]: starting dependencies, target and load generator"
        )
        if console.is_terminal:
            self.live = Live(Text(""), console=console, refresh_per_second=4, transient=False)
            self.live.start()

    def progress(self, p: Progress) -> None:
        rates = "  ".join(
            f"{ep} {p.achieved_rps[ep]:.1f}/{p.offered_rps[ep]:g} rps"
            + (f" ({p.dropped[ep]} dropped)" if p.dropped.get(ep) else "")
            for ep in p.offered_rps
        )
        busy = "-" if p.busy_workers is None else f"{p.busy_workers:.0f}"
        pool = "-" if p.max_workers is None else f"{p.max_workers:.0f}"
        stale = (
            f" (metrics {p.metrics_age_s:.0f} s old: not answering)"
            if p.metrics_age_s is not None and p.metrics_age_s > 2 * p.interval_s
            else ""
        )
        line = (
            f"[{p.build}] {min(p.elapsed_s, p.total_s):5.0f}/{p.total_s:.0f}s  {rates}  "
            f"busy {busy}/{pool}  breaker {p.breaker_state or '-'}{stale}"
        )
        if self.live is not None:
            self.live.update(Text(line))
        elif time.monotonic() - self.last_print >= 10:
            console.print(line, highlight=False, markup=False, soft_wrap=True)
            self.last_print = time.monotonic()

    def stop_live(self) -> None:
        """End the live line, so what is printed next stays on its own lines."""
        if self.live is not None:
            self.live.stop()
            self.live = None

    def warning(self, name: str, text: str) -> None:
        self.stop_live()
        err.print(
            f"[yellow]build {escape(name)}: warning[/yellow]: {escape(text)}",
            highlight=False,
            soft_wrap=True,
        )

    def finished(self, name: str, status: str) -> None:
        self.stop_live()
        console.print(f"[bold]build {escape(name)}[/bold]: {escape(status)}")
        abort = self.builds[name].get("abort") if name in self.builds else None
        if abort is not None:  # a gate with abort: true stopped it: which, and on what
            err.print(
                f"[red]build {escape(name)} aborted[/red] at {abort['at_s']:g} s of the "
                f"measured window: gate {escape(repr(abort['gate']))} failed after phase "
                f"{escape(repr(abort['phase']))} ({escape(abort['expr'])}: measured "
                f"{number(abort['value'])} against {number(abort['limit'])})",
                highlight=False,
                soft_wrap=True,
            )


def progress_listener() -> tuple[_ProgressView, RunListener]:
    """The live progress lines and the run listener that feeds them (run, tune)."""
    from harness.run.events import RunListener

    view = _ProgressView()
    listener = RunListener(
        build_started=view.started,
        progress=view.progress,
        warning=view.warning,
        build_finished=view.finished,
    )
    return view, listener


@app.command()
def run(
    scenario: ScenarioArg,
    results: ResultsOpt = Path("results"),
    build: Annotated[
        list[str] | None, typer.Option("--build", "-b", help="run only these builds (repeatable)")
    ] = None,
    repeat: Annotated[
        int, typer.Option(min=1, max=50, help="run each build N times, interleaved (A B A B)")
    ] = 1,
    junit: Annotated[
        Path | None, typer.Option(help="write the gates' verdicts as JUnit XML here")
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="let url builds be off this machine, if the scenario says allow-remote: true",
        ),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=256,
            help="Locust workers sharing the load (a master and N workers); 1: one Locust process",
        ),
    ] = 1,
    external_workers: Annotated[
        bool,
        typer.Option(
            "--external-workers",
            help="start no workers: wait for --workers N started with `harness worker`",
        ),
    ] = False,
    master_bind: Annotated[
        str | None,
        typer.Option(
            help="HOST:PORT the Locust master listens on (default 127.0.0.1, a free port; "
            "5557 with --external-workers); off loopback needs allow-remote",
        ),
    ] = None,
) -> None:
    """Run every build of a scenario under the same load and faults, report, then gate."""
    try:
        loaded = load_scenario(scenario, check_folders=True)
    except InputError as exc:
        raise fail_input(exc) from None
    refuse_repeated_builds(build)
    unknown = sorted(set(build or []) - set(loaded.scenario.builds))
    if unknown:
        raise fail_input(
            InputError(
                f"unknown build(s) {unknown}; the scenario has {list(loaded.scenario.builds)}"
            )
        )
    from harness.cli.results import render_report, run_gates
    from harness.gates.abort import GateAbort, abort_gates
    from harness.gates.evaluate import gates_of, judge_shortfalls

    short = judge_shortfalls(gates_of(loaded.scenario), loaded.scenario, repeat)
    if short:  # the judge would only say "not enough data" after the whole run
        raise fail_input(InputError("; ".join(short)))

    # Imported here: the run pulls in pandas, which `validate` and `--help` do not need.
    from harness.results.io import WriteError
    from harness.run.experiment import Experiment
    from harness.run.loadgen import LoadWorkers

    try:
        load_workers = LoadWorkers.parse(
            workers,
            external=external_workers,
            master_bind=master_bind,
            scenario=loaded.scenario,
            allow_remote=allow_remote,
        )
    except InputError as exc:
        raise fail_input(exc) from None

    from harness.run.kinds.registry import leftovers_of

    # Runs a crash left "running" are closed first (and what their builds' kinds may leave
    # outside them, containers, removed when this run's builds are of such a kind).
    outside = leftovers_of(loaded.scenario.builds.values())
    _print_clean(_clean(results, leftovers=outside), quiet=True)
    stop_on_signals()
    view, listener = progress_listener()
    try:  # probes the results folder: "cannot write here" before any process starts
        experiment = Experiment(
            loaded,
            results,
            listener,
            build or None,
            repeat=repeat,
            allow_remote=allow_remote,
            load_workers=load_workers,
            # Gates with abort: true, checked after each phase (harness.gates.abort).
            abort_check=GateAbort(loaded.scenario) if abort_gates(loaded.scenario) else None,
        )
    except InputError as exc:
        raise fail_input(exc) from None
    except RunError as exc:
        err.print(f"[red]run failed[/red]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_RUN) from None
    view.builds = experiment.manifest.builds
    if load_workers.external:
        where = f"{load_workers.connect_host}:{load_workers.port}"
        err.print(
            f"each build waits for {workers} Locust worker(s) at {where}: start them with "
            f"`harness worker --master {where}` (they serve one build after another)",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    code = EXIT_OK
    unwritable: WriteError | None = None
    try:
        experiment.run()
    except KeyboardInterrupt:
        if experiment.manifest.record.get("status") == "completed":
            # Every build had ended and said so: Ctrl-C came as the run was closing, before
            # the report; the user asked to stop, so no report is begun.
            view.stop_live()
            _report_interrupted(experiment.run_dir, gates=bool(loaded.scenario.gates))
            raise typer.Exit(EXIT_INTERRUPTED) from None
        err.print("interrupted: every process was stopped; partial results kept.")
        code = EXIT_INTERRUPTED
    except RunError as exc:
        err.print(f"[red]run failed[/red]: {escape(str(exc))}", highlight=False, soft_wrap=True)
        code = EXIT_RUN
        unwritable = exc if isinstance(exc, WriteError) else None
    finally:
        view.stop_live()
    aborted = any("abort" in info for info in experiment.manifest.builds.values())
    if experiment.manifest_problem is not None:
        err.print(
            f"manifest not updated: {experiment.manifest_problem}", highlight=False, markup=False
        )
    if unwritable is not None:
        # Rendering a report would only fail again, half-way; the data is in the folder.
        err.print(
            f"no report: the results folder cannot be written. Free some space, then "
            f"`harness clean --results {results}` and `harness report {experiment.run_dir}`.",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(code)
    try:
        render_report(experiment.run_dir)
        if code == EXIT_OK and loaded.scenario.gates:
            try:
                code = run_gates(experiment.run_dir, junit, None, [])
            except RunError as exc:  # --junit cannot be written
                raise fail_run(exc) from None
            if aborted:  # its gate failed, whatever the final figures say
                code = EXIT_GATE
    except HarnessError as exc:
        err.print(f"no report: {exc}", highlight=False, markup=False)
        raise typer.Exit(code if code != EXIT_OK else EXIT_RUN) from None
    except KeyboardInterrupt:
        _report_interrupted(experiment.run_dir, gates=bool(loaded.scenario.gates))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    raise typer.Exit(code)


REPORT_FILES = ("report.json", "report.md", "report.html", "charts")


def _report_interrupted(run_dir: Path, gates: bool) -> None:
    """Ctrl-C after the builds: what the report had written, and how to finish it."""
    written = [name for name in REPORT_FILES if (run_dir / name).exists()]
    then = f" and `harness gate {run_dir}`" if gates else ""
    err.print(
        f"interrupted while writing the report: the builds' results are complete and kept; "
        f"written so far: {', '.join(written) or 'nothing of the report'}. To finish: "
        f"`harness report {run_dir}`"
        f"{then}.",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def _clean(results: Path, leftovers: bool | Sequence[Leftovers] = False) -> CleanReport:
    from harness.run.cleanup import clean_results

    return clean_results(results, leftovers=leftovers)


def clean_quietly(results: Path) -> None:
    """Close what runs under ``results`` a dead process left open, saying only what changed
    (the start of ``harness run``, of ``harness tune --resume``)."""
    _print_clean(_clean(results), quiet=True)


def _print_clean(report: CleanReport, quiet: bool = False) -> None:
    """What a clean did; ``quiet`` (at the start of a run): only what it changed or failed."""
    for closed in report.closed:
        console.print(
            f"{closed.run_dir}: {closed.status} — {'; '.join(closed.done)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    for run_dir, why in report.failed:
        err.print(f"{run_dir}: could not be closed: {why}", highlight=False, markup=False)
    for what in report.leftovers:
        console.print(f"removed {what}: its run is over", highlight=False, markup=False)
    for what in report.stopped:
        console.print(f"stopped {what}: its run is over", highlight=False, markup=False)
    for problem in report.leftover_problems:
        err.print(problem, highlight=False, markup=False, soft_wrap=True)
    if not quiet:
        for run_dir, why in report.left:
            console.print(f"{run_dir}: left alone ({why})", highlight=False, markup=False)
        if not (
            report.closed or report.failed or report.left or report.leftovers or report.stopped
        ):
            console.print("nothing to clean", highlight=False)


@app.command()
def clean(
    results: Annotated[Path, typer.Option(help="the results folder to look through")] = Path(
        "results"
    ),
) -> None:
    """Close runs whose `harness run` died (kill -9, OOM): mark them crashed, keep their samples.

    A tune whose `harness tune` died is marked crashed too, its runs closed likewise.

    Also converts what a failed run (a full disk) left as CSV to Parquet, and removes the
    containers of docker builds whose run is over (when a Docker Engine answers). Exit 3 if
    a run could not be closed or such a container not removed.
    """
    if os.path.exists(results) and not os.path.isdir(results):
        raise fail_input(InputError(f"--results {results}: not a folder"))
    report = _clean(results, leftovers=True)
    _print_clean(report)
    raise typer.Exit(EXIT_RUN if report.failed or report.leftover_problems else EXIT_OK)


@app.command()
def worker(
    master: Annotated[
        str, typer.Option(help="HOST:PORT of the Locust master `harness run` started")
    ] = "127.0.0.1:5557",
    once: Annotated[bool, typer.Option("--once", help="serve one build, then exit")] = False,
    allow_remote: Annotated[
        bool,
        typer.Option("--allow-remote", help="join a master, or send to a target, off loopback"),
    ] = False,
) -> None:
    """Run a Locust load worker for `harness run --workers N --external-workers`.

    The master hands it the plan and its share (every N-th request); it reports its
    samples back. It serves one build after another until Ctrl-C (or --once).
    """
    from harness.run.loadgen import WorkerSession, parse_master

    try:
        host, port = parse_master(master, allow_remote)
    except InputError as exc:
        raise fail_input(exc) from None
    served = 0
    session: WorkerSession | None = None
    stop_on_signals()
    try:
        while True:
            err.print(f"worker: joining the master at {host}:{port}", highlight=False)
            session = WorkerSession(host, port, allow_remote)
            code = session.wait()
            served += code == 0
            err.print(f"worker: build done (Locust exit code {code})", highlight=False)
            if once:
                raise typer.Exit(EXIT_OK if code == 0 else EXIT_RUN)
            time.sleep(1.0)  # the next build's master is about to start (or not: try again)
    except KeyboardInterrupt:
        if session is not None:
            session.stop()
        err.print(f"worker: interrupted after {served} build(s)", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
