"""Prometheus parsing, and the shop preset against the shop's own exposition.

The other presets are tested against their libraries' real output in
``test_presets.py``; selectors, ``map`` and ``breaker`` in ``test_presets_selectors.py``.
"""

import httpx
import pandas as pd
import pytest
from prometheus_client import generate_latest

from harness.analysis.series import (
    BREAKER_STATES,
    PRESETS,
    canonical,
    map_canonical,
    parse_text,
    preset_named,
)
from harness.core.errors import InputError
from harness.results.io import METRICS_COLUMNS
from targets.shop.config import ShopConfig
from targets.shop.db import Store
from targets.shop.metrics import WorkerGauge, make_registry
from targets.shop.payments import PaymentService
from targets.shop.pg_client import PgClient
from targets.shop.resilience import CircuitBreakerConfig, RetryConfig
from tests.analysis.frames import required


def _failing_shop(**settings: object) -> PaymentService:
    """The real shop service over a gateway that answers 503 to everything."""
    transport = httpx.MockTransport(lambda request: httpx.Response(503, text="down"))
    config = ShopConfig(
        pg_url="http://127.0.0.1:9",
        workers=4,
        retry=RetryConfig(max_attempts=2, wait_duration_s=0.0),
        **settings,  # type: ignore[arg-type]
    )
    client = PgClient(config.pg_url, 1.0, 1.0, 4, transport=transport)
    return PaymentService(config, Store(":memory:", 10), client, clock=lambda: 0.0)


def _scrape(service: PaymentService, workers: WorkerGauge, t: float) -> list[tuple]:
    return parse_text(generate_latest(make_registry(service, workers)).decode(), t, "target")


def test_parse_text_keeps_every_sample_with_labels() -> None:
    text = '# TYPE m gauge\nm{b="2",a="1"} 7\n# TYPE c counter\nc_total{x="y"} 3\n'
    assert parse_text(text, 10.0, "target") == [
        (10.0, "target", "m", '{"a":"1","b":"2"}', 7.0),
        (10.0, "target", "c_total", '{"x":"y"}', 3.0),
    ]


def test_shop_preset_on_the_shop_exposition() -> None:
    service = _failing_shop(
        profile="retry-circuit-breaker",
        circuitbreaker=CircuitBreakerConfig(sliding_window_size=2, minimum_number_of_calls=2),
    )
    workers = WorkerGauge(4)
    rows = _scrape(service, workers, 1.0)
    workers.enter()
    service.pay("key-1", 100)  # two 503s trip the breaker
    service.pay("key-2", 100)  # refused
    rows += _scrape(service, workers, 2.0)
    canon = map_canonical(pd.DataFrame(rows, columns=METRICS_COLUMNS), PRESETS["shop"])
    get = lambda name: canon.frame[canon.frame.series == name].set_index("t")["value"].to_dict()  # noqa: E731
    assert required(canon.missing) == {}
    assert get("busy_workers") == {1.0: 0.0, 2.0: 1.0}
    assert get("max_workers") == {1.0: 4.0, 2.0: 4.0}
    assert get("pg_calls") == {1.0: 0.0, 2.0: 2.0}  # summed over outcomes
    assert get("retries") == {1.0: 0.0, 2.0: 1.0}
    assert get("blocked_calls") == {1.0: 0.0, 2.0: 1.0}
    assert get("breaker_state") == {1.0: BREAKER_STATES["closed"], 2.0: BREAKER_STATES["open"]}


def test_shop_without_a_breaker_reads_blocked_calls_as_not_measured() -> None:
    service = _failing_shop()
    service.pay("key-1", 100)
    frame = pd.DataFrame(_scrape(service, WorkerGauge(4), 1.0), columns=METRICS_COLUMNS)
    canon = map_canonical(frame, PRESETS["shop"])
    assert set(required(canon.missing)) == {"blocked_calls", "breaker_state"}
    assert canon.missing["blocked_calls"].startswith(
        "no series resilience4j_circuitbreaker_not_permitted_calls_total or "
        "resilience4j_circuitbreaker_not_permitted_calls in 1 scrape(s) of the target; "
        "series seen: resilience4j_circuitbreaker_calls_seconds_count,"
    )
    assert set(canonical(frame, PRESETS["shop"])["series"]) == {
        "busy_workers",
        "max_workers",
        "pg_calls",
        "retries",
        "breaker_failures",  # 0: the timer of a breaker no call passes, as Spring's
    }


def test_preset_named_defaults_to_shop_and_rejects_unknown_names() -> None:
    assert preset_named(None) is PRESETS["shop"]  # runs that recorded no preset
    assert preset_named("spring-boot") is PRESETS["spring-boot"]
    with pytest.raises(InputError, match="unknown metrics preset 'nope'"):
        preset_named("nope")
