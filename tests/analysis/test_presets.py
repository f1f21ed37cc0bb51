"""Each preset against its library's real output (tests/data), and "not measured" reasons.

opossum: real captures of targets/node-gateway (opossum 9.0.0, opossum-prometheus
0.3.0, prom-client 15.1.3): ``opossum_metrics_*.txt`` (closed, open, recovered)
and ``opossum_sequence_*.txt`` + ``opossum_no_breaker.txt`` made by
``tests/data/capture_opossum.py``. The gateway also exports its own
``circuit_state`` gauge, which checks the state derived from opossum's events.

spring-boot: ``spring_boot_actuator_prometheus.txt`` is a real
``/actuator/prometheus`` capture (its source is on its first line); what it
lacks is in ``spring_boot_micrometer_documented.txt``, written from the
documented names and marked so.
"""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.analysis.cuts import NOT_MEASURED_FIGURES
from harness.analysis.figures import not_measured
from harness.analysis.presets import BREAKER_STATES, PRESETS, Preset, resolve_preset
from harness.analysis.series import (
    breaker_state_now,
    map_canonical,
    parse_text,
    select,
    states_from_events,
)
from harness.core.selectors import Selector
from harness.report.chart_style import state_style
from harness.report.tables import markdown
from harness.results.io import METRICS_COLUMNS
from tests.analysis.frames import required

DATA = Path(__file__).parents[1] / "data"
OPOSSUM_3 = ["opossum_metrics_closed", "opossum_metrics_open", "opossum_metrics_recovered"]
SEQUENCE = [
    "opossum_sequence_1_closed_busy",
    "opossum_sequence_2_open",
    "opossum_sequence_3_half_open",
    "opossum_sequence_4_closed",
]
CLOSED, OPEN, HALF_OPEN = (float(BREAKER_STATES[s]) for s in ("closed", "open", "half_open"))


def _scrapes(*names: str, source: str = "target") -> pd.DataFrame:
    """The captures as consecutive scrapes of one source, 1 s apart."""
    rows = []
    for t, name in enumerate(names):
        rows += parse_text((DATA / f"{name}.txt").read_text(), float(t), source)
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def _series(frame: pd.DataFrame, preset: Preset) -> dict[str, list[float]]:
    canon = map_canonical(frame, preset).frame
    return {name: list(rows["value"]) for name, rows in canon.groupby("series")}


# ---------------------------------------------------------------- opossum


def test_a_counter_exposed_without_total_is_found_by_either_name() -> None:
    metrics = _scrapes("opossum_metrics_open")
    # prometheus_client stores `circuit{...}` (# TYPE circuit counter) as circuit_total ...
    assert "circuit_total" in set(metrics["series"]) and "circuit" not in set(metrics["series"])
    # ... and a selector finds it under the name the exposition shows, or the stored one.
    for name in ("circuit", "circuit_total"):
        assert select(metrics, "target", Selector(name, {"event": "reject"})).tolist() == [6.0]


def test_opossum_preset_on_the_three_captures() -> None:
    metrics = _scrapes(*OPOSSUM_3)
    canon = map_canonical(metrics, PRESETS["opossum"])
    assert required(canon.missing) == {}
    got = _series(metrics, PRESETS["opossum"])
    # No `reject` sample in the closed capture (none yet): 0, since `circuit` exists.
    assert got["blocked_calls"] == [0.0, 6.0, 6.0]
    # fire - reject, the calls the breaker let through, equals what reached the vendor.
    vendor = select(metrics, "target", Selector("vendor_calls_total")).tolist()
    assert got["pg_calls"] == vendor == [10.0, 21.0, 25.0]
    # closed -> open -> (half-open and closed within one interval) -> closed
    assert got["breaker_state"] == [CLOSED, OPEN, CLOSED]
    assert got["busy_workers"] == [0.0, 0.0, 0.0]
    assert got["max_workers"] == [10.0, 10.0, 10.0]
    assert got["retries"] == [0.0, 0.0, 0.0]
    assert got["breaker_state"] == _gateway_own_state(metrics)


