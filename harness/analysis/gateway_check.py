"""A build whose gateway heard nothing: the zero that is most likely a wrong URL.

A service pointed at another gateway (a stale ``PG_URL``, a hard-coded host) still
answers its payments, from a real gateway elsewhere, a stub or its fallback, and the
run "completes" with 0 calls in the gateway's ledger. That zero is a measurement, not
a missing figure, but it almost always means the experiment did not test what it
meant to: said at the end of the build (``harness run``) and in the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.load.plan import DROPPED


def silent_gateway(
    samples: pd.DataFrame, ledger_calls: int, gateway_endpoints: Sequence[str], pg_url: str
) -> str | None:
    """Why a build whose gateway endpoints were sent requests, of which the gateway's ledger
    recorded none, most likely tested something else; ``None`` when it heard a call."""
    if ledger_calls or not gateway_endpoints or not len(samples):
        return None
    sent = samples[samples["endpoint"].isin(list(gateway_endpoints))]
    sent = sent[(sent["error"] != DROPPED) & sent["end"].notna()]
    if not len(sent):
        return None
    names = ", ".join(gateway_endpoints)
    where = f" ({pg_url})" if pg_url else ""
    return (
        f"the gateway received no call while {len(sent)} requests to {names} (calls-gateway) "
        f"were sent: the service most likely calls another gateway than this run's{where}; "
        "check the URL the build is given (the {pg_url} placeholder, or the shop's pg-url)"
    )


def silent_gateway_in(
    build_dir: Path, ledger_calls: int, gateway_endpoints: Sequence[str], pg_url: str
) -> str | None:
    """``silent_gateway`` of a build folder's ``samples.parquet`` (the end of a build)."""
    path = build_dir / "samples.parquet"
    if ledger_calls or not gateway_endpoints or not path.exists():
        return None
    samples = pd.read_parquet(path, columns=["endpoint", "error", "end"])
    return silent_gateway(samples, ledger_calls, gateway_endpoints, pg_url)
