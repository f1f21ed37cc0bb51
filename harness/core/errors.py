"""The harness's exceptions, one tree so the CLI can map each branch to an exit code.

::

    HarnessError
     ├── InputError             bad scenario or arguments            -> exit 2
     │    ├── ScenarioError     every problem of one input file, each with file, line, field
     │    ├── AddressError      an address malformed or off loopback (harness.core.net)
     │    └── ProxyConfigError  an address or toxic the proxy refuses (harness.scenario.toxics)
     └── RunError               the run itself failed                -> exit 3
          ├── ProcessDied       a process the run started exited early
          └── WriteError        a results file cannot be written, "disk full: ..." when
                                that is why (harness.results.io)

The library raises these and never exits; only ``harness.cli`` picks exit codes.
Two ``ValueError`` subclasses stay outside the tree because they never reach
the CLI as such: ``GateSyntaxError`` (``harness.scenario.gates``) becomes a
located ``Problem`` or an ``InputError``, and the gateway's ``OverrideError``
becomes an HTTP 400.
"""

from __future__ import annotations

from dataclasses import dataclass


class HarnessError(Exception):
    """Base of every error the harness raises on purpose."""


class InputError(HarnessError):
    """The user gave something we cannot use (a file, an argument)."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in an input file, located as precisely as we can."""

    file: str
    line: int | None
    column: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class ScenarioError(InputError):
    """A scenario file failed to load; ``problems`` lists all of them, not just the first."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class RunError(HarnessError):
    """The experiment could not be carried out (a port, a process, a crash)."""


class ProcessDied(RunError):
    """A process the run started (PG, target, load generator) exited before it should have."""
