"""The gateway's catalogue route: product reads the same fault schedule can fault.

Pure decisions first (which faults reach a read, its key), then the real
gateway process: a read under a timeout and an error against a healthy one,
the same fates in two gateways, every call in the ledger with its path, and a
ledger written before the ``path`` column still read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.gateway.decide import (
    APPROVE_PATH,
    Call,
    catalogue_key,
    catalogue_product,
    decide,
    matches,
)
from harness.results.io import LEDGER_DTYPES, ledger_from_csv
from harness.scenario.faults import FaultOverride, Match
from targets.shop.pg_client import PgClient, PgServerError, PgTimeout
from tests.conftest import PgServer
from tests.gateway.test_integration_pg import PgProcess, scenario_file

pytestmark = pytest.mark.integration

Factory = Callable[[str], PgServer]
READ = Call("/v1/catalogue/products/7")
PAY = Call(APPROVE_PATH)


def _faults(*faults: dict[str, Any]) -> list[Any]:
    return list(FaultOverride.model_validate({"faults": list(faults)}).faults)


# --- decisions ---------------------------------------------------------------------------


def test_a_fault_without_match_applies_to_every_route() -> None:
    assert matches(None, READ) and matches(None, PAY)
    for spelled in ({"type": "timeout"}, {"type": "error", "status": 503}, {"type": "reset"}):
        faults = _faults(spelled)
        assert decide(faults, 1, "product-7", 1, READ).fault == spelled["type"]
        assert decide(faults, 1, "pay-1", 1, PAY).fault == spelled["type"]


def test_match_path_keeps_a_fault_on_payments_or_on_reads() -> None:
    on_payments = _faults({"type": "error", "match": {"path": "/v1/payments"}})
    assert decide(on_payments, 1, "product-7", 1, READ).kind == "respond"
    assert decide(on_payments, 1, "product-7", 1, READ).fault == "healthy"
    assert decide(on_payments, 1, "pay-1", 1, PAY).status == 500
    on_reads = _faults({"type": "timeout", "match": {"path": "/v1/catalogue"}})
    assert decide(on_reads, 1, "product-7", 1, READ).kind == "hang"
    assert decide(on_reads, 1, "pay-1", 1, PAY).fault == "healthy"
    assert not matches(Match(path="/v1/catalogue/products/70"), READ)  # a prefix at a "/"
    assert matches(Match(path="/v1/catalogue/products/7"), READ)


def test_a_read_is_keyed_by_its_product_and_request() -> None:
    assert catalogue_key(7) == "product-7"
    assert catalogue_key(7, "req-1") == "product-7/req-1"
    assert catalogue_product(7) == {"id": 7, "name": "product-7", "price": 1700}
    assert catalogue_product(97)["price"] == 1000  # the shop's own products agree


# --- the real gateway --------------------------------------------------------------------


def _client(url: str) -> PgClient:
    return PgClient(url, connect_timeout_s=0.5, read_timeout_s=0.3, max_connections=10)


def test_a_read_under_a_timeout_and_an_error_against_a_healthy_gateway(
    pg_factory: Factory,
) -> None:
    healthy = pg_factory("{type: healthy}")
    hung = pg_factory("{type: timeout}")
    broken = pg_factory("{type: error, status: 503}")
    payments_only = pg_factory("{type: timeout, match: {path: /v1/payments}}")

    with _client(healthy.url) as ok:
        assert ok.product(7, "r1") == {"id": 7, "name": "product-7", "price": 1700}
        assert ok.product(8) == catalogue_product(8)
    with _client(hung.url) as c:
        started = time.monotonic()
        with pytest.raises(PgTimeout):
            c.product(7, "r1")
        assert 0.25 < time.monotonic() - started < 2.0  # the client's read timeout, not longer
    with _client(broken.url) as c, pytest.raises(PgServerError) as err:
        c.product(7, "r1")
    assert err.value.status == 503
    with _client(payments_only.url) as c:
        assert c.product(7, "r1")["id"] == 7  # the fault is kept on payments
        with pytest.raises(PgTimeout):
            c.approve("k1", 100, "o1")
    assert healthy.metric("pg_calls_received_total") == 2
    assert broken.metric("pg_calls_total", fault="error", outcome="503") == 1

    bad = httpx.get(f"{healthy.url}/v1/catalogue/products/abc", timeout=5)
    assert bad.status_code == 404  # no such route: not a read


def test_same_reads_meet_the_same_fate_in_two_gateways(pg_factory: Factory) -> None:
    a = pg_factory("{type: error, probability: 0.5, status: 503}")
    b = pg_factory("{type: error, probability: 0.5, status: 503}")

    def statuses(server: PgServer) -> list[int]:
        with httpx.Client(base_url=server.url, timeout=5) as c:
            out = []
            for i in range(60):
                path = f"/v1/catalogue/products/{i % 7}"
                out.append(c.get(path, headers={"X-Request-Id": f"r{i}"}).status_code)
                if i % 10 == 0:  # the same read again: its attempt 2 has a fate of its own
                    out.append(c.get(path, headers={"X-Request-Id": f"r{i}"}).status_code)
            # An Idempotency-Key names a read as well as X-Request-Id does.
            out += [
                c.get(
                    f"/v1/catalogue/products/{i}", headers={"Idempotency-Key": f"k{i}"}
                ).status_code
                for i in range(20)
            ]
            return out

    first, second = statuses(a), statuses(b)
    assert first == second
    assert 15 < first.count(503) < 71


@pytest.fixture
def gateways() -> Iterator[list[PgProcess]]:
    started: list[PgProcess] = []
    yield started
    for g in started:
        g.stop()


def test_every_call_is_in_the_ledger_with_its_path(
    tmp_path: Path, gateways: list[PgProcess]
) -> None:
    phases = "    - {name: only, start: 0s, duration: 1h, fault: {type: healthy}}\n"
    ledger = tmp_path / "ledger.csv"
    g = PgProcess(scenario_file(tmp_path, phases), t0=time.time(), ledger=ledger)
    gateways.append(g)
    g.wait_ready()
    with httpx.Client(base_url=g.url, timeout=5) as c:
        assert c.get("/v1/catalogue/products/3", headers={"X-Request-Id": "r1"}).status_code == 200
        assert c.get("/v1/catalogue/products/3", headers={"X-Request-Id": "r1"}).status_code == 200
        assert c.get("/v1/catalogue/products/4").status_code == 200
        forced = {"X-Harness-Fault": '{"type": "error", "status": 500}'}
        assert c.get("/v1/catalogue/products/5", headers=forced).status_code == 500
        bad = {"X-Harness-Fault": '{"type": "nope"}'}
        assert c.get("/v1/catalogue/products/6", headers=bad).status_code == 400
        paid = c.post(APPROVE_PATH, headers={"Idempotency-Key": "p1"}, json={"amount": 1})
        assert paid.status_code == 200
    assert g.stop() == 0
    frame = ledger_from_csv(ledger)
    assert list(frame.columns) == list(LEDGER_DTYPES)
    seen = [(r.key, r.attempt, r.status, r.decision, r.path) for r in frame.itertuples()]
    assert seen == [
        ("product-3/r1", 1, 200, "served", "/v1/catalogue/products/3"),
        ("product-3/r1", 2, 200, "served", "/v1/catalogue/products/3"),
        ("product-4", 1, 200, "served", "/v1/catalogue/products/4"),
        ("product-5", 1, 500, "error", "/v1/catalogue/products/5"),
        ("product-6", 0, 400, "none", "/v1/catalogue/products/6"),
        ("p1", 1, 200, "approved", APPROVE_PATH),
    ]


def test_a_ledger_written_before_the_path_column_is_still_read(tmp_path: Path) -> None:
    old = tmp_path / "pg-ledger.csv"
    old.write_text(
        "arrival,key,attempt,phase,fault,status,decision,duration_s,client_gone\n"
        "1.5,k1,1,only,healthy,200,approved,0.001,false\n"
        "2.5,k1,2,only,error,503,error,0.002,true\n"
        "3.5,k2,1,on"  # cut short by a kill
    )
    frame = ledger_from_csv(old)
    assert list(frame["key"]) == ["k1", "k1"]
    assert set(frame["path"]) == {APPROVE_PATH}  # all the gateway served then
    assert frame.dtypes.astype(str).to_dict() == LEDGER_DTYPES
    new = tmp_path / "new.csv"
    new.write_text(
        "arrival,key,attempt,phase,fault,status,decision,duration_s,client_gone,path\n"
        "1.5,product-1,1,only,healthy,200,served,0.001,false,/v1/catalogue/products/1\n"
        "2.5,k1,1,only,healthy,200,approved,0.001,false"  # cut before its path
    )
    assert list(ledger_from_csv(new)["path"]) == ["/v1/catalogue/products/1"]
