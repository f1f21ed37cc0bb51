"""Attempts and requests: ``samples.parquet`` holds one row per attempt; figures read requests.

A client that retries (``traffic.<ep>.retry``) sends a request as one or more
attempts, each its own row with its own ``index``, linked to the request by
``request`` (the index of its first attempt) and numbered by ``attempt`` (1
for the first). A request's figures run from its first attempt's intended
start to its final attempt's end, with the final attempt's outcome
(``requests_of``). A retry that was due while the endpoint's ``max-in-flight``
was full is a ``Dropped`` row: never sent, so not the request's final attempt.

Samples written before the columns existed read as ``attempt = 1`` and
``request = index`` (``with_attempts``): every request sent once.
"""

from __future__ import annotations

import pandas as pd

from harness.load.plan import DROPPED

ATTEMPT_DTYPES = {"attempt": "int64", "request": "int64"}
"""The columns a run written before client retries lacks (``with_attempts`` adds them)."""
ATTEMPTS = "attempts"
"""A column of ``requests_of``'s frame when some request was retried: the attempts it sent."""
_FINAL = ("end", "status", "error", "outcome", "class")
"""What a request takes from its final attempt (``class`` when the samples have it); the
rest is its first attempt's."""


def with_attempts(samples: pd.DataFrame) -> pd.DataFrame:
    """``samples`` with ``attempt`` and ``request``: as written, or 1 and ``index`` for
    samples of a run written before the columns (every request sent once)."""
    if "index" not in samples.columns or {"attempt", "request"} <= set(samples.columns):
        return samples  # written by hand (a test's few columns), or with the columns
    frame = samples.copy()
    if "attempt" not in frame.columns:
        frame["attempt"] = pd.Series(1, index=frame.index, dtype="int64")
    if "request" not in frame.columns:
        frame["request"] = frame["index"].astype("int64")
    return frame


def retried(samples: pd.DataFrame) -> bool:
    """Whether any row is a retry (an attempt after a request's first)."""
    return "attempt" in samples.columns and bool(len(samples)) and int(samples["attempt"].max()) > 1


def requests_of(samples: pd.DataFrame) -> pd.DataFrame:
    """One row per request: the first attempt's row with the final sent attempt's ``end``,
    ``status``, ``error`` and ``outcome``, and (when some request was retried) ``attempts``.

    Without retries it is ``samples`` itself, so figures of a run that never retried are
    read from the very rows they always were.
    """
    if not retried(samples):
        return samples
    never_sent = (samples["error"] == DROPPED) & (samples["attempt"] > 1)
    sent = samples[~never_sent].sort_values(["endpoint", "request", "attempt"], kind="stable")
    groups = sent.groupby(["endpoint", "request"], sort=False)
    first, final = groups.head(1), groups.tail(1)
    out = first.copy()
    for col in (c for c in _FINAL if c in samples.columns):
        out[col] = pd.Series(final[col].to_numpy(), index=out.index, dtype=samples[col].dtype)
    out[ATTEMPTS] = groups.size().to_numpy().astype("int64")
    return out.sort_values("intended_start", kind="stable", ignore_index=True)
