"""The scraper: every scrape kept, failures counted, the newest one read for progress."""

import httpx

from harness.analysis.series import Selector
from harness.run.scraper import Scraper

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
