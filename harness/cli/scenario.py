"""Commands about scenario files: validate, schema, init."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from harness.cli._app import (
    ScenarioArg,
    app,
    console,
    err,
    fail_input,
    fail_run,
    write_output,
)
from harness.core.errors import InputError, RunError, ScenarioError
from harness.scenario.loader import load_scenario


@app.command()
def validate(scenario: ScenarioArg) -> None:
    """Check a scenario file and report every problem (file:line:column: field: message)."""
    try:
        loaded = load_scenario(scenario, check_folders=True)
    except InputError as exc:
        raise fail_input(exc) from None
    s = loaded.scenario
    console.print(
        f"{loaded.path}: ok — {len(s.traffic)} endpoint(s), {len(s.phases)} phase(s), "
        f"builds: {', '.join(s.builds)}; {s.warmup:g} s warmup + {s.duration:g} s per build",
        highlight=False,
        markup=False,  # a file name such as "a[/b].yaml" is not rich markup
    )


@app.command()
def schema(
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="write it to this file, not stdout")
    ] = None,
) -> None:
    """Print the scenario's JSON Schema (for editors: completion and errors while typing)."""
    from harness.scenario.starter import schema_text

    text = schema_text()
    if output is None:
        sys.stdout.write(text)
        return
    try:
        write_output(output, text)
    except RunError as exc:
        raise fail_run(exc) from None
    console.print(f"JSON Schema: {output}", highlight=False, markup=False)


def _relative_to(file: Path, folder: Path) -> str:
    """``file`` (as given, from here) as the scenario writes it: from its own folder, or
    absolute when the two share nothing but the root."""
    there, here = file.absolute(), folder.absolute()
    if os.path.commonpath([there, here]) == there.anchor:
        return str(there)
    return os.path.relpath(there, here)


class StarterStack(StrEnum):
    """The stacks ``harness init`` writes a starter for (their metric presets)."""

    spring_boot = "spring-boot"
    opossum = "opossum"
    shop = "shop"


@app.command()
def init(
    path: Annotated[
        Path, typer.Argument(help="the scenario file to write (and its schema beside it)")
    ] = Path("scenario.yaml"),
    preset: Annotated[
        StarterStack, typer.Option(help="your service's stack: health path and metric names")
    ] = StarterStack.spring_boot,
    command: Annotated[
        str | None, typer.Option(help="builds are this command, which the harness starts")
    ] = None,
    jar: Annotated[
        Path | None,
        typer.Option(help="builds are this Spring Boot jar, each with its own properties"),
    ] = None,
    image: Annotated[
        str | None, typer.Option(help="builds are this Docker image (a tag 'before' gets 'after')")
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="builds are services already running here (loopback)")
    ] = None,
    mappings: Annotated[
        list[Path] | None,
        typer.Option(
            help="play a dependency from this WireMock mappings folder instead of pg, the "
            "reference shop's gateway (repeat for each dependency; named after the folder)"
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing PATH")] = False,
) -> None:
    """Write a commented starter scenario for your service, valid by `harness validate`.

    Without --command, --jar, --image or --url: the stack's usual command (the
    reference shop's builds for --preset shop). With --mappings, each WireMock
    mappings folder is a dependency of its own (and the payment gateway is not
    played). The JSON Schema is written
    beside it (harness.schema.json); the file's first line points editors at it.
    """
    from harness.scenario.loader import load_scenario_text
    from harness.scenario.starter import (
        SCHEMA_FILE,
        mappings_name,
        schema_text,
        starter_name,
        starter_scenario,
    )
    from harness.stubs.wiremock import load_mappings

    try:
        if path.is_dir():
            raise InputError(f"{path} is a folder; give the scenario file's name")
        if path.name == SCHEMA_FILE:
            raise InputError(f"{SCHEMA_FILE} is the schema's name; give the scenario another")
        if (path.exists() or path.is_symlink()) and not force:
            raise InputError(f"{path} exists; --force overwrites it")
        if jar is not None and not jar.is_file():
            # validate would refuse the starter's builds at their jar: key (it checks the file)
            raise InputError(
                f"--jar {jar} is not a file (looked for {jar.absolute()}): build the jar "
                "first, or give the path of one; nothing written"
            )
        played: list[tuple[str, str]] = []
        for folder in mappings or []:
            load_mappings(folder)  # what WireMock's format outside the subset has: said now
            name = mappings_name(folder)
            if name in (n for n, _ in played):
                raise InputError(
                    f"--mappings {folder}: a second dependency named {name!r} (named after "
                    "its folder); give folders of different names"
                )
            played.append((name, _relative_to(folder, path.parent)))
        text = starter_scenario(
            preset.value,
            mappings=played,
            command=command,
            image=image,
            url=url,
            jar=None if jar is None else _relative_to(jar, path.parent),
            name=starter_name(path.stem),
            schema_ref=SCHEMA_FILE,
        )
        load_scenario_text(text, str(path))  # what an option put there (a remote url...)
    except InputError as exc:
        failed = fail_input(exc)
        if isinstance(exc, ScenarioError):
            err.print("nothing written: these options make an invalid scenario", highlight=False)
        raise failed from None
    schema_path = path.parent / SCHEMA_FILE
    try:
        write_output(path, text)
        write_output(schema_path, schema_text())
    except RunError as exc:
        raise fail_run(exc) from None
    console.print(
        f"wrote {path} and {schema_path}; edit the traffic and builds, then "
        f"`harness validate {path}` and `harness run {path}`",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
