"""The scraper: every scrape kept, failures counted, the newest one read for progress."""

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from harness.analysis.series import Selector
from harness.core.errors import InputError
from harness.run.scraper import Scraper, window_edges
from harness.scenario.loader import load_scenario_text

SHOP = """\
# TYPE shop_workers_busy gauge
shop_workers_busy {busy}
# TYPE resilience4j_circuitbreaker_state gauge
resilience4j_circuitbreaker_state{{name="pgClient",state="closed"}} 1
resilience4j_circuitbreaker_state{{name="pgClient",state="open"}} 0
"""


def test_scraper_keeps_every_scrape_and_counts_failures() -> None:
    calls = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if request.url.host == "pg.invalid":
            return httpx.Response(500)
        return httpx.Response(200, text=SHOP.format(busy=calls["n"]))

    clock = iter(range(100))
    scraper = Scraper(
        {"target": "http://target.invalid/metrics", "pg": "http://pg.invalid/metrics"},
        1.0,
        transport=httpx.MockTransport(handler),
        clock=lambda: float(next(clock)),
    )
    scraper.scrape_once()
    scraper.scrape_once()
    frame = scraper.frame()
    busy = frame[frame.series == "shop_workers_busy"]
    assert list(busy["value"]) == [1.0, 3.0]
    assert scraper.failures == {"target": 0, "pg": 2}
    assert scraper.latest_value("target", Selector("shop_workers_busy")) == 3.0
    assert scraper.latest_state("target", "resilience4j_circuitbreaker_state") == "closed"
    scraper.stop()


COUNTER = """\
# TYPE pg_calls_received counter
pg_calls_received_total{{phase="outage"}} {n}
"""


