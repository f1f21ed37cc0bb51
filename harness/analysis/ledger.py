"""Figures of the gateway's ledger: duplicate calls per payment, and reconciliation.

The ledger (``pg.parquet``) records every call the gateway received; product
reads (``CATALOGUE_PREFIX``) are left out of the payment figures.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.model import LedgerFigures

CATALOGUE_PREFIX = "/v1/catalogue/"
"""Ledger rows under this path are product reads, not payments (``harness.gateway``)."""


def payment_calls(ledger: pd.DataFrame) -> pd.DataFrame:
    """The ledger's approve calls: product reads left out (a ledger without ``path`` was
    written when the gateway served approve calls only)."""
    if "path" not in ledger.columns:
        return ledger
    return ledger[~ledger["path"].astype(str).str.startswith(CATALOGUE_PREFIX)]


def ledger_figures(ledger: pd.DataFrame, payments: pd.DataFrame) -> LedgerFigures | None:
    """Duplicate calls per payment and the reconciliation of gateway and target records.

    Covers the whole run (warmup and drain included): a payment approved at the
    gateway but recorded FAILED or TIMEOUT_UNKNOWN by the target is a consistency
    hole whenever it happens (seed 002). Approve calls only: product reads have
    no payment to reconcile (they count in ``pg.calls``).
    """
    ledger = payment_calls(ledger)
    if ledger.empty:
        return None
    per_key = ledger.groupby("key").size()
    approved = set(ledger.loc[ledger["decision"] == "approved", "key"])
    out: LedgerFigures = {
        "calls": len(ledger),
        "keys": len(per_key),
        "duplicate_keys": int((per_key > 1).sum()),
        "max_calls_per_key": int(per_key.max()),
        "client_gone": int(ledger["client_gone"].sum()),
        "approved_at_gateway": len(approved),
    }
    if not payments.empty:
        recorded = payments.set_index("idempotency_key")["status"]
        status_of_approved = recorded[recorded.index.isin(approved)]
        out["reconciliation"] = {
            "payments_recorded": len(recorded),
            "approved_both": int((status_of_approved == "APPROVED").sum()),
            "approved_but_failed": int((status_of_approved == "FAILED").sum()),
            "approved_but_unknown": int((status_of_approved == "TIMEOUT_UNKNOWN").sum()),
            "approved_but_pending": int((status_of_approved == "PENDING").sum()),
            "recorded_approved_not_at_gateway": int(
                ((recorded == "APPROVED") & ~recorded.index.isin(approved)).sum()
            ),
        }
    return out
