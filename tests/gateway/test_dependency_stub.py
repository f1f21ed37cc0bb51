"""Integration: the gateway process playing a stub dependency (``routes:`` and a WireMock
``mappings:`` folder), through ``python -m harness.gateway --dependency stub``.

A matched route answers its status, headers and templated body; a call no route matches
gets WireMock's 404 and a ledger row ``unmatched`` with its method and path; the mappings
folder answers through the gateway; a route's own ``delay``/``fault`` and WireMock's
``fixedDelayMilliseconds``/``fault`` apply when no phase fault answers, and a phase fault
that answers comes first.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.gateway.dependency_support import DependencyProcess, scenario

pytestmark = pytest.mark.integration

STUB = """\
  stub:
    call-key: X-Call
    mappings: wiremock/mappings
    routes:
      - name: owner
        request: {method: GET, path: "/api/owners/{ownerId}", query: {expand: pets}}
        response:
          status: 201
          headers: {X-Owner: "{{request.path.ownerId}}", Cache-Control: no-store}
          body: {id: "{{request.path.ownerId}}", expand: "{{request.query.expand}}"}
      - name: slow
        request: {method: GET, path: /slow}
        response: {body-text: slow, delay: 300ms}
      - name: broken
        request: {method: GET, path: /broken}
        response: {fault: reset}
      - name: any
        request: {path: /any}
        response: {body-text: hello}
    phases:
      - name: cases
        start: 0s
        duration: 1h
        faults:
          - {type: error, status: 503, match: {header: {X-Case: error}}}
          - {type: latency, delay: 200ms, match: {header: {X-Case: latency}}}
"""

MAPPINGS = {
    "items.json": {
        "request": {
            "method": "POST",
            "urlPath": "/wm/items",
            "bodyPatterns": [{"matchesJsonPath": "$.name"}],
        },
        "response": {
            "status": 201,
            "headers": {"Content-Type": "application/json", "X-Wm": ["a", "b"]},
            "jsonBody": {"name": "{{jsonPath request.body '$.name'}}"},
            "transformers": ["response-template"],
        },
    },
    "late.json": {
        "request": {"method": "GET", "urlPath": "/wm/late"},
        "response": {"status": 200, "body": "late", "fixedDelayMilliseconds": 300},
    },
    "faults.json": {
        "mappings": [
            {
                "request": {"method": "GET", "urlPath": "/wm/reset"},
                "response": {"fault": "CONNECTION_RESET_BY_PEER"},
            },
            {
                "request": {"method": "GET", "urlPath": "/wm/chunk"},
                "response": {
                    "status": 200,
                    "body": "0123456789",
                    "fault": "MALFORMED_RESPONSE_CHUNK",
                },
            },
        ]
    },
}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DependencyProcess]:
    tmp = tmp_path_factory.mktemp("stub")
    folder = tmp / "wiremock" / "mappings"
    folder.mkdir(parents=True)
    for name, mapping in MAPPINGS.items():
        (folder / name).write_text(json.dumps(mapping))
    process = DependencyProcess(scenario(tmp, STUB), "stub", tmp / "ledger.csv", t0=time.time())
    try:
        yield process.wait_ready()
    finally:
        assert process.stop() == 0


@pytest.fixture
def client(gateway: DependencyProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.url, timeout=10) as c:
        yield c


def _row(gateway: DependencyProcess, key: str) -> dict[str, str]:
    rows = gateway.rows_for(key)
    assert len(rows) == 1, rows
    return rows[0]


def test_a_matched_route_answers_its_status_headers_and_templated_body(
    client: httpx.Client, gateway: DependencyProcess
) -> None:
    answer = client.get("/api/owners/42?expand=pets", headers={"X-Call": "owner"})
    assert answer.status_code == 201
    assert answer.json() == {"id": "42", "expand": "pets"}
    assert answer.headers["x-owner"] == "42" and answer.headers["cache-control"] == "no-store"
    assert answer.headers["content-type"].startswith("application/json")
    row = _row(gateway, "owner")
    assert (row["route"], row["method"], row["path"], row["status"], row["fault"]) == (
        "owner",
        "GET",
        "/api/owners/42",
        "201",
        "healthy",
    )


def test_an_unmatched_call_gets_wiremocks_404_and_an_unmatched_row(
    client: httpx.Client, gateway: DependencyProcess
) -> None:
    answer = client.delete("/api/owners/42?expand=nope", headers={"X-Call": "nobody"})
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "text/plain;charset=UTF-8"
    assert answer.text.strip().startswith("Request was not matched")  # as WireMock lays it out
    assert "DELETE" in answer.text and "/api/owners/42?expand=nope" in answer.text
    row = _row(gateway, "nobody")
    assert (row["route"], row["method"], row["path"], row["status"]) == (
        "unmatched",
        "DELETE",
        "/api/owners/42",
        "404",
    )


def test_a_wiremock_mappings_folder_answers_through_the_gateway(
    client: httpx.Client, gateway: DependencyProcess
) -> None:
    answer = client.post("/wm/items", json={"name": "bolt"}, headers={"X-Call": "wm"})
    assert (answer.status_code, answer.json()) == (201, {"name": "bolt"})
    assert answer.headers.get_list("x-wm") == ["a", "b"]
    assert _row(gateway, "wm")["status"] == "201"
    nameless = client.post("/wm/items", json={"other": 1}, headers={"X-Call": "wm-no-name"})
    assert nameless.status_code == 404 and _row(gateway, "wm-no-name")["route"] == "unmatched"


def test_a_head_answers_no_body_with_the_bodys_length(client: httpx.Client) -> None:
    head = client.head("/any", headers={"X-Call": "head"})
    assert (head.status_code, head.content, head.headers["content-length"]) == (200, b"", "5")


@pytest.mark.parametrize(("path", "own_s"), [("/slow", 0.3), ("/wm/late", 0.3)])
def test_a_routes_own_delay_and_a_phase_latency_add_up(
    client: httpx.Client, gateway: DependencyProcess, path: str, own_s: float
) -> None:
    key = f"delay{path}"
    started = time.monotonic()
    alone = client.get(path, headers={"X-Call": key})
    took = time.monotonic() - started
    assert alone.status_code == 200 and took >= own_s
    assert float(_row(gateway, key)["duration_s"]) >= own_s
    started = time.monotonic()
    both = client.get(path, headers={"X-Call": key + "+latency", "X-Case": "latency"})
    assert both.status_code == 200 and time.monotonic() - started >= own_s + 0.2
    assert _row(gateway, key + "+latency")["fault"] == "latency"


@pytest.mark.parametrize("path", ["/broken", "/wm/reset"])
def test_a_routes_own_reset_unless_a_phase_fault_answers_first(
    client: httpx.Client, gateway: DependencyProcess, path: str
) -> None:
    key = f"reset{path}"
    with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
        client.get(path, headers={"X-Call": key})
    row = _row(gateway, key)
    assert row["status"] == "0" and row["route"] != "unmatched"
    assert (row["fault"], row["decision"]) == ("stub-reset", "none")  # its own, not a phase's
    first = client.get(path, headers={"X-Call": key + "+error", "X-Case": "error"})
    assert first.status_code == 503  # the phase's error answers instead of the stub's reset
    assert _row(gateway, key + "+error")["fault"] == "error"


def test_a_wiremock_malformed_chunk_cuts_the_body(
    client: httpx.Client, gateway: DependencyProcess
) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        client.get("/wm/chunk", headers={"X-Call": "chunk"})
    row = _row(gateway, "chunk")
    assert (row["status"], row["fault"], row["decision"]) == ("0", "stub-truncated", "served")
