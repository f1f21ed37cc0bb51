"""``harness tune``: run a sweep's candidates as builds, rank them, recommend one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from harness.cli._app import (
    EXIT_GATE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUN,
    ResultsOpt,
    app,
    console,
    err,
    fail_input,
    fail_run,
    stop_on_signals,
)
from harness.core.errors import HarnessError, InputError, RunError

if TYPE_CHECKING:
    from harness.tune.folder import TuneFolder
    from harness.tune.plan import Plan
    from harness.tune.screen import Simulate


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


@app.command()
def tune(
    scenario: Annotated[
        Path | None, typer.Argument(help="a scenario with a `sweep:` section", show_default=False)
    ] = None,
    resume: Annotated[
        Path | None, typer.Option(help="a tune folder: run only its candidates not finished")
    ] = None,
    results: ResultsOpt = Path("results"),
    report: Annotated[
        Path | None, typer.Option(help="a tune folder: report what it holds, run nothing")
    ] = None,
    check: Annotated[
        str | None,
        typer.Option(help="exit 1 unless this candidate is feasible and on the front"),
    ] = None,
    plan_only: Annotated[
        bool, typer.Option("--plan", help="list the candidates (checked) and run nothing")
    ] = False,
    repeat: Annotated[
        int, typer.Option(min=1, max=10, help="run each candidate N times (intervals)")
    ] = 1,
    refine: Annotated[
        int,
        typer.Option(
            min=0,
            max=10,
            help="after the first pass, N more rounds for the recommended candidate and the "
            "neighbours within noise of it (sweep.refine; 0: as the sweep says)",
        ),
    ] = 0,
    screen: Annotated[
        bool,
        typer.Option(
            "--screen",
            help="simulate every candidate first; run only the best few (sweep.screen) for "
            "real (the default when there are more than 40 real runs)",
        ),
    ] = False,
) -> None:
    """Run a sweep's candidates under the same faults and load, rank them, recommend one.

    The ranked table, the Pareto front (front.png), per-axis sensitivity and the
    recommended config in the target's own language go to tune.json and tune.md in the
    tune folder; exit 1 when no candidate meets the constraints (or with --check, when
    that candidate is not feasible and on the front).
    """
    from harness.run.tunelock import TuneLock, died, holder, read_record
    from harness.tune.folder import TuneFolder
    from harness.tune.plan import MAX_REAL_RUNS, load_plan

    given = [x for x in (scenario, resume, report) if x is not None]
    if len(given) != 1:
        raise fail_input(InputError("give one of: a sweep file, --resume TUNE, --report TUNE"))
    try:
        simulate = _simulator()
        if scenario is not None:
            plan = load_plan(scenario, repeat, screened=True)
            screen = screen or len(plan.candidates) * repeat > MAX_REAL_RUNS
            if screen:  # --plan refuses what the screen would
                _check_screenable(plan)
            _check_name(plan, check)
            if plan_only:
                _print_plan(plan)
                raise typer.Exit(EXIT_OK)
            folder = TuneFolder.create(results, plan, repeat)
        else:
            folder = TuneFolder.open(resume or report)  # type: ignore[arg-type]
            plan = folder.plan()
            screen = folder.simulated.is_dir()
            _check_name(plan, check)
    except InputError as exc:
        raise fail_input(exc) from None
    except RunError as exc:  # the tune folder cannot be written (a full disk)
        raise fail_run(exc) from None
    lock = TuneLock.take(folder.path)
    if lock is None:  # another process runs (or resumes) this tune
        record = read_record(folder.path)
        if report is None:
            raise fail_input(
                InputError(
                    f"{folder.path}: this tune is being run by {holder(record)}; a second "
                    f"--resume would run its candidates again. Wait for it to end, or see "
                    f"where it is with `harness tune --report {folder.path}`"
                )
            )
        folder.read_only = True
        _say(
            f"tune {folder.path} is running ({holder(record)}): reported as it stands, "
            "nothing written (tune.json, tune.md and front.png are written when it ends)"
        )
        raise typer.Exit(_reported(folder, plan, check, write=False))
    code = EXIT_INTERRUPTED  # unless it ends
    try:
        if report is None:
            lock.hold()
            if resume is not None:  # its runs a killed tune left open, closed first
                from harness.cli.running import clean_quietly

                clean_quietly(folder.runs)
        else:
            stopped = died(lock.record())
            if stopped is not None:
                _say(
                    f"tune {folder.path} was interrupted: {stopped}. `harness tune --resume "
                    f"{folder.path}` runs what it did not finish."
                )
        code = _tune(folder, plan, check, report is None, screen, simulate, refine)
    except typer.Exit as exc:
        code = exc.exit_code
        raise
    finally:
        if report is None:
            lock.end("interrupted" if code == EXIT_INTERRUPTED else "ended")
        lock.close()
    raise typer.Exit(code)


def _tune(
    folder: TuneFolder,
    plan: Plan,
    check: str | None,
    run: bool,
    screen: bool,
    simulate: Simulate,
    refine: int,
) -> int:
    """Run what is missing (``run``), then report: the exit code."""
    from harness.results.io import WriteError

    code = EXIT_OK
    try:  # a damaged tune folder (a run's report, refine.json, failed.json): exit 2
        if run:
            chosen = None
            if screen:
                chosen = _screen(folder, plan, simulate)
            code = _run_missing(folder, plan, chosen)
            if code == EXIT_OK:
                code = _refine(folder, plan, refine)
    except InputError as exc:
        raise fail_input(exc) from None
    except WriteError as exc:  # refine.json on a full disk
        err.print(f"[red]run failed[/red]: {escape(str(exc))}", highlight=False)
        if exc.disk_full:
            _say_disk_full(folder)
        code = EXIT_RUN
    verdict = _reported(folder, plan, check)
    return code if code != EXIT_OK else verdict


def _reported(folder: TuneFolder, plan: Plan, check: str | None, write: bool = True) -> int:
    """The tune's report, printed (and written): the exit code of its verdict, or 3 when
    its files cannot be written (a full disk: printed all the same)."""
    from harness.results.io import WriteError

    try:
        result = _report(folder, plan, write)
    except InputError as exc:
        raise fail_input(exc) from None
    except WriteError as exc:
        err.print(f"tune report not written: {exc}", highlight=False, markup=False)
        return EXIT_RUN
    except HarnessError as exc:
        err.print(f"no tune report: {exc}", highlight=False, markup=False)
        raise typer.Exit(EXIT_RUN) from None
    return _verdict(result, check)


def _check_name(plan: Plan, check: str | None) -> None:
    """``--check NAME`` names a candidate (or an alias) of the sweep: else bad input, exit 2,
    before anything runs (exit 1 is a check that failed)."""
    if check is None:
        return
    try:
        plan.candidate(check)
    except KeyError:
        names = [n for c in plan.candidates for n in (c.name, *c.aliases)]
        raise InputError(
            f"--check {check}: no candidate of this sweep is named so; candidates: "
            + ", ".join(names)
        ) from None


def _print_plan(plan: Plan) -> None:
    _say(f"{len(plan.candidates)} candidates of build {plan.sweep.base!r} over {plan.axes}:")
    for c in plan.candidates:
        also = f" (= {', '.join(c.aliases)})" if c.aliases else ""
        _say(f"  {c.name:<30} {c.origin:<8} {c.values}{also}")
    if plan.sweep.refine is not None:
        r = plan.sweep.refine
        _say(
            f"then refined: {r.repeats} more round(s) for the recommended candidate and its "
            "neighbours within noise (by the judge on 5-s blocks; without blocks, "
            f"overlapping intervals, else within {r.tolerance:.0%}"
            + (", front neighbours too)" if r.front else ")")
        )


def _simulator() -> Simulate:
    """``harness simulate``'s model, as the screen calls it."""
    from harness.simulate import simulate_run

    return simulate_run