def _gateway_own_state(metrics: pd.DataFrame) -> list[float]:
    """node-gateway's own circuit_state gauge, read through a map: the derivation's check."""
    gauge = resolve_preset("none", {"breaker_state": "circuit_state"}, "vendor")
    return _series(metrics, gauge)["breaker_state"]


def test_opossum_state_through_half_open_and_busy_workers_from_in_flight() -> None:
    metrics = _scrapes(*SEQUENCE)
    got = _series(metrics, PRESETS["opossum"])
    assert got["breaker_state"] == [CLOSED, OPEN, HALF_OPEN, CLOSED]
    assert got["breaker_state"] == _gateway_own_state(metrics)
    assert got["busy_workers"] == [4.0, 0.0, 0.0, 0.0]  # four slow verifications in flight
    assert got["max_workers"] == [10.0] * 4
    assert got["blocked_calls"] == [0.0, 3.0, 3.0, 3.0]
    assert got["pg_calls"] == [10.0, 21.0, 21.0, 25.0]


def test_live_breaker_state_from_the_scrapes_so_far() -> None:
    metrics = _scrapes(*SEQUENCE)
    rows = list(metrics.itertuples(index=False, name=None))
    seen = [breaker_state_now(PRESETS["opossum"], [r for r in rows if r[0] <= t]) for t in range(4)]
    assert seen == ["closed", "open", "half_open", "closed"]
    assert breaker_state_now(PRESETS["opossum"], []) is None


def test_opossum_without_a_breaker_is_not_measured_never_zero() -> None:
    metrics = _scrapes("opossum_no_breaker")
    canon = map_canonical(metrics, PRESETS["opossum"])
    assert set(required(canon.missing)) == {"blocked_calls", "pg_calls", "breaker_state"}
    for reason in required(canon.missing).values():
        assert reason.startswith("no series circuit or circuit_total in 1 scrape(s) of the target")
        assert "series seen: http_max_concurrency, http_requests_abandoned_total" in reason
    assert set(canon.frame["series"]) == {
        "busy_workers",
        "max_workers",
        "retries",
        "event_loop_lag",
    }


def test_map_override_and_breaker_name_on_real_output() -> None:
    metrics = _scrapes(*OPOSSUM_3)
    own = resolve_preset("opossum", {"pg_calls": "vendor_calls_total"}, "vendor")
    got = _series(metrics, own)
    assert got["pg_calls"] == [10.0, 21.0, 25.0]
    assert got["blocked_calls"] == [0.0, 6.0, 6.0]
    # A breaker that is not there, a pool that is not there: not measured, saying what is.
    wrong = resolve_preset(
        "opossum", {"busy_workers": 'http_requests_in_flight{pool="verify"}'}, "payments"
    )
    missing = map_canonical(metrics, wrong).missing
    assert missing["busy_workers"] == (
        'http_requests_in_flight was scraped but no sample has {pool="verify"}; '
        'values seen: pool: "shared"'
    )
    assert missing["blocked_calls"] == (
        'circuit_total was scraped but no sample has {event="reject",name="payments"}; '
        'values seen: name: "vendor"'
    )
    assert missing["breaker_state"] == (
        'circuit_total was scraped but no sample has {name="payments"}; values seen: name: "vendor"'
    )


def test_another_node_service_is_told_it_has_no_pool_and_may_map_a_gauge() -> None:
    metrics = _scrapes("opossum_metrics_open")
    metrics = metrics[~metrics["series"].str.startswith("http_")]
    missing = map_canonical(metrics, PRESETS["opossum"]).missing
    # Node has no worker pool (issue 30, item 3): requests in flight are its concurrency.
    assert missing["busy_workers"].endswith(
        "(the service runs on Node.js: one event loop serves every request and a request "
        "waiting on a call holds nothing, so there is no worker pool to read; requests in "
        "flight (in_flight.max, in_flight.p50) are its concurrency; a gauge of its own can "
        "still be read with metrics.map)"
    )


