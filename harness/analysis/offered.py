"""Offered, admitted and retried load per second: what clients that retry add to the load.

Read from the attempts (``samples.parquet``, one row per attempt), second by
second over the measured window: ``offered`` the first attempts intended in
that second (the load the scenario asks for, dropped arrivals included),
``admitted`` the attempts sent in it (first attempts and retries, by their
actual start), ``retried`` the retries among them (``attempt >= 2``). In a
metastable failure admitted stays above offered after the trigger is gone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.analysis.endpoints import EPS_S
from harness.analysis.model import LoadPerSecond
from harness.load.plan import DROPPED


def _per_s(times: pd.Series, t0: float, seconds: int) -> list[int]:
    """How many of ``times`` fall in each second [t0 + k, t0 + k + 1), k < ``seconds``."""
    # Times are stored to the microsecond: the tolerance keeps the window's first one in.
    bins = np.floor(times.to_numpy(dtype=float) - t0 + EPS_S)
    bins = bins[(bins >= 0) & (bins < seconds)].astype(int)
    return [int(n) for n in np.bincount(bins, minlength=seconds)]


def load_per_s(attempts: pd.DataFrame, t0: float, duration_s: float) -> LoadPerSecond:
    """Per second of the measured window: first attempts offered, attempts sent, retries sent."""
    seconds = max(1, int(np.ceil(duration_s - 1e-9)))
    sent = attempts[attempts["error"] != DROPPED]
    retry = sent["attempt"] > 1
    return {
        "offered": _per_s(attempts.loc[attempts["attempt"] == 1, "intended_start"], t0, seconds),
        "admitted": _per_s(sent["actual_start"], t0, seconds),
        "retried": _per_s(sent.loc[retry, "actual_start"], t0, seconds),
    }