def _counting_scraper(interval_s: float) -> tuple[Scraper, dict[str, int]]:
    """A scraper whose sources answer with how many times they were asked (a counter)."""
    asked = {"target": 0, "pg": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        source = request.url.host.split(".")[0]
        asked[source] += 1
        return httpx.Response(200, text=COUNTER.format(n=asked[source]))

    scraper = Scraper(
        {"target": "http://target.invalid/metrics", "pg": "http://pg.invalid/metrics"},
        interval_s,
        transport=httpx.MockTransport(handler),
    )
    return scraper, asked


def test_stop_final_scrapes_every_source_once_more_after_the_loop() -> None:
    # A long interval: the loop scrapes once at its start and would not again before stop.
    scraper, asked = _counting_scraper(60.0)
    scraper.start()
    deadline = time.monotonic() + 5
    while sum(asked.values()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert asked == {"target": 1, "pg": 1}
    before_stop = time.time()
    scraper.stop(final=True)
    assert asked == {"target": 2, "pg": 2}
    frame = scraper.frame()
    for source in ("target", "pg"):
        rows = frame[frame["source"] == source]
        assert rows["value"].tolist() == [1.0, 2.0]  # the final reading is the newest
        assert rows["t"].iloc[-1] >= before_stop  # taken after the load finished
    scraper.stop(final=True)  # a second stop does nothing
    assert asked == {"target": 2, "pg": 2}


def test_stop_without_final_takes_no_more_scrapes() -> None:
    scraper, asked = _counting_scraper(60.0)
    scraper.scrape_once()
    scraper.stop()
    assert asked == {"target": 1, "pg": 1}


OPOSSUM = """\
# TYPE circuit counter
circuit{{name="vendor",event="open"}} {opens}
circuit{{name="vendor",event="fire"}} {fires}
# TYPE busy gauge
busy {fires}
"""


def test_with_a_spool_memory_keeps_only_the_state_series_and_the_file_keeps_everything(
    tmp_path: Path,
) -> None:
    from harness.analysis.series import preset_named

    counts = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        counts["n"] += 1
        return httpx.Response(200, text=OPOSSUM.format(opens=counts["n"] // 3, fires=counts["n"]))

    clock = iter(range(1000))
    spool = tmp_path / "metrics.csv"
    opossum = preset_named("opossum")
    scraper = Scraper(
        {"target": "http://target.invalid/metrics"},
        1.0,
        transport=httpx.MockTransport(handler),
        clock=lambda: float(next(clock)),
        spool=spool,
        history=opossum,
    )
    for _ in range(9):
        scraper.scrape_once()
    # In memory: the breaker's event series only (what the live line's state needs).
    assert scraper.rows and {row[2] for row in scraper.rows} <= set(
        opossum.breaker_state.spellings() if opossum.breaker_state else ()
    )
    assert scraper.breaker_state("target", opossum) == "open"
    # On disk, as each scrape came: every sample, appended and flushed before stop().
    assert len(spool.read_text().splitlines()) == 1 + 9 * 3
    scraper.stop()
    frame = scraper.frame()
    assert len(frame) == 27 and list(frame.columns) == ["t", "source", "series", "labels", "value"]
    fires = frame[frame.labels.str.contains('"fire"')]
    assert list(fires["value"]) == [float(n) for n in range(1, 10)]
    assert list(frame[frame.series == "busy"]["t"]) == [float(t) for t in range(9)]


def test_scrape_at_reads_every_source_at_each_edge_between_the_interval_s_scrapes() -> None:
    # A long interval: after its first scrape the loop would sleep a minute; the edges
    # (a window's start, a phase's start, the load's stop) wake it, each once.
    scraper, asked = _counting_scraper(60.0)
    scraper.start()
    now = time.time()
    edges = [now + 0.2, now + 0.4, now + 0.6]
    scraper.scrape_at(edges)
    deadline = time.monotonic() + 10
    while sum(asked.values()) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    scraper.stop()
    assert asked == {"target": 4, "pg": 4}  # the loop's first scrape and the three edges
    times = sorted(scraper.frame().query("source == 'target'")["t"].unique())
    assert len(times) == 4
    for edge, t in zip(edges, times[1:], strict=True):
        assert t >= edge  # never before its edge (so nothing after the edge is counted before)


def test_window_edges_are_the_window_s_and_each_phase_s_inside_it() -> None:
    scenario = load_scenario_text(
        """\
name: edges
duration: 20s
traffic: {products: {path: /api/products/1, rate: 5}}
pg:
  phases:
    - {name: baseline, start: 0s, duration: 5s, fault: {type: healthy}}
    - {name: outage, start: 5s, duration: 10s, fault: {type: timeout}}
builds: {b: {profile: retry-only}}
"""
    ).scenario
    assert window_edges(scenario, 100.0) == [100.0, 105.0, 115.0, 120.0]


def test_each_failed_scrape_is_kept_with_its_time_and_why() -> None:
    """A real server on loopback that answers too late, one that answers 500, a port where
    nothing listens: each failed scrape is kept as timeout, status or refused, with when it
    was tried, so a gap can be said as the target's (it was tried) or the harness's (not)."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/slow":
                release.wait(5)  # the scrape's timeout (0.5 s) ends first
            self.send_response(500 if self.path == "/broken" else 200)
            self.end_headers()
            self.wfile.write(SHOP.format(busy=1).encode())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    base = f"http://127.0.0.1:{server.server_address[1]}"
    scraper = Scraper(
        {
            "target": f"{base}/slow",
            "pg": f"{base}/broken",
            "replica-1": f"http://127.0.0.1:{closed.getsockname()[1]}/metrics",
            "replica-2": f"{base}/metrics",
        },
        1.0,
        timeout_s=0.5,
    )
    try:
        began = time.time()
        scraper.scrape_once()
        assert scraper.timeout_s == 0.5
        whys = {f.source: f.why for f in scraper.failed}
        assert whys == {"target": "timeout", "pg": "status", "replica-1": "refused"}
        slow = next(f for f in scraper.failed if f.source == "target")
        assert began <= slow.start and slow.end - slow.start >= 0.5
        assert scraper.failures == {"target": 1, "pg": 1, "replica-1": 1, "replica-2": 0}
        assert scraper.latest_at("replica-2") is not None and scraper.latest_at("target") is None
    finally:
        release.set()
        scraper.stop()
        server.shutdown()
        server.server_close()
        closed.close()


def test_a_scrape_timeout_longer_than_the_interval_is_refused_at_its_line() -> None:
    loaded = load_scenario_text(
        "name: s\nduration: 10s\ntraffic: {a: {path: /a, rate: 1}}\n"
        "builds: {b: {command: [x, '{port}']}}\nmetrics: {interval: 1s, timeout: 1s}\n"
    )
    assert loaded.scenario.metrics.scrape_timeout() == 1.0
    try:
        load_scenario_text(
            "name: s\nduration: 10s\ntraffic: {a: {path: /a, rate: 1}}\n"
            "builds: {b: {command: [x, '{port}']}}\nmetrics: {interval: 1s, timeout: 2s}\n"
        )
    except InputError as exc:
        assert ":5:" in str(exc) and "metrics.timeout" in str(exc), str(exc)
        assert "at most the interval" in str(exc)
    else:
        raise AssertionError("a timeout past the interval was accepted")
