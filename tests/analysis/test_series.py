# ruff: noqa: E501 - exposition lines are long by nature
"""Prometheus parsing and the presets that map concrete series to canonical ones."""

import pandas as pd
import pytest

from harness.analysis.series import (
    BREAKER_STATES,
    METRIC_COLUMNS,
    PRESETS,
    canonical,
    parse_text,
    preset_named,
)
from harness.core.errors import InputError

SHOP = """\
# TYPE shop_workers_busy gauge
shop_workers_busy {busy}
# TYPE shop_workers_max gauge
shop_workers_max 200
# TYPE shop_pg_calls counter
shop_pg_calls_total{{outcome="timeout"}} {timeouts}
shop_pg_calls_total{{outcome="success"}} 5
# TYPE resilience4j_circuitbreaker_state gauge
resilience4j_circuitbreaker_state{{name="pgClient",state="closed"}} {closed}
resilience4j_circuitbreaker_state{{name="pgClient",state="open"}} {open}
resilience4j_circuitbreaker_state{{name="pgClient",state="half_open"}} 0
# TYPE resilience4j_circuitbreaker_not_permitted_calls counter
resilience4j_circuitbreaker_not_permitted_calls_total{{name="pgClient",kind="not_permitted"}} {blocked}
"""

SPRING = """\
# TYPE tomcat_threads_busy_threads gauge
tomcat_threads_busy_threads{name="http-nio-8080"} 187.0
# TYPE tomcat_threads_config_max_threads gauge
tomcat_threads_config_max_threads{name="http-nio-8080"} 200.0
# TYPE resilience4j_circuitbreaker_calls_seconds summary
resilience4j_circuitbreaker_calls_seconds_count{kind="failed",name="pgClient"} 40.0
resilience4j_circuitbreaker_calls_seconds_sum{kind="failed",name="pgClient"} 120.0
resilience4j_circuitbreaker_calls_seconds_count{kind="successful",name="pgClient"} 60.0
resilience4j_circuitbreaker_calls_seconds_sum{kind="successful",name="pgClient"} 3.0
"""


def _shop(busy: int, timeouts: int, open_: bool, blocked: int) -> str:
    return SHOP.format(
        busy=busy, timeouts=timeouts, closed=int(not open_), open=int(open_), blocked=blocked
    )


def test_parse_text_keeps_every_sample_with_labels() -> None:
    rows = parse_text(_shop(3, 7, False, 0), 10.0, "target")
    names = {r[2] for r in rows}
    assert "shop_pg_calls_total" in names and "resilience4j_circuitbreaker_state" in names
    timeout_row = next(r for r in rows if r[2] == "shop_pg_calls_total" and "timeout" in r[3])
    assert timeout_row[0] == 10.0 and timeout_row[1] == "target" and timeout_row[4] == 7.0


def test_shop_preset_maps_to_canonical_series() -> None:
    rows = parse_text(_shop(3, 7, False, 0), 1.0, "target") + parse_text(
        _shop(200, 50, True, 12), 2.0, "target"
    )
    frame = pd.DataFrame(rows, columns=METRIC_COLUMNS)
    canon = canonical(frame, PRESETS["shop"])
    get = lambda name: canon[canon.series == name].set_index("t")["value"].to_dict()  # noqa: E731
    assert get("busy_workers") == {1.0: 3.0, 2.0: 200.0}
    assert get("pg_calls") == {1.0: 12.0, 2.0: 55.0}  # summed over outcomes
    assert get("blocked_calls") == {1.0: 0.0, 2.0: 12.0}
    assert get("breaker_state") == {1.0: BREAKER_STATES["closed"], 2.0: BREAKER_STATES["open"]}


def test_spring_boot_preset() -> None:
    frame = pd.DataFrame(parse_text(SPRING, 5.0, "target"), columns=METRIC_COLUMNS)
    canon = canonical(frame, PRESETS["spring-boot"]).set_index("series")["value"]
    assert canon["busy_workers"] == 187.0
    assert canon["max_workers"] == 200.0
    assert canon["pg_calls"] == 100.0


def test_preset_named_defaults_to_shop_and_rejects_unknown_names() -> None:
    assert preset_named(None) is PRESETS["shop"]  # runs that recorded no preset
    assert preset_named("spring-boot") is PRESETS["spring-boot"]
    with pytest.raises(InputError, match="unknown metrics preset 'nope'"):
        preset_named("nope")
