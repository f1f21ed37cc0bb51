"""Per-key attempt counts are bounded: the least recently used key is forgotten first."""

from __future__ import annotations

import pytest

from harness.gateway.server import MAX_KEYS, AttemptCounts, Gateway


def test_attempts_count_per_key_and_forget_the_least_recently_used() -> None:
    counts = AttemptCounts(max_keys=3)
    assert [counts.next(k) for k in ("a", "b", "a", "c")] == [1, 1, 2, 1]
    assert len(counts) == 3 and counts.forgotten == 0
    assert counts.next("d") == 1  # over the bound: "b" is the least recently used
    assert (len(counts), counts.forgotten) == (3, 1)
    assert (counts["a"], counts["b"], counts["c"], counts["d"]) == (2, 0, 1, 1)
    assert counts.next("a") == 3  # a retried key is kept
    assert counts.next("b") == 1  # a forgotten one counts from 1 again
    counts.clear()
    assert len(counts) == 0 and counts.next("a") == 1
    with pytest.raises(ValueError, match="at least 1"):
        AttemptCounts(max_keys=0)


def test_the_gateway_state_stays_bounded_however_many_keys_it_sees() -> None:
    gateway = Gateway([], seed=1, max_keys=100)
    for i in range(10_000):
        gateway.attempts.next(f"key-{i}")
    assert len(gateway.attempts) == 100 and gateway.attempts.forgotten == 9_900
    assert Gateway([], seed=1).attempts.max_keys == MAX_KEYS == 1_000_000