def _check_screenable(plan: Plan) -> None:
    """Refuse a screen the simulator cannot make before a tune folder is made for it: the
    scenario (client retries, pg.capacity, caps) or any candidate it does not model (a
    build of a kind or service it has no model of, traffic its model has no route for) is
    an ``InputError``, as ``harness simulate`` says it. A candidate left out of the screen
    would rank as never simulated and never run for real, unsaid."""
    from harness.simulate import modelled

    for batch in plan.batches():
        _, refused = modelled(plan.loaded(batch).scenario, [c.name for c in batch])
        if refused:
            raise InputError(
                "--screen: the simulator cannot stand for every candidate: "
                + "; ".join(str(r) for r in refused)
                + " (run the sweep without --screen, at most 40 real runs)"
            )


def _screen(folder: TuneFolder, plan: Plan, simulate: Simulate) -> list[str]:
    """Simulate every candidate (once per tune folder), and pick the ones run for real."""
    from harness.tune.screen import picks, simulate_all, simulated_reports

    reports = simulated_reports(folder)
    if not all(c.name in reports for c in plan.candidates):
        try:
            reports = simulate_all(folder, plan, simulate)
        except InputError as exc:
            raise fail_input(exc) from None
    chosen = picks(plan, reports)
    _say(
        f"screened: {len(plan.candidates)} candidates simulated; {len(chosen)} run for real "
        f"(the current setting, the best {plan.sweep.screen.best} simulated and "
        f"{plan.sweep.screen.others} others): {', '.join(chosen)}"
    )
    return chosen


