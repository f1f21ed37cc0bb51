"""The judge's per-figure policies: one declared table (``POLICIES``), read by the judge
(``harness.analysis.judge``) and by the gate language, which refuses ``not worse than`` on a
figure the judge does not know before anything runs. Kayenta's vocabulary: the direction
that is bad, the change allowed, critical or not, what happens without data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Bad = Literal["increase", "decrease", "either"]


@dataclass(frozen=True)
class Policy:
    """How one kind of figure is judged (Kayenta's per-metric configuration)."""

    statistic: str
    """The block's statistic: ``p50``, ``p95``, ``p99``, ``max`` (latency), ``success``."""
    bad: Bad
    """The direction that is a regression (Kayenta's ``direction``)."""
    allowed_pct: float
    """The change, in % of the first side's median, allowed in the bad direction before a
    significant shift is ``worse`` (Kayenta's ``allowedIncrease``/``allowedDecrease``); a gate's
    ``by N%`` replaces it."""
    critical: bool
    """A worse verdict on it fails a comparison whole (Kayenta's ``critical``)."""
    without_data: Literal["error", "skip"]
    """What a gate on it does with ``not enough data``: an error (fails CI) or a skip."""
    scale: Literal["relative", "points"] = "relative"
    """``points``: the change is in the figure's own points (a success share in %), not in %
    of it."""


POLICIES: dict[str, Policy] = {
    "latency_s.p50": Policy("p50", "increase", 5.0, False, "error"),
    "latency_s.p95": Policy("p95", "increase", 5.0, False, "error"),
    "latency_s.p99": Policy("p99", "increase", 5.0, True, "error"),
    "latency_s.max": Policy("max", "increase", 10.0, False, "skip"),
    "success_pct": Policy("success", "decrease", 1.0, True, "error", "points"),
}
"""Every figure the judge knows, by its name after the endpoint (``products.<this>``);
the blocks written in ``report.json`` are these figures'."""


def policy_of(key: str) -> Policy | None:
    """The policy of a flattened figure name (``products.latency_s.p99[outage]``), if any."""
    name = key.split("[", 1)[0]
    for suffix, policy in POLICIES.items():
        if name.endswith("." + suffix):
            return policy
    return None
