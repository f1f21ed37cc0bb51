"""``python -m harness`` is the ``harness`` command."""

from harness.cli import app

app(prog_name="harness")
