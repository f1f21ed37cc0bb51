"""``harness simulate``: the scenario's builds through the discrete-event model, as a run
folder the report and the gates read like a real one (docs/simulate.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from harness.cli._app import (
    EXIT_OK,
    ScenarioArg,
    app,
    console,
    err,
    fail_input,
    fail_run,
    refuse_repeated_builds,
)
from harness.core.errors import HarnessError, InputError, RunError
from harness.scenario.bounds import MAX_SEED
from harness.scenario.loader import load_scenario


@app.command()
def simulate(
    scenario: ScenarioArg,
    results: Annotated[Path, typer.Option(help="where run folders are written")] = Path("results"),
    build: Annotated[
        list[str] | None,
        typer.Option("--build", "-b", help="simulate only these builds (repeatable)"),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            min=0, max=MAX_SEED - 1, help="another seed than the scenario's (0 to 2**63 - 1)"
        ),
    ] = None,
) -> None:
    """Simulate every build the model covers (our reference services: shop builds, and jar
    and command builds of the Spring shop and the Node gateway that say so with
    simulate-as) and write a run folder marked simulated, then its report. A build it does
    not model is refused, naming it (exit 2 when none is left). A screen, never the
    verdict: run the best candidates for real."""
    try:
        loaded = load_scenario(scenario, check_folders=False)
    except InputError as exc:
        raise fail_input(exc) from None
    refuse_repeated_builds(build)
    # Imported here: the model pulls in pandas, which `--help` does not need.
    from harness.cli.results import render_report
    from harness.simulate import modelled, simulate_run

    try:
        services, refused = modelled(loaded.scenario, build)
    except InputError as exc:
        raise fail_input(exc) from None
    if not services:
        raise fail_input(
            InputError(f"{scenario}: nothing to simulate: " + "; ".join(str(r) for r in refused))
        )
    for problem in refused:
        err.print(f"skipped: {escape(str(problem))}", highlight=False, soft_wrap=True)
    started = time.perf_counter()
    try:
        run_dir = simulate_run(
            loaded.scenario,
            results,
            [s.name for s in services],
            seed,
            scenario_text=loaded.text,
            scenario_file=str(scenario),
        )
    except InputError as exc:
        raise fail_input(exc) from None
    except RunError as exc:
        raise fail_run(exc) from None
    took = time.perf_counter() - started
    console.print(
        f"simulated {len(services)} build(s) in {took:.2f} s (a model, not a measurement)",
        highlight=False,
    )
    try:
        render_report(run_dir)
    except HarnessError as exc:
        err.print(f"no report: {exc}", highlight=False, markup=False)
        raise typer.Exit(3) from None
    raise typer.Exit(EXIT_OK)
