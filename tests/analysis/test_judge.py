"""The judge on synthetic blocks: a known shift is worse, the same distribution within noise,
too few blocks not enough data; and the blocks a build's requests give."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis.judge import (
    MIN_BLOCKS,
    POLICIES,
    block_values,
    flat_blocks,
    flat_key,
    judge,
    policy_of,
)

P99 = POLICIES["latency_s.p99"]
SUCCESS = POLICIES["success_pct"]


def _lognormal(seed: int, n: int, scale: float = 1.0) -> list[float | None]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in scale * np.exp(rng.normal(np.log(0.02), 0.2, n))]


def test_a_known_shift_is_worse_and_the_other_way_better() -> None:
    base, slow = _lognormal(1, 24), _lognormal(2, 24, scale=1.4)
    found = judge(base, slow, P99)
    assert found.verdict == "worse"
    assert found.change is not None and 20 < found.change < 60
    assert found.interval is not None and found.interval[0] > 0
    assert found.p_value is not None and found.p_value < 0.01
    assert judge(slow, base, P99).verdict == "better"


def test_the_same_distribution_is_within_noise() -> None:
    verdicts = [judge(_lognormal(s, 12), _lognormal(s + 100, 12), P99).verdict for s in range(30)]
    assert verdicts.count("within noise") >= 29


def test_a_significant_shift_smaller_than_the_allowed_change_is_within_noise() -> None:
    base = _lognormal(1, 40)
    found = judge(base, [v * 1.2 for v in base if v is not None], P99, allowed_pct=50)
    assert found.verdict == "within noise" and "within the 50% allowed" in found.why


def test_too_few_blocks_is_not_enough_data() -> None:
    found = judge([0.02], _lognormal(1, 12), P99)
    assert found.verdict == "not enough data"
    assert f"at least {MIN_BLOCKS} blocks" in found.why and "it has 1 and 12" in found.why
    assert judge([None] * 10, _lognormal(1, 12), P99).verdict == "not enough data"


def test_a_success_share_is_judged_in_points_and_falling_is_worse() -> None:
    ok = [100.0, 99.0, 100.0, 98.0, 100.0, 99.0, 100.0, 100.0]
    bad = [80.0, 75.0, 82.0, 79.0, 81.0, 78.0, 80.0, 77.0]
    found = judge(ok, bad, SUCCESS)
    assert found.verdict == "worse" and found.change is not None and found.change < -15
    assert judge(ok, ok, SUCCESS).verdict == "within noise"


def test_policies_are_found_by_flattened_name() -> None:
    assert policy_of("products.latency_s.p99[outage]") is P99
    assert policy_of("products.success_pct") is SUCCESS
    assert policy_of("workers.busy_p50_fault") is None
    assert flat_key(("products", "p99"), "outage", {"products": {}}) == (
        "products.latency_s.p99[outage]"
    )
    assert flat_key(("busy_workers", "p50"), None, {"products": {}}) is None


def test_blocks_of_requests() -> None:
    intended = np.arange(0.0, 30.0, 0.1)  # 10 requests a second for 30 s: 6 blocks of 5 s
    latency = np.where(intended < 10, 0.01, 0.05)
    frame = pd.DataFrame({"intended_start": intended, "end": intended + latency})
    served = pd.Series(intended < 20)
    values = block_values(frame, served, 0.0, 30.0)
    assert values["p99"] == pytest.approx([0.01, 0.01, 0.05, 0.05, 0.05, 0.05])
    assert values["success"] == [100.0, 100.0, 100.0, 100.0, 0.0, 0.0]
    few = block_values(frame.iloc[::20], served.iloc[::20], 0.0, 30.0)  # 2-3 a block
    assert few["p99"] == [None] * 6
    flat = flat_blocks({"products": (frame, served)}, {"": (0.0, 30.0), "[a]": (0.0, 10.0)})
    assert len(flat["products.latency_s.p99"]) == 6 and len(flat["products.success_pct[a]"]) == 2
