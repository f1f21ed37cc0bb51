"""Unit tests for fallbacks: error, value and cached answers, driven by a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from targets.shop.resilience import Fallback, FallbackAnswer, FallbackConfig
from targets.shop.resilience import fallback as fallback_module
from tests.shop.test_breaker import FakeClock


class Sick(Exception):
    """The dependency failed."""


class Declined(Exception):
    """An answer already (a 4xx): no fallback answers for it."""


def failing() -> Any:
    raise Sick("503")


def make(clock: FakeClock | None = None, **settings: Any) -> Fallback:
    return Fallback("circuit-breaker", FallbackConfig(**settings), clock=clock or FakeClock())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kind": "retry"}, "kind"),
        ({"ttl_s": 0.0}, "ttl_s"),
        ({"ignore_exceptions": [1]}, "ignore_exceptions"),
    ],
)
def test_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FallbackConfig(**overrides)


def test_a_good_answer_passes_through_untouched() -> None:
    for kind in ("error", "value", "cached"):
        assert make(kind=kind).call(lambda: {"ok": 1}, "k") == {"ok": 1}


def test_error_kind_answers_a_fast_failure() -> None:
    fb = make(kind="error")
    answer = fb.call(failing)
    assert isinstance(answer, FallbackAnswer)
    assert (answer.layer, answer.kind, answer.value, answer.cached) == (
        "circuit-breaker",
        "error",
        None,
        False,
    )
    assert isinstance(answer.error, Sick)
    assert fb.metrics().answers == 1


def test_value_kind_answers_the_fixed_value() -> None:
    fb = make(kind="value", value={"status": "CIRCUIT_OPEN"})
    answer = fb.call(failing)
    assert isinstance(answer, FallbackAnswer)
    assert answer.value == {"status": "CIRCUIT_OPEN"}


def test_which_errors_it_answers_for() -> None:
    fb = make(kind="value", ignore_exceptions=(Declined,))

    def declined() -> None:
        raise Declined("400")

    with pytest.raises(Declined):
        fb.call(declined)
    only = make(kind="value", fallback_exceptions=(Declined,))
    with pytest.raises(Sick):
        only.call(failing)
    assert isinstance(only.call(declined), FallbackAnswer)


def test_interrupts_are_never_answered_for() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        make(kind="value").call(interrupted)


def test_cached_kind_answers_the_last_good_answer_of_the_same_key() -> None:
    clock = FakeClock()
    fb = make(clock, kind="cached", ttl_s=60.0)
    fb.call(lambda: {"v": 1}, "product-1")
    fb.call(lambda: {"v": 2}, "product-1")  # the last one is kept
    fb.call(lambda: {"v": 9}, "product-2")
    clock.advance(59.0)
    answer = fb.call(failing, "product-1")
    assert isinstance(answer, FallbackAnswer)
    assert (answer.kind, answer.value, answer.cached, answer.age_s) == (
        "cached",
        {"v": 2},
        True,
        59.0,
    )
    with pytest.raises(Sick):
        fb.call(failing, "product-3")  # never answered: a miss, the error goes on
    metrics = fb.metrics()
    assert (metrics.answers, metrics.cache_misses, metrics.cached_keys) == (1, 1, 2)


def test_cached_answers_expire_after_the_ttl() -> None:
    clock = FakeClock()
    fb = make(clock, kind="cached", ttl_s=60.0)
    fb.call(lambda: "fresh", "k")
    clock.advance(60.0)
    assert isinstance(fb.call(failing, "k"), FallbackAnswer)  # exactly the TTL: still good
    clock.advance(0.001)
    with pytest.raises(Sick):
        fb.call(failing, "k")
    assert fb.metrics().cache_misses == 1


def test_expired_entries_are_dropped_as_new_ones_arrive() -> None:
    clock = FakeClock()
    fb = make(clock, kind="cached", ttl_s=10.0)
    for key in range(5):
        fb.call(lambda: "v", key)
    clock.advance(11.0)
    fb.call(lambda: "v", "new")
    assert fb.metrics().cached_keys == 1


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fallback_module, "MAX_CACHED_KEYS", 3)
    fb = make(kind="cached")
    for key in range(5):
        fb.call(lambda key=key: key, key)
    assert fb.metrics().cached_keys == 3
    with pytest.raises(Sick):
        fb.call(failing, 0)  # the oldest went first
    assert isinstance(fb.call(failing, 4), FallbackAnswer)


def test_another_fallbacks_answer_is_never_cached() -> None:
    inner = make(kind="value", value="fixed")
    outer = make(kind="cached")
    first = outer.call(lambda: inner.call(failing), "k")
    assert isinstance(first, FallbackAnswer) and first.kind == "value"
    with pytest.raises(Sick):
        outer.call(failing, "k")
