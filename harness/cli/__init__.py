"""The ``harness`` command: parses arguments, delegates to the library, picks exit codes.

One module per command group (``scenario``, ``running``, ``simulating``, ``results``,
``servers``), all
on the one Typer ``app`` of ``_app``. Nothing but the entry points imports this package.
"""

from harness.cli._app import EXIT_GATE, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN, app

# Imported in the order `harness --help` lists the commands.
# isort: off
from harness.cli import scenario
from harness.cli import running
from harness.cli import simulating
from harness.cli import tuning
from harness.cli import results
from harness.cli import servers

# isort: on

__all__ = [
    "EXIT_GATE",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_RUN",
    "app",
    "main",
    "results",
    "running",
    "scenario",
    "servers",
    "simulating",
    "tuning",
]


def main() -> None:  # pragma: no cover - console entry point alias
    app()