def _run_missing(folder: TuneFolder, plan: Plan, chosen: list[str] | None = None) -> int:
    """Run every candidate (or every ``chosen`` one) not finished yet."""
    done = set(folder.finished())
    failed = folder.failures()
    todo = [
        c.name
        for c in plan.candidates
        if c.name not in done and c.name not in failed and (chosen is None or c.name in chosen)
    ]
    if done:
        _say(f"{len(done)} candidate(s) already finished; running the {len(todo)} missing")
    if failed:
        _say(
            f"not retried, they could not be run: {', '.join(failed)} (delete "
            f"{folder.failed_record} to try them again)"
        )
    return _run_names(folder, plan, todo)


def _refine(folder: TuneFolder, plan: Plan, repeats: int) -> int:
    """The refinement (``harness.tune.refine``): once the first pass is complete, pick the
    candidates within noise of the recommended one (once per tune folder: ``refine.json``),
    then run each its extra rounds not run yet, one run folder per round."""
    from harness.results.io import write_json_atomic
    from harness.scenario.sweep import Refine
    from harness.tune.refine import select
    from harness.tune.report import ranked_outcomes

    record = folder.refinement()
    settings = plan.sweep.refine
    if record is None:
        if repeats:
            settings = (settings or Refine()).model_copy(update={"repeats": repeats})
        if settings is None:
            return EXIT_OK
        ranked = ranked_outcomes(folder, plan)
        if any(o.measured == "missing" for o in ranked):
            return EXIT_OK  # not complete: refined once the first pass is (--resume)
        used = sum(len(r) for r in folder.rounds().values()) * folder.repeat
        sense = plan.sweep.objective.sense
        record = select(ranked, settings, folder.repeat, used, sense).record()
        write_json_atomic(folder.refine_record, record)
        _say(
            "refine: "
            + (", ".join(f"{p['name']} ({p['why']})" for p in record["picked"]) or "nothing")
            + (f"; {record['note']}" if record["note"] else "")
        )
    rounds = folder.rounds()
    for i in range(record["repeats"]):
        failed = folder.failures()
        picked = [p["name"] for p in record["picked"] if p["name"] not in failed]
        todo = [n for n in picked if len(rounds.get(n, [])) <= i + 1]
        if not todo:
            continue
        _say(f"refine: round {i + 2} of {record['repeats'] + 1}: {', '.join(todo)}")
        code = _run_names(folder, plan, todo)
        if code != EXIT_OK:
            return code
        rounds = folder.rounds()
    return EXIT_OK