# ---------------------------------------------------------------- spring-boot


def test_spring_boot_preset_on_a_real_actuator_capture() -> None:
    text = (DATA / "spring_boot_actuator_prometheus.txt").read_text()
    assert text.startswith("# source: https://github.com/")
    metrics = _scrapes("spring_boot_actuator_prometheus")
    canon = map_canonical(metrics, PRESETS["spring-boot"])
    got = _series(metrics, PRESETS["spring-boot"])
    assert got["blocked_calls"] == [0.0]
    assert got["pg_calls"] == [0.0]  # successful + failed + ignored
    assert got["breaker_state"] == [CLOSED]
    # Spring Boot's default: no Tomcat MBean registry, so no tomcat_threads_*; no Retry.
    assert set(required(canon.missing)) == {"busy_workers", "max_workers", "retries"}
    busy = canon.missing["busy_workers"]
    assert busy.startswith(
        "no series tomcat_threads_busy_threads in 1 scrape(s) of the target; series seen: "
        "tomcat_sessions_active_current_sessions, "  # the same first word first
    )
    assert "tomcat_sessions_active_current_sessions" in busy
    assert busy.endswith(
        "(Spring Boot exposes tomcat_threads_* only with server.tomcat.mbeanregistry.enabled=true)"
    )
    assert "no series resilience4j_retry_calls_total" in canon.missing["retries"]


def test_spring_boot_preset_with_tomcat_threads_retry_and_two_breakers() -> None:
    metrics = _scrapes("spring_boot_micrometer_documented")
    # Counters declared without _total (# TYPE ..._not_permitted_calls counter) are found too.
    everything = map_canonical(metrics, PRESETS["spring-boot"])
    assert required(everything.missing) == {
        "breaker_state": "several breakers (inventory, pgClient) in "
        "resilience4j_circuitbreaker_state: choose one with metrics.breaker"
    }
    got = _series(metrics, PRESETS["spring-boot"])
    assert got["busy_workers"] == [187.0] and got["max_workers"] == [200.0]
    assert got["blocked_calls"] == [451.0] and got["pg_calls"] == [220.0]  # both breakers
    assert got["retries"] == [37.0]  # calls retried: successful_with_retry + failed_with_retry
    one = _series(metrics, resolve_preset("spring-boot", {}, "pgClient"))
    assert one["breaker_state"] == [OPEN]
    assert one["blocked_calls"] == [451.0] and one["pg_calls"] == [180.0]
    other = _series(metrics, resolve_preset("spring-boot", {}, "inventory"))
    assert other["breaker_state"] == [CLOSED] and other["blocked_calls"] == [0.0]


# Lines of targets/spring-shop's live /actuator/prometheus (retry-only, feign-micrometer 13.6
# with its MicrometerCapability bean, Resilience4j 2.3.0): two payments answered, one 500 retried
# once, two timed out twice; a product client's call that is not the gateway's.
_FEIGN = 'client="com.example.shop.PgRetryOnlyClient",host="127.0.0.1",method="approve"'
_SPRING_SHOP_LIVE = f"""\
feign_Client_seconds_count{{{_FEIGN},uri="/v1/payments/approve"}} 4
feign_Client_seconds_count{{{_FEIGN},uri="/v1/stock"}} 7
feign_Client_exception_seconds_count{{{_FEIGN},exception_name="SocketTimeoutException",\
root_cause_name="SocketTimeoutException",uri="/v1/payments/approve"}} 4
resilience4j_circuitbreaker_calls_seconds_count{{kind="successful",name="pgClient"}} 2.0
resilience4j_circuitbreaker_calls_seconds_count{{kind="failed",name="pgClient"}} 3.0
http_client_requests_seconds_count{{clientName="com.example.shop.PgRetryOnlyClient",error="none",\
http_method="POST",http_status_code="200",http_url="/v1/payments/approve"}} 2
tomcat_threads_busy_threads{{name="http-nio-18380"}} 0.0
"""


