"""A gateway that heard no call while payments were sent: the zero that means a wrong URL."""

from __future__ import annotations

import pandas as pd

from harness.analysis.gateway_check import silent_gateway
from harness.load.plan import DROPPED


def _samples(*rows: tuple[str, str, float | None]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"endpoint": e, "error": err, "end": end} for e, err, end in rows],
        columns=["endpoint", "error", "end"],
    )


SENT = _samples(("payments", "", 1.0), ("payments", "HTTP 502", 2.0), ("products", "", 1.5))


def test_payments_sent_and_no_call_in_the_ledger_is_said() -> None:
    text = silent_gateway(SENT, 0, ["payments"], "http://127.0.0.1:4000")
    assert text is not None
    assert "no call while 2 requests to payments" in text
    assert "http://127.0.0.1:4000" in text


def test_one_call_in_the_ledger_is_enough() -> None:
    assert silent_gateway(SENT, 1, ["payments"], "") is None


def test_no_calling_endpoint_or_nothing_sent_says_nothing() -> None:
    assert silent_gateway(SENT, 0, [], "") is None  # a scenario of reads only
    only_reads = _samples(("products", "", 1.0))
    assert silent_gateway(only_reads, 0, ["payments"], "") is None
    dropped = _samples(("payments", DROPPED, None), ("payments", "", None))
    assert silent_gateway(dropped, 0, ["payments"], "") is None  # none was sent and ended
