"""Integration: a TCP dependency declared in the scenario (issue 29, part 4), through the
real ``harness run``.

A tiny echo server on 127.0.0.1 stands for a database; the scenario declares it as
``dependencies.db.tcp`` with a latency toxic for one phase, and a service not written for
the harness (``tests/run/data/tcp_dep_service.py``) reaches it through its own
environment (``{dep.db.host}``, ``{dep.db.port}``, ``{dep.db.address}``). Checked: the
run starts the proxy on its phase clock (the service saw the added latency only inside
the phase), scrapes it as ``dep-db``, and the report's figures for ``db`` equal the
proxy's own counters and the service's own record of its connections and bytes. About
15 s.
"""

from __future__ import annotations

import json
import socketserver
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.dependencies import EDGE_SCRAPE_S
from harness.analysis.validity import LATE_WARN_S
from tests.scenario_runs import assert_nothing_left, only_run, run_harness

pytestmark = pytest.mark.integration

SERVICE = Path(__file__).resolve().parent / "data" / "tcp_dep_service.py"

SCENARIO = """\
name: tcp-dependency
seed: 4
warmup: 1050ms
duration: 8s
metrics: {{interval: 1s}}
traffic:
  q: {{path: /q, rate: 10, timeout: 3s}}
dependencies:
  db:
    tcp: 127.0.0.1:{upstream}
    phases:
      - {{name: db-slow, start: 3s, duration: 3s, toxics: [{{type: latency, latency: 200ms}}]}}
builds:
  app:
    command: [{python}, {service}, "{{port}}"]
    metrics: {{path: null}}
    env:
      DB_ADDRESS: "{{dep.db.address}}"
      DB_HOST: "{{dep.db.host}}"
      DB_PORT: "{{dep.db.port}}"
      LOG_FILE: "{{run_dir}}/{{build}}/calls.csv"
gates:
  - "app.dependencies.db.toxics_applied[db-slow] >= 1"
  - "app.dependencies.db.connections >= 1"
  - "app.dependencies.db.upstream_errors == 0"
"""


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[int]:
    """A TCP echo server on loopback (the real upstream), stopped after the test."""
    socketserver.ThreadingTCPServer.daemon_threads = True
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _last(metrics: pd.DataFrame, series: str, labels: str = "{}") -> float:
    """The proxy's own counter as last scraped (after the load: its final value)."""
    rows = metrics[(metrics["source"] == "dep-db") & (metrics["series"] == series)]
    rows = rows[rows["labels"] == labels]
    return float(rows.sort_values("t")["value"].iloc[-1])


STALL_S = LATE_WARN_S
"""How far a loaded machine may move an event from the time the service recorded for it
(the run-validity threshold, docs/testing.md): a call recorded at 2.91 s was seen to reach
the proxy inside a phase that began at 3 s, one recorded at 5.95 s after it ended."""


def _counted(
    at: pd.Series,
    values: pd.Series,
    window: tuple[float, float],
    scrapes: np.ndarray,
    before: float = 0.0,
    after: float = 0.0,
) -> tuple[float, float]:
    """What a window's counter figure may read: the sum of ``values`` whose event falls in
    [start, end), an event recorded at ``at`` having happened in [at - before, at + after].
    An edge with a scrape within ``EDGE_SCRAPE_S`` is read exactly; one whose scrape came
    later (a loaded machine) is interpolated between the scrapes around it. The figure lies
    between the sum of the events surely in the narrowest window and of those possibly in
    the widest."""

    def around(edge: float) -> tuple[float, float]:
        if np.abs(scrapes - edge).min() <= EDGE_SCRAPE_S:
            return edge, edge
        return scrapes[scrapes < edge].max(), scrapes[scrapes > edge].min()

    (a1, a2), (b1, b2) = around(window[0]), around(window[1])
    surely = (at >= a2 + before) & (at < b1 - after)
    possibly = (at >= a1 - after) & (at < b2 + before)
    return values[surely].sum(), values[possibly].sum()


