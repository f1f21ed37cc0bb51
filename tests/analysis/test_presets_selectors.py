"""Selectors as a scenario writes them (``map:``), and presets resolved with map and breaker."""

import pytest

from harness.analysis.presets import PRESETS, Combination, Fallback, preset_for, resolve_preset
from harness.core.catalogue import CANONICAL_SERIES
from harness.core.errors import InputError
from harness.core.selectors import Selector, parse_selector
from harness.results.manifest import build_record


def test_parse_selector_reads_the_exposition_syntax() -> None:
    assert parse_selector("tomcat_threads_busy_threads") == Selector("tomcat_threads_busy_threads")
    assert parse_selector('circuit{event="reject",name="vendor"}') == Selector(
        "circuit", {"event": "reject", "name": "vendor"}
    )
    # Spaces around tokens, a trailing comma (Micrometer's simpleclient writes one) and escapes.
    assert parse_selector(' m { a = "x\\"y" , b="c\\\\d\\n", } ') == Selector(
        "m", {"a": 'x"y', "b": "c\\d\n"}
    )
    assert parse_selector("ns:metric_total{}") == Selector("ns:metric_total")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty selector"),
        ("   ", "empty selector"),
        ("9lives", "column 1: expected a metric name"),
        ("circuit{event=reject}", "column 15: expected a double-quoted label value"),
        ('circuit{event!="reject"}', "only exact matches are supported"),
        ('circuit{event=~"rej.*"}', "only exact matches are supported"),
        ('circuit{event="reject"', "expected ',' or '}' after a label value"),
        ('circuit{event="reject}', "unterminated label value"),
        ('circuit{event="a",event="b"}', "label 'event' is given twice"),
        ('circuit{"event"="a"}', "expected a label name or '}'"),
        ('circuit{event="a"} extra', "unexpected 'extra' after the selector"),
        ('circuit{event="a\\t"}', "unknown escape"),
        ("circuit event", "unexpected 'event'"),
    ],
)
def test_parse_selector_says_what_is_wrong_and_where(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        parse_selector(text)
    if text.strip():
        assert repr(text) in str(err.value)  # the message quotes the input


def test_a_selector_matches_a_counter_with_or_without_total() -> None:
    assert Selector("circuit").spellings() == ("circuit", "circuit_total")
    assert Selector("x_calls_total").spellings() == ("x_calls_total", "x_calls")
    assert str(Selector("circuit", {"name": "v", "event": "reject"})) == (
        'circuit{event="reject",name="v"}'
    )
    assert parse_selector(str(Selector("m", {"a": 'q"\\'}))) == Selector("m", {"a": 'q"\\'})


def test_map_overrides_and_adds_selectors() -> None:
    preset = resolve_preset(
        "opossum",
        {
            "busy_workers": 'http_requests_in_flight{pool="verify"}',
            "pg_calls": "vendor_calls_total",
        },
    )
    assert preset.source("busy_workers") == Selector("http_requests_in_flight", {"pool": "verify"})
    assert preset.source("pg_calls") == Selector("vendor_calls_total")
    assert preset.source("max_workers") == PRESETS["opossum"].source("max_workers")  # untouched
    assert preset.state_events is not None  # read the opossum way still
    none = resolve_preset("none", {"busy_workers": "my_pool_active"})
    assert (
        none.source("busy_workers") == Selector("my_pool_active")
        and none.source("blocked_calls") is None
    )
    assert preset.describe() == {
        "preset": "opossum",
        "metrics_map": {
            "busy_workers": 'http_requests_in_flight{pool="verify"}',
            "pg_calls": "vendor_calls_total",
        },
        "breaker": None,
    }


def test_breaker_narrows_the_breaker_series_only() -> None:
    spring = resolve_preset("spring-boot", {}, "pgClient")
    assert spring.source("blocked_calls") == Selector(
        "resilience4j_circuitbreaker_not_permitted_calls_total", {"name": "pgClient"}
    )
    assert spring.breaker_state == Selector(
        "resilience4j_circuitbreaker_state", {"name": "pgClient"}
    )
    pg_calls = spring.source("pg_calls")
    assert isinstance(pg_calls, Fallback)
    # Only the breaker's own timer among the gateway-call counters: the client timers
    # carry no breaker name.
    assert pg_calls.choices[1] == Selector(
        "resilience4j_circuitbreaker_calls_seconds_count", {"name": "pgClient"}
    )
    unnarrowed = PRESETS["spring-boot"].source("pg_calls")
    assert isinstance(unnarrowed, Fallback)
    assert pg_calls.choices[0] == unnarrowed.choices[0]
    assert pg_calls.choices[2:] == unnarrowed.choices[2:]
    assert spring.source("busy_workers") == PRESETS["spring-boot"].source(
        "busy_workers"
    )  # not a breaker series
    assert spring.source("retries") == PRESETS["spring-boot"].source(
        "retries"
    )  # a Retry has its own name
    opossum = resolve_preset("opossum", {}, "vendor")
    assert opossum.source("pg_calls") == Combination(
        (Selector("circuit", {"event": "fire", "name": "vendor"}),),
        (Selector("circuit", {"event": "reject", "name": "vendor"}),),
    )
    # What the map gives is used as written: its author names the labels.
    mapped = resolve_preset("shop", {"blocked_calls": "refused_total"}, "pgClient")
    assert mapped.source("blocked_calls") == Selector("refused_total")
    assert mapped.breaker_state == Selector(
        "resilience4j_circuitbreaker_state", {"name": "pgClient"}
    )


def test_resolve_preset_refuses_bad_input_with_the_key() -> None:
    with pytest.raises(ValueError, match="unknown metrics preset 'quarkus'"):
        resolve_preset("quarkus")
    with pytest.raises(ValueError, match="metrics.map: unknown series 'busy'"):
        resolve_preset("none", {"busy": "x"})
    with pytest.raises(ValueError, match=r"metrics.map.retries: 'x\{': column 3"):
        resolve_preset("none", {"retries": "x{"})
    with pytest.raises(ValueError, match="empty breaker name"):
        resolve_preset("shop", {}, "")
    assert set(CANONICAL_SERIES) == {
        "busy_workers",
        "max_workers",
        "blocked_calls",
        "pg_calls",
        "retries",
        "breaker_failures",
        "breaker_state",
        "db_active",
        "db_pending",
        "db_max",
        "db_timeouts",
        "event_loop_lag",
    }


def test_preset_for_reads_what_the_manifest_recorded() -> None:
    old = build_record("b", {})  # a run before presets were recorded
    assert preset_for(old) == PRESETS["shop"]
    info = {"preset": "opossum", "metrics_map": {"retries": "x_total"}, "breaker": "vendor"}
    preset = preset_for(build_record("b", info))
    assert preset.source("retries") == Selector("x_total") and preset.breaker == "vendor"
    with pytest.raises(InputError, match="the manifest's metrics settings: unknown metrics"):
        preset_for(build_record("b", {"preset": "nope"}))
