"""The judge: is a figure of one build better, worse or within noise of another's?

Requests inside one run are not independent (a queue, a breaker, a slow second carry over
to the next request), so the judge never compares requests. It compares *blocks*: each
``BLOCK_S`` seconds of a window gives one value of the figure's statistic (the block's
p99, its success share...), written in ``report.json`` under ``blocks`` by the flattened
figure name (``products.latency_s.p99[outage]``); ``--repeat`` pools every repetition's
blocks. Two builds' blocks are compared with a two-sided Mann-Whitney U test
(``scipy.stats.mannwhitneyu``), and the effect is the Hodges-Lehmann shift (the median of
every pairwise difference), relative to the first side's median, with a bootstrap 95 %
interval.

The verdict, as Netflix's Kayenta classifies a canary's metric:

- ``not enough data``: fewer than ``MIN_BLOCKS`` blocks on a side;
- ``worse``: the test rejects "same distribution" at ``ALPHA`` *and* the shift goes the
  figure's bad way by more than the change it allows;
- ``better``: the same, the other way;
- ``within noise``: anything else.

What each figure allows is one declared table, ``POLICIES`` (the bad direction, the
allowed change, critical or not, what a gate does without data). The false-alarm rate
(A/A) and the power (A/B) of this rule are measured by ``benchmarks/judge_power.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from harness.core.catalogue import gated
from harness.core.judge_policy import POLICIES as POLICIES
from harness.core.judge_policy import Policy as Policy
from harness.core.judge_policy import policy_of as policy_of

Verdict = Literal["better", "worse", "within noise", "not enough data"]
VERDICTS: tuple[Verdict, ...] = ("better", "worse", "within noise", "not enough data")

ALPHA = 0.01
"""The test's level (two-sided): at most 1 % of A/A comparisons may reject by chance, and
a rejection still needs the allowed change exceeded to count as worse."""
MIN_BLOCKS = 5
"""Blocks a side needs: with 5 against 5 the smallest two-sided p-value is 2/252 < ALPHA;
with fewer, no difference could ever be told from noise."""
BLOCK_S = 5.0
"""The length of a block: a window of 60 s gives 12."""
MIN_BLOCK_REQUESTS = 5
"""A block with fewer requests has no value (its p99 would be one request's latency)."""
BOOTSTRAP_ROUNDS = 1000


@dataclass(frozen=True)
class Judgement:
    """A verdict with what it rests on."""

    verdict: Verdict
    why: str
    p_value: float | None = None
    shift: float | None = None
    """The Hodges-Lehmann shift (second side minus first), in the figure's unit."""
    change: float | None = None
    """The shift in % of the first side's median (``points`` scale: the shift itself)."""
    interval: tuple[float, float] | None = None
    """The bootstrap 95 % interval of ``change``."""
    blocks: tuple[int, int] = (0, 0)

    def short(self) -> str:
        """The verdict with its effect, for a table cell: ``worse (+24%, p=0.002)``."""
        if self.change is None or self.p_value is None:
            return self.verdict
        return f"{self.verdict} ({self.change:+.0f}%, p={self.p_value:.2g})"


def judge(
    first: Sequence[float | None],
    second: Sequence[float | None],
    policy: Policy,
    allowed_pct: float | None = None,
    seed: int = 0,
) -> Judgement:
    """``second`` against ``first`` (each a figure's blocks, or its repetitions' values).

    ``allowed_pct`` replaces the policy's allowed change (a gate's ``by 10%``). None values
    (blocks without enough requests) are dropped.
    """
    a = np.array([v for v in first if v is not None and math.isfinite(v)], dtype=float)
    b = np.array([v for v in second if v is not None and math.isfinite(v)], dtype=float)
    counts = (len(a), len(b))
    if min(counts) < MIN_BLOCKS:
        return Judgement(
            "not enough data",
            f"the judge needs at least {MIN_BLOCKS} blocks of {BLOCK_S:g} s (or repetitions) "
            f"on each side, it has {counts[0]} and {counts[1]}",
            blocks=counts,
        )
    from scipy.stats import mannwhitneyu

    if np.ptp(np.concatenate([a, b])) == 0:
        p = 1.0  # every block equal on both sides: nothing to tell apart
    else:
        p = float(mannwhitneyu(b, a, alternative="two-sided").pvalue)
    shift = _hodges_lehmann(a, b)
    base = float(np.median(a))
    relative = policy.scale == "relative"
    if relative and base == 0:
        change = 0.0 if shift == 0 else math.copysign(math.inf, shift)
    else:
        change = 100.0 * shift / base if relative else shift
    interval = _bootstrap(a, b, relative, seed)
    allowed = policy.allowed_pct if allowed_pct is None else allowed_pct
    unit = "%" if relative else " points"
    common = dict(p_value=p, shift=shift, change=change, interval=interval, blocks=counts)
    told = f"Mann-Whitney p={p:.2g} over {counts[0]} and {counts[1]} blocks"
    moved = f"shift {change:+.1f}{unit} [{interval[0]:+.1f}, {interval[1]:+.1f}]"
    if p < ALPHA:
        up, down = change > allowed, change < -allowed
        worse = up if policy.bad == "increase" else down if policy.bad == "decrease" else up or down
        better = (down if policy.bad == "increase" else up) if policy.bad != "either" else False
        if worse:
            return Judgement("worse", f"{moved}, beyond {allowed:g}{unit} ({told})", **common)  # type: ignore[arg-type]
        if better:
            return Judgement("better", f"{moved} ({told})", **common)  # type: ignore[arg-type]
        why = f"{moved}: significant ({told}) but within the {allowed:g}{unit} allowed"
        return Judgement("within noise", why, **common)  # type: ignore[arg-type]
    return Judgement("within noise", f"{moved} ({told})", **common)  # type: ignore[arg-type]


def _hodges_lehmann(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.median(b[None, :] - a[:, None]))


def _bootstrap(a: np.ndarray, b: np.ndarray, relative: bool, seed: int) -> tuple[float, float]:
    """A 95 % percentile-bootstrap interval of the Hodges-Lehmann change (each side
    resampled on its own), in % of the first side's median or in points."""
    rng = np.random.default_rng(seed)
    ra = a[rng.integers(0, len(a), size=(BOOTSTRAP_ROUNDS, len(a)))]
    rb = b[rng.integers(0, len(b), size=(BOOTSTRAP_ROUNDS, len(b)))]
    shifts = np.median(rb[:, None, :] - ra[:, :, None], axis=(1, 2))
    if relative:
        base = np.median(ra, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            shifts = np.where(base != 0, 100.0 * shifts / base, 0.0)
    low, high = np.quantile(shifts, [0.025, 0.975])
    return float(low), float(high)


# ---------------------------------------------------------------- blocks


def blocks_in(seconds: float) -> int:
    """The blocks a window of ``seconds`` gives (a last one shorter than half is left out)."""
    return int(seconds // BLOCK_S + (seconds % BLOCK_S >= BLOCK_S / 2))


def block_values(
    requests: pd.DataFrame, served: pd.Series, start: float, end: float
) -> dict[str, list[float | None]]:
    """Each ``POLICIES`` statistic per ``BLOCK_S`` block of requests intended in
    [start, end) (a last block shorter than half a block is left out): latency is end minus
    intended start, as every figure's; ``served`` says which requests were served."""
    out: dict[str, list[float | None]] = {p.statistic: [] for p in POLICIES.values()}
    count = blocks_in(end - start)
    if count <= 0 or requests.empty:
        return out
    intended = requests["intended_start"].to_numpy(dtype=float)
    index = np.floor((intended - start) / BLOCK_S).astype(int)
    inside = (intended >= start) & (intended < end) & (index < count)
    latency = (requests["end"] - requests["intended_start"]).to_numpy(dtype=float)
    ok = served.to_numpy(dtype=bool)
    for i in range(count):
        mask = inside & (index == i)
        n = int(mask.sum())
        if n < MIN_BLOCK_REQUESTS:
            for values in out.values():
                values.append(None)
            continue
        done = latency[mask]
        done = done[np.isfinite(done)]
        for stat, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)):
            out[stat].append(round(float(np.quantile(done, q)), 6) if len(done) else None)
        out["success"].append(round(100.0 * float(ok[mask].mean()), 4))
    return out


def flat_blocks(
    by_endpoint: Mapping[str, tuple[pd.DataFrame, pd.Series]],
    windows: Mapping[str, tuple[float, float]],
) -> dict[str, list[float | None]]:
    """Every endpoint's blocks for every window, by flattened figure name:
    ``products.latency_s.p99`` (``windows[""]``: the measured window),
    ``products.success_pct[outage]``."""
    out: dict[str, list[float | None]] = {}
    for ep, (requests, served) in by_endpoint.items():
        for suffix, (start, end) in windows.items():
            values = block_values(requests, served, start, end)
            for name, policy in POLICIES.items():
                out[f"{ep}.{name}{suffix}"] = values[policy.statistic]
    return out


def flat_key(path: Sequence[str], phase: str | None, endpoints: Mapping[str, object]) -> str | None:
    """A gate's figure (``products.p99``, phase) as a flattened name
    (``products.latency_s.p99[outage]``); None when it is no endpoint's figure."""
    found = gated(".".join(path), endpoints)
    if found is None or found[1] is None:
        return None
    figure, endpoint = found
    within = ".latency_s." if ".latency_s." in figure.key else "."
    key = f"{endpoint}{within}{figure.stat}"
    return key + (f"[{phase}]" if phase else "")


def blocks_of(build: Mapping[str, object], key: str) -> list[float | None] | None:
    """A build section's blocks of a figure (None: the report has none for it)."""
    blocks = build.get("blocks")
    if not isinstance(blocks, Mapping):
        return None
    values = blocks.get(key)
    return list(values) if isinstance(values, list) else None


NO_BLOCKS = (
    "the report has no blocks for it (a report made before the judge: "
    "re-render it with harness report)"
)
