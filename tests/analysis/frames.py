"""Synthetic frames for the analysis tests: samples as the load generator writes them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.core.catalogue import SERIES_BY_NAME
from harness.results.io import SAMPLE_DTYPES


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
