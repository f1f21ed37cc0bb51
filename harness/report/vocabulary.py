"""The reference shop's words: the one table of them the report may use.

Every other label of the report comes from the scenario's own names: its endpoints,
its dependencies, its builds (issue 30, item 2). These words belong to the payment
gateway ``pg`` (today's ``pg:`` block) and the reference shop's payment records, and
are shown only where the run played ``pg`` (``analysis.model.plays_pg``,
``Scenario.has_pg``): its ledger's table, its replicas' records, its chart.
``tests/report/test_vocabulary.py`` holds every other module of the analysis, the
report, the CLI and the live lines to that.
"""

from __future__ import annotations

PG = "payment gateway (pg)"
"""The dependency ``pg`` in words."""

PG_CALLS_TITLE = "calls that reached the payment gateway (pg)"
"""The pg chart's title, after the offered load and the breaker's refusals."""

PG_LEDGER_TITLE = "## Gateway ledger (whole run: warmup and drain included; approve calls only)"
PG_LEDGER_HEADER = [
    "build",
    "gateway calls",
    "payment keys",
    "keys called twice+",
    "max calls/key",
    "approved at gateway",
    "… recorded FAILED",
    "… recorded TIMEOUT_UNKNOWN",
]
"""The columns of pg's ledger table: duplicate calls per payment, and the reconciliation of
what pg approved with what the shop recorded (seed 002)."""

PAYMENTS_RECORDED = "payments recorded"
"""A replica's payment records in the shop's own database (``payments_recorded``)."""