def _run_names(folder: TuneFolder, plan: Plan, todo: list[str]) -> int:
    """Run the named candidates, in batches (one ``harness run`` folder each). A candidate
    that cannot be run (its build fails: its target does not start) is recorded failed
    (``TuneFolder.record_failure``) and the others go on, in a new run folder; a failure no
    candidate can be blamed for (nothing of the tune has run yet, or no build failed) stops
    the tune, exit 3, as ``harness run`` would."""
    from harness.cli.running import progress_listener
    from harness.gates.abort import GateAbort, abort_gates
    from harness.run.experiment import Experiment

    stop_on_signals()
    view, listener = progress_listener()
    todo = list(todo)
    while todo:
        batch = plan.batches(todo)[0]
        experiment: Experiment | None = None
        try:
            loaded = plan.loaded(batch, abort=True)  # constraints cut to a phase stop early
            stop = GateAbort(loaded.scenario) if abort_gates(loaded.scenario) else None
            experiment = Experiment(
                loaded, folder.runs, listener, repeat=folder.repeat, abort_check=stop
            )
            view.builds = experiment.manifest.builds  # says which gate stopped a build
            experiment.run()
            todo = [n for n in todo if n not in {c.name for c in batch}]
        except KeyboardInterrupt:
            view.stop_live()
            err.print(
                f"interrupted: every finished candidate is kept. Resume with "
                f"`harness tune --resume {folder.path}`.",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            return EXIT_INTERRUPTED
        except InputError as exc:
            raise fail_input(exc) from None
        except RunError as exc:
            view.stop_live()
            full = getattr(exc, "disk_full", False)  # the machine's, not the candidate's
            blamed = None if full else _blamed(folder, experiment)
            if blamed is None:
                err.print(f"[red]run failed[/red]: {escape(str(exc))}", highlight=False)
                if full:
                    _say_disk_full(folder)
                return EXIT_RUN
            name, error, ran = blamed
            try:
                folder.record_failure(name, error, experiment.run_dir if experiment else None)
            except RunError as unwritten:  # the disk filled meanwhile
                err.print(f"[red]run failed[/red]: {escape(str(exc))}", highlight=False)
                err.print(f"[red]not recorded[/red]: {escape(str(unwritten))}", highlight=False)
                return EXIT_RUN
            err.print(
                f"candidate {name} failed: {error}. Recorded infeasible (not retried by "
                f"--resume); going on with the next.",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
            todo = [n for n in todo if n != name and n not in ran]
        finally:
            view.stop_live()
    return EXIT_OK


def _say_disk_full(folder: TuneFolder) -> None:
    err.print(
        f"the disk is full: every finished candidate is kept. Free some space, then "
        f"`harness clean --results {folder.path.parent.parent}` and `harness tune --resume "
        f"{folder.path}`.",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def _blamed(folder: TuneFolder, experiment: Any) -> tuple[str, str, set[str]] | None:
    """(the candidate a failed run failed at, why, the candidates it ran), or None when no
    candidate is to blame: no build failed (the run could not begin), or nothing of this
    tune has run yet (the base runs first: when it cannot start either, the machine is
    more likely at fault than the settings, and ``--resume`` tries again)."""
    from harness.tune.rank import FINISHED

    if experiment is None:
        return None
    builds = list(experiment.manifest.builds.values())
    ran = {str(b["build"]) for b in builds if b.get("status") in FINISHED}
    failed = [b for b in builds if b.get("status") == "failed"]
    if not failed or not (ran or folder.finished()):
        return None
    return str(failed[-1]["build"]), str(failed[-1].get("error") or "it failed"), ran


def _report(folder: TuneFolder, plan: Plan, write: bool = True) -> dict[str, Any]:
    """Print the tune's result, then (``write``) write its files: ``WriteError`` when they
    cannot be (what was printed stands)."""
    from harness.tune.report import flat_text, lead_text, tune_result, write_tune_files

    result = tune_result(folder, plan)
    x, y = result["front_scores"]
    _say(f"objective: {result['objective']['sense']} {result['objective']['expr']}")
    for c in result["candidates"]:
        verdict = (
            "not run"
            if c["measured"] == "missing"
            else f"failed: {c['error']}"
            if c["measured"] == "failed"
            else ("feasible" if c["feasible"] else "infeasible")
        )
        mark = " (current)" if c["origin"] == "current" else ""
        mark += f" ({c['rounds']} rounds)" if c["rounds"] > 1 else ""
        _say(
            f"  {c['rank'] or '-':>3} {c['name'] + mark:<32} objective {_g(c['objective']):>8}"
            f"  {x} {_g(c['scores'][0]):>7}  {y} {_g(c['scores'][1]):>7}  {verdict}"
            + ("  front" if c["on_front"] else "")
        )
    if flat_text(result):
        _say(flat_text(result))
    if result["recommended"] is None:
        _say(
            "no candidate that ran meets every constraint: nothing recommended"
            if not any(c["feasible"] and c["measured"] == "measured" for c in result["candidates"])
            else "no feasible candidate is on the front (a front score was not measured): "
            "nothing recommended"
        )
    else:
        _say(
            f"recommended: {result['recommended']} (the best by the objective on the front of "
            "the feasible candidates)"
        )
        for p in result["passed_over"]:
            _say(f"  {p['name']} ranks before it by the objective: {p['why']}")
        if lead_text(result):
            _say(lead_text(result))
        _say(result["recommended_config"]["text"].rstrip())
    refined = result["refined"]
    if refined is not None:
        names = [f"{p['name']} ({p['why']})" for p in refined["picked"]]
        _say(
            f"refined ({refined['repeats']} more round(s) each): "
            + ("; ".join(names) or "none")
            + (f"; {refined['note']}" if refined["note"] else "")
        )
    for row in result["simulator_error"]:
        _say(
            f"  simulator vs measured, {row['name']}: "
            + "  ".join(
                f"{k} {_g(v['simulated'])} vs {_g(v['measured'])} (error {_g(v['error'])})"
                for k, v in row.items()
                if k != "name"
            )
        )
    if write:
        write_tune_files(folder, result)
        _say(f"tune: {folder.path}  (tune.json, tune.md, front.png)")
    return result


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _verdict(result: dict[str, Any], check: str | None) -> int:
    """Exit 1 when nothing is recommended, or ``check`` is not feasible on the front."""
    if check is None:
        return EXIT_OK if result["recommended"] is not None else EXIT_GATE
    found = next((c for c in result["candidates"] if check in (c["name"], *c["aliases"])), None)
    if found is None:  # refused before anything ran (_check_name)
        err.print(f"--check {check}: not a candidate of this sweep", highlight=False)
        return EXIT_INPUT
    ok, why = found["check"]["pass"], found["check"]["why"]  # the recommendation's own rule
    _say(f"check {check}: {'pass' if ok else 'fail'}: {why}")
    return EXIT_OK if ok else EXIT_GATE
