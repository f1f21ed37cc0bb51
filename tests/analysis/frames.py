"""Synthetic frames for the analysis tests: samples as the load generator writes them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.core.catalogue import SERIES_BY_NAME
from harness.results.io import LEDGER_DTYPES, SAMPLE_DTYPES


def sample_frame(
    name: str, start: np.ndarray, latency: np.ndarray, status: np.ndarray
) -> pd.DataFrame:
    """Requests of endpoint ``name`` intended (and sent) at ``start``, answered ``latency``
    later with ``status``."""
    n = len(start)
    return pd.DataFrame(
        {
            "endpoint": [name] * n,
            "index": np.arange(n),
            "intended_start": start,
            "actual_start": start,
            "end": start + latency,
            "status": status,
            "error": [""] * n,
            "outcome": [""] * n,
        }
    ).astype(SAMPLE_DTYPES)


def required(missing: dict[str, str]) -> dict[str, str]:
    """The canonical series not measured, less the optional ones (a DB pool's) that a
    service without one never exposes: what a test of the core series compares."""
    return {k: v for k, v in missing.items() if not SERIES_BY_NAME[k].optional}


def dependency_ledger(arrival: np.ndarray, status: np.ndarray, path: str) -> pd.DataFrame:
    """A named dependency's ledger (``dep-NAME.parquet``): a call arrived at each ``arrival``
    (epoch s), answered ``status`` (0: no answer) after 5 ms, on route 0 of ``path``."""
    n = len(arrival)
    return pd.DataFrame(
        {
            "arrival": arrival,
            "key": [""] * n,
            "attempt": [1] * n,
            "phase": [""] * n,
            "fault": ["healthy"] * n,
            "status": status,
            "decision": [""] * n,
            "duration_s": [0.005] * n,
            "client_gone": [False] * n,
            "path": [path] * n,
            "method": ["GET"] * n,
            "route": ["0"] * n,
            "queue_s": [0.0] * n,
            "service_s": [0.005] * n,
            "abandoned": [False] * n,
            "rejected": [False] * n,
        }
    ).astype(LEDGER_DTYPES)
