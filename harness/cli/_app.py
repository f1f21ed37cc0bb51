"""The Typer app, its consoles and exit codes: what every command module shares.

Exit codes: 0 success · 1 a gate failed · 2 bad input · 3 the run failed ·
130 interrupted. Only the ``harness.cli`` package prints or exits.
"""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from harness.core.errors import InputError, RunError, ScenarioError

EXIT_OK, EXIT_GATE, EXIT_INPUT, EXIT_RUN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

app = typer.Typer(
    help="Load-test and chaos-experiment harness for resilience patterns.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _Quiet(Console):
    """Rich's console, except that a reader gone away (``harness run ... | head -2``) stops
    the printing, not the command: rich's own answer is ``SystemExit(1)``, which killed a run
    mid-build with the gate-failed code. What is left to print goes to /dev/null; the run
    goes on, writes its report and exits by its gates."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            # Also what Python flushes at exit: no "Exception ignored ... BrokenPipeError".
            os.dup2(devnull, self.file.fileno())
        except (OSError, ValueError):  # not a real file: being quiet is enough
            pass
        finally:
            os.close(devnull)


class _Console(_Quiet):
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
err = _Quiet(stderr=True)


def printable_streams() -> None:
    """Never crash on a character stdout or stderr cannot encode: write ``?`` instead.

    An ASCII stdout (``PYTHONIOENCODING=ascii``, a CI runner's locale) or a latin-1 pipe
    cannot take the "—" of ``validate`` or the names a scenario may hold; every command
    prints through these two streams (rich's consoles write to them as they are then).
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="replace")


@app.callback()
def _every_command() -> None:
    printable_streams()


ScenarioArg = Annotated[Path, typer.Argument(help="scenario YAML file", show_default=False)]


RunDirArg = Annotated[Path, typer.Argument(help="a run folder under results/", show_default=False)]
ResultsOpt = Annotated[Path, typer.Option(help="where run folders are written")]
"""``--results DIR`` of the commands that write run folders (default ``results``)."""


def fail_input(exc: InputError) -> typer.Exit:
    if isinstance(exc, ScenarioError):
        for problem in exc.problems:
            err.print(f"[red]error[/red] {escape(str(problem))}", highlight=False, soft_wrap=True)
        err.print(f"{len(exc.problems)} problem(s) found.", highlight=False)
    else:
        err.print(f"[red]error[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_INPUT)


def refuse_repeated_builds(build: list[str] | None) -> None:
    """``--build X --build X`` is bad input for every command that takes builds: said once,
    up front, before a folder is made (a run would make X's folder twice)."""
    given = build or []
    repeated = sorted({b for b in given if given.count(b) > 1})
    if repeated:
        raise fail_input(
            InputError(
                f"build {repeated[0]!r} is given twice with --build; give each build once"
                if len(repeated) == 1
                else f"builds {repeated} are given more than once with --build; give each once"
            )
        )


def fail_run(exc: RunError) -> typer.Exit:
    err.print(f"[red]error[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
    return typer.Exit(EXIT_RUN)


def write_output(path: Path, text: str) -> None:
    """A file asked for on the command line (--junit, --markdown), through the results writer:
    a failure is a ``WriteError`` saying which file and why, and no temporary file stays."""
    from harness.results.io import write_error, write_text_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(path.parent, exc) from exc
    write_text_atomic(path, text)


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` in a long command (run, tune, worker).

    Python leaves SIGINT ignored when it starts with it ignored, as every process started in
    the background of a script (``harness worker &``) or under ``nohup`` does: such a run or
    worker then never saw its Ctrl-C (a worker kept re-joining for half an hour). A command
    that holds processes must stop when asked, however it was started.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, raise_interrupt)