def _live(*prefixes: str) -> pd.DataFrame:
    """The live lines whose series starts with one of ``prefixes``, as one scrape."""
    text = "".join(
        line + "\n" for line in _SPRING_SHOP_LIVE.splitlines() if line.startswith(prefixes)
    )
    return pd.DataFrame(parse_text(text, 0.0, "target"), columns=METRICS_COLUMNS)


def test_spring_boot_gateway_calls_from_the_best_counter_the_service_has() -> None:
    """Feign's client timer (every attempt, timeouts included), else the breaker's timer,
    else Spring's client observation; only the gateway's approve route."""
    spring = PRESETS["spring-boot"]
    assert _series(_live("feign", "resilience4j", "http"), spring)["pg_calls"] == [8.0]
    assert _series(_live("resilience4j", "http"), spring)["pg_calls"] == [5.0]
    assert _series(_live("http"), spring)["pg_calls"] == [2.0]  # feign#2566: no timeouts
    narrowed = resolve_preset("spring-boot", {}, "pgClient")
    assert _series(_live("resilience4j"), narrowed)["pg_calls"] == [5.0]
    assert _series(_live("feign"), narrowed)["pg_calls"] == [8.0]  # no breaker label on it
    missing = map_canonical(_live("tomcat"), spring).missing["pg_calls"]
    assert missing.startswith("no series feign_Client_seconds_count")
    assert "nor any of resilience4j_circuitbreaker_calls_seconds_count" in missing
    assert 'http_client_requests_seconds_count{http_url="/v1/payments/approve"}' in missing


@pytest.mark.parametrize(
    "state", ["closed", "open", "half_open", "disabled", "forced_open", "metrics_only"]
)
def test_each_of_resilience4j_s_six_states_reads_as_its_own(state: str) -> None:
    """The real capture's gauge with the 1 moved to ``state``: never "unknown" (-1)."""
    text = (DATA / "spring_boot_actuator_prometheus.txt").read_text()
    lines = []
    for line in text.splitlines():
        if line.startswith("resilience4j_circuitbreaker_state{"):
            value = "1.0" if f'state="{state}"' in line else "0.0"
            line = line.rsplit(" ", 1)[0] + " " + value
        lines.append(line)
    metrics = pd.DataFrame(parse_text("\n".join(lines), 0.0, "target"), columns=METRICS_COLUMNS)
    got = _series(metrics, PRESETS["spring-boot"])
    assert got["breaker_state"] == [float(BREAKER_STATES[state])]
    assert state_style(BREAKER_STATES[state])[0] != "unknown"  # the chart has a colour for it


# ---------------------------------------------------------------- none, and no scrape


def test_none_preset_reads_only_the_map() -> None:
    metrics = _scrapes("opossum_metrics_open")
    preset = resolve_preset("none", {"busy_workers": "http_requests_in_flight"})
    canon = map_canonical(metrics, preset)
    assert set(canon.frame["series"]) == {"busy_workers"}
    assert canon.missing["retries"] == (
        "the 'none' preset names no series for retries; add one under metrics.map"
    )


def test_a_target_never_scraped_is_not_measured() -> None:
    empty = pd.DataFrame(columns=METRICS_COLUMNS)
    canon = map_canonical(empty, PRESETS["shop"])
    assert canon.frame.empty
    assert set(canon.missing.values()) == {
        "no scrape of the target succeeded, so nothing was read",
        # A Node event loop's lag: the shop names no series for it.
        "the 'shop' preset names no series for event_loop_lag; add one under metrics.map",
    }


# ---------------------------------------------------------------- state from events


