"""A server without a worker pool is read as one (issue 30, item 3): the report said to set
``server.tomcat.mbeanregistry.enabled=true`` for a Spring WebFlux gateway on Netty, where no
Tomcat setting applies and a waiting request holds no thread.

The services are the real captures of tests/data changed only where their server shows: the
Spring Boot capture (Tomcat: ``tomcat_sessions_*`` without the MBean registry) with its
``tomcat_*`` series taken out, and with Reactor Netty's or Spring Cloud Gateway's series (their
documented names) put in; targets/node-gateway's capture without its own ``http_*`` gauges (a
stock prom-client Node service).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.figures import analyse
from harness.analysis.presets import PRESETS
from harness.analysis.series import map_canonical, parse_text
from harness.report.tables import markdown
from harness.results.io import LEDGER_DTYPES, METRICS_COLUMNS, empty_frame
from harness.results.model import BuildResult, RunResult
from harness.scenario.loader import load_scenario_text
from tests.analysis.frames import sample_frame

DATA = Path(__file__).parents[1] / "data"
REACTOR_NETTY = """\
# TYPE reactor_netty_http_server_connections_active gauge
reactor_netty_http_server_connections_active{local_address="127.0.0.1:8080",uri="http"} 201.0
# TYPE reactor_netty_http_server_response_time_seconds summary
reactor_netty_http_server_response_time_seconds_count{method="GET",status="200",uri="/"} 1200.0
reactor_netty_http_server_response_time_seconds_sum{method="GET",status="200",uri="/"} 31.5
"""
_ROUTE = (
    'httpMethod="GET",httpStatusCode="200",outcome="SUCCESSFUL",routeId="owners",'
    'routeUri="http://127.0.0.1:9000",status="OK"'
)
GATEWAY = (
    "# TYPE spring_cloud_gateway_requests_seconds summary\n"
    f"spring_cloud_gateway_requests_seconds_count{{{_ROUTE}}} 1200.0\n"
    f"spring_cloud_gateway_requests_seconds_sum{{{_ROUTE}}} 24.0\n"
)


def _text(capture: str, drop: str = "", add: str = "") -> str:
    """A capture with the lines of series starting with ``drop`` taken out, ``add`` put in."""
    lines = (DATA / f"{capture}.txt").read_text().splitlines(keepends=True)
    kept = [
        line
        for line in lines
        if not drop
        or not (line.startswith(drop) or line.startswith((f"# TYPE {drop}", f"# HELP {drop}")))
    ]
    return "".join(kept) + add


def _scrapes(text: str, times: tuple[float, ...] = (0.0,)) -> pd.DataFrame:
    rows = [row for t in times for row in parse_text(text, t, "target")]
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def _busy(text: str, preset: str) -> str:
    return map_canonical(_scrapes(text), PRESETS[preset]).missing["busy_workers"]


@pytest.mark.parametrize("series", [REACTOR_NETTY, GATEWAY], ids=["reactor-netty", "gateway"])
def test_a_webflux_service_is_told_it_has_no_worker_pool(series: str) -> None:
    for name in ("busy_workers", "max_workers"):
        why = map_canonical(
            _scrapes(_text("spring_boot_actuator_prometheus", "tomcat_", series)),
            PRESETS["spring-boot"],
        ).missing[name]
        assert "mbeanregistry" not in why, why
        assert "runs on Reactor Netty (Spring WebFlux)" in why and "no worker pool" in why, why
        assert "in_flight.max" in why, why


def test_a_spring_service_without_tomcat_series_is_not_told_to_set_a_tomcat_property() -> None:
    why = _busy(_text("spring_boot_actuator_prometheus", "tomcat_"), "spring-boot")
    assert "mbeanregistry.enabled=true" not in why, why
    assert "exposes no tomcat_* series" in why and "in_flight.max" in why, why


def test_tomcat_keeps_the_mbean_registry_advice() -> None:
    # The same capture as it is (tomcat_sessions_*, no tomcat_threads_*), with a reactive
    # client's series beside: still Tomcat.
    client = 'reactor_netty_connection_provider_active_connections{id="1",name="pg"} 3.0\n'
    for text in (
        _text("spring_boot_actuator_prometheus"),
        _text("spring_boot_actuator_prometheus", add=client),
    ):
        why = _busy(text, "spring-boot")
        assert why.endswith("only with server.tomcat.mbeanregistry.enabled=true)"), why


@pytest.mark.parametrize("preset", ["opossum", "spring-boot", "none"])
def test_a_node_service_is_told_it_has_no_worker_pool(preset: str) -> None:
    # A stock prom-client service: nodejs_* and opossum's counters, none of node-gateway's gauges.
    why = _busy(_text("opossum_metrics_closed", "http_"), preset)
    assert "runs on Node.js" in why and "no worker pool" in why and "in_flight.max" in why, why
    assert "mbeanregistry" not in why and "node-gateway" not in why, why


T0 = 1_800_000_000.0
SCENARIO = """\
name: reactive
seed: 1
warmup: 2s
duration: 20s
traffic:
  owners: {path: /owners, rate: 10, calls-gateway: true}
  vets: {path: /vets, rate: 10}
pg:
  phases:
    - {name: calm, start: 0s, duration: 5s, fault: {type: healthy}}
    - {name: outage, start: 5s, duration: 10s, fault: {type: timeout}}
    - {name: healed, start: 15s, duration: 5s, fault: {type: healthy}}
builds:
  gateway: {profile: retry-circuit-breaker}
"""


def test_the_report_of_a_webflux_service_tells_its_story(tmp_path: Path) -> None:
    """Owners wait 5 s in the outage, vets stay at 20 ms; the service is on Netty."""
    start = T0 - 2.0 + np.arange(220) / 10
    t = start - T0
    wait = np.where((t >= 5) & (t < 15), 5.0, 0.02)
    ok = np.full(len(t), 200)
    samples = pd.concat(
        [
            sample_frame("owners", start, wait, ok),
            sample_frame("vets", start, np.full(len(t), 0.02), ok),
        ],
        ignore_index=True,
    )
    text = _text("spring_boot_actuator_prometheus", "tomcat_", REACTOR_NETTY)
    metrics = _scrapes(text, tuple(T0 - 2.0 + np.arange(0, 24, 2.0)))
    info = {"t0": T0, "preset": "spring-boot"}  # the build's manifest record
    build = BuildResult("gateway", samples, metrics, info, empty_frame(LEDGER_DTYPES))
    run = RunResult(tmp_path, {"run_id": "r", "status": "completed"}, {"gateway": build})
    report = analyse(run, load_scenario_text(SCENARIO).scenario)
    b = report["builds"]["gateway"]
    assert b["workers"]["busy_max_fault"] is None
    assert b.get("in_flight") == {"max_fault": 51.0, "p50_fault": 50.0}
    text = markdown(report)
    assert "mbeanregistry" not in text
    assert "| requests in flight max (outage) | 51 |" in text
    assert "runs on Reactor Netty (Spring WebFlux)" in text and "in_flight.max" in text