def test_tcp_dependency_latency_phase(tmp_path: Path, echo: int) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.format(upstream=echo, python=sys.executable, service=SERVICE))
    done = run_harness(["run", str(scenario), "--results", str(tmp_path / "results")], 180)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run_dir = only_run(tmp_path / "results")
    assert_nothing_left(run_dir)
    bdir = run_dir / "app"
    calls = pd.read_csv(bdir / "calls.csv", names=["start", "elapsed", "sent", "received"])
    report = json.loads((run_dir / "report.json").read_text())
    build = report["builds"]["app"]
    t0 = build["t0"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["builds"]["app"]["dependencies"]["db"]["api_url"].startswith("tcp://")
    assert (calls["received"] == calls["sent"]).all() and len(calls) >= 80

    # The latency toxic held on the run's clock. (Arrivals are 0.1 s apart from the load's
    # start, 1.05 s before t0: each call is 50 ms from any edge of the window or the phase,
    # as the service records it; a loaded machine may move the call itself by up to STALL_S.)
    at = calls["start"] - t0
    inside = calls[(at >= 3) & (at < 6)]
    outside = calls[(at < 3) | (at >= 6)]
    assert abs(len(inside) - 30) <= 2 and len(outside) >= 50
    # Each call surely inside took the toxic's 200 ms (a lower bound: a loaded machine only
    # adds); the others were fast (their median: a stall takes one past 100 ms, or into the
    # phase); the proxy's own counts below say how many met the toxic.
    surely = calls[(at >= 3) & (at < 6 - STALL_S)]
    assert len(surely) >= 20 and (surely["elapsed"] >= 0.2).all(), surely
    assert outside["elapsed"].median() < 0.05, outside

    metrics = pd.read_parquet(bdir / "metrics.parquet")
    db = build["dependencies"]["db"]
    scrapes = np.unique(metrics.loc[metrics["source"] == "dep-db", "t"].to_numpy() - t0)
    ones = pd.Series(1, index=calls.index)
    # Bytes back count when the proxy passed them on (200 ms late inside the phase).
    back = calls["start"] + calls["elapsed"] - t0

    def bounds(
        when: pd.Series, values: pd.Series, window: tuple[float, float], sent: bool
    ) -> tuple[float, float]:
        # a call's start reaches the proxy up to STALL_S after the service recorded it; its
        # answer passed the proxy up to STALL_S before the service recorded it back
        slack = {"after": STALL_S} if sent else {"before": STALL_S}
        return _counted(when, values, window, scrapes, **slack)

    measured = calls[(at >= 0) & (at < 8)]
    assert len(measured) >= 75
    assert _last(metrics, "proxy_connections_total") == len(calls)
    low, high = bounds(at, ones, (0, 8), sent=True)
    assert low <= db["connections"] <= high
    up, down = '{"stream":"upstream"}', '{"stream":"downstream"}'
    assert _last(metrics, "proxy_bytes_total", up) == calls["sent"].sum()
    assert _last(metrics, "proxy_bytes_total", down) == calls["received"].sum()
    low, high = bounds(at, calls["sent"], (0, 8), sent=True)
    assert low <= db["bytes_upstream"] <= high
    low, high = bounds(back, calls["received"], (0, 8), sent=False)
    assert low <= db["bytes_downstream"] <= high
    latency = '{"toxic":"latency"}'
    assert db["toxics_applied"] == _last(metrics, "proxy_toxics_applied_total", latency)
    assert db["upstream_errors"] == 0 == _last(metrics, "proxy_upstream_errors_total")
    # In the phase: its connections, each hit by the toxic; no toxic outside it.
    low, high = bounds(at, ones, (3, 6), sent=True)
    assert low <= db["connections_fault"] <= high
    assert low <= db["toxics_applied_fault"] <= high
    assert low <= db["toxics_applied"] <= high
    low, high = bounds(back, calls["received"], (3, 6), sent=False)
    assert low <= db["bytes_downstream_fault"] <= high
    assert db["toxics_in_force_max_fault"] == 1
    phase = build["phases"]["db-slow"]["dependencies"]["db"]
    assert phase["connections"] == db["connections_fault"]
    assert phase["bytes_downstream"] == db["bytes_downstream_fault"]
    # The headline table says them.
    assert "db connections (" in (run_dir / "report.md").read_text()
    assert "3 gates" in done.stdout or "3/3" in done.stdout, done.stdout[-2000:]