@pytest.mark.parametrize(
    ("counts", "states"),
    [
        ([(0, 0, 0)], ["closed"]),  # before any event
        ([(1, 0, 0), (1, 0, 0)], ["open", "open"]),
        ([(1, 0, 0), (1, 1, 0), (1, 1, 1)], ["open", "half_open", "closed"]),
        ([(1, 1, 1)], ["closed"]),  # a whole cycle within one interval
        ([(1, 1, 0)], ["half_open"]),
        ([(1, 1, 0), (2, 1, 0)], ["half_open", "open"]),  # the probe failed
        ([(1, 1, 0), (2, 2, 0)], ["half_open", "half_open"]),  # failed, half-open again
        ([(1, 1, 0), (1, 1, 1)], ["half_open", "closed"]),  # the probe succeeded
        # Ambiguous within one interval (open-halfOpen-close or close-open-halfOpen): a
        # close must outnumber the half-opens, counting the one already pending.
        ([(1, 1, 0), (2, 2, 1)], ["half_open", "half_open"]),
        ([(1, 0, 0), (1, 0, 1)], ["open", "closed"]),  # closed by hand, no half-open
        ([(3, 3, 3), (0, 0, 0), (1, 0, 0)], ["closed", "closed", "open"]),  # restart
    ],
)
def test_states_from_events(counts: list[tuple[int, int, int]], states: list[str]) -> None:
    frame = pd.DataFrame(counts, columns=["open", "half_open", "close"], dtype=float)
    got = states_from_events(frame).tolist()
    assert got == [float(BREAKER_STATES[s]) for s in states]


# ---------------------------------------------------------------- in the report


class _Measured:
    def __init__(self, missing: dict[str, str], pg_source: str | None, pg: bool = True) -> None:
        self.missing = missing
        self.pg_source = pg_source
        self.scenario = SimpleNamespace(has_pg=pg)  # the scenario plays pg (the shop's gateway)


def test_not_measured_figures_carry_the_reason() -> None:
    missing = map_canonical(_scrapes("opossum_no_breaker"), PRESETS["opossum"]).missing
    out = not_measured(_Measured(missing, "ledger"))  # type: ignore[arg-type]
    assert set(out) == {
        *NOT_MEASURED_FIGURES["blocked_calls"],
        *NOT_MEASURED_FIGURES["breaker_state"],
        *NOT_MEASURED_FIGURES["pg_calls"],
    }
    without_pg = not_measured(_Measured(missing, None, pg=False))  # type: ignore[arg-type]
    assert set(without_pg) == set(out) - set(NOT_MEASURED_FIGURES["pg_calls"])
    assert out["breaker.blocked_total"].startswith(
        "blocked_calls: no series circuit or circuit_total"
    )
    assert out["timeline.time_to_open_s"].startswith("breaker_state: no series circuit")
    nothing = not_measured(_Measured({}, None))  # type: ignore[arg-type]
    assert set(nothing) == {
        "pg.calls",
        "pg.calls_fault",
        "pg.amplification",
        "pg.amplification_fault",
    }


def test_markdown_lists_what_was_not_measured() -> None:
    report = {
        "scenario": "s",
        "run_id": "r",
        "status": "completed",
        "seed": 1,
        "duration_s": 10.0,
        "warmup_s": 1.0,
        "phases": [],
        "endpoints": {},
        "baseline": "before",
        "builds": {
            "before": {
                "profile": "command",
                "endpoints": {},
                "workers": {
                    "busy_max_fault": None,
                    "busy_mean_fault": None,
                    "busy_p50_fault": None,
                    "max_workers": None,
                },
                "breaker": {"blocked_total": None, "blocked_per_s_fault": None},
                "pg": {"calls": None, "amplification": None, "amplification_fault": None},
                "not_measured": {
                    "breaker.blocked_total": "blocked_calls: no series circuit",
                    "breaker.blocked_fault": "blocked_calls: no series circuit",
                },
            }
        },
    }
    text = markdown(report)  # type: ignore[arg-type]
    assert "| blocked calls (measured window) | - |" in text
    assert (
        "## Not measured\n\n- **before**: `breaker.blocked_total`, `breaker.blocked_fault`: "
        "blocked_calls: no series circuit\n"
    ) in text
