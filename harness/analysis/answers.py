"""What each request's answer was, as every figure reads it: the samples' ``class`` column.

The load generator classes each answer where it reads it, by the endpoint's
``outcomes`` (``harness.scenario.outcomes``: status, headers, JSONPath on the body).
Every figure that counts answers reads the class through these masks, never a
header of its own:

- ``served``: answered 2xx/3xx and not a fallback or a degraded answer (success %,
  goodput, time to recover). A refusal answered 2xx/3xx (a placeholder the service
  serves when its breaker refuses) is served: the client got an answer; declare it
  ``fallback`` to count it out.
- ``kept``: served with a 2xx (service kept, seed 004), fresh or from a cache;
- ``cached``: a 2xx from a cache;
- ``stood_in``: refused, fallback or degraded: the resilience layer answered instead of
  the service's own path (blocked when healthy).

Samples written before the column (and frames built by hand) are read from their
``status`` and ``outcome`` (``outcomes.recorded_class``): what their figures meant then.
"""

from __future__ import annotations

import pandas as pd

from harness.load.plan import CLASS
from harness.scenario.outcomes import NOT_SERVED, STOOD_IN, recorded_class


def classes(samples: pd.DataFrame) -> pd.Series:
    """Each row's class: the column, or read from ``status`` and ``outcome`` without it."""
    if CLASS in samples.columns:
        return samples[CLASS].fillna("").astype(str)
    if samples.empty:
        return pd.Series("", index=samples.index, dtype=object)
    error = samples["error"] if "error" in samples.columns else pd.Series("", index=samples.index)
    outcome = (
        samples["outcome"] if "outcome" in samples.columns else pd.Series("", index=samples.index)
    )
    keys = pd.DataFrame(
        {"status": samples["status"], "outcome": outcome.fillna(""), "error": error.fillna("")}
    )
    unique = keys.drop_duplicates()
    found = {
        (int(s), str(o), str(e)): recorded_class(int(s), str(o), str(e))
        for s, o, e in unique.itertuples(index=False)
    }
    return pd.Series(
        [found[(int(s), str(o), str(e))] for s, o, e in keys.itertuples(index=False)],
        index=samples.index,
        dtype=object,
    )


def served(samples: pd.DataFrame) -> pd.Series:
    """Answered 2xx/3xx, and not a fallback or degraded answer."""
    return samples["status"].between(200, 399) & ~classes(samples).isin(NOT_SERVED)


def kept(samples: pd.DataFrame) -> pd.Series:
    """Served with a 2xx, fresh or from a cache."""
    return samples["status"].between(200, 299) & ~classes(samples).isin(NOT_SERVED)


def cached(samples: pd.DataFrame) -> pd.Series:
    """A 2xx from a cache."""
    return samples["status"].between(200, 299) & (classes(samples) == "cached")


def stood_in(samples: pd.DataFrame) -> pd.Series:
    """Refused, or answered by a fallback or degraded: not the service's own answer."""
    return classes(samples).isin(STOOD_IN)
