"""harness.stubs against the real WireMock: the same mappings, the same requests, the same answers.

A corpus of mappings covering the supported subset is served by WireMock's standalone jar
(``make wiremock-jar``: fetched once from Maven Central) and loaded by ``load_mappings``;
each request goes to both, and the status, the status text, the headers the mapping sets
and the body (parsed when JSON; random values and times compared by their shape) must
agree. Faults compare as "the connection broke" against our ``fault``. Skipped, saying
so, without java or mvn. An integration test: it starts a JVM (``tests/lanes.py``: heavy).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest

from harness.stubs import StubAnswer, StubRequest, Stubs, load_mappings, unmatched_answer
from tests.conftest import ROOT, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("java") is None or shutil.which("mvn") is None,
        reason="needs java and mvn to fetch and run WireMock's standalone jar",
    ),
]

JAR = ROOT / "build" / "wiremock" / "wiremock-standalone-3.13.2.jar"
TEMPLATE = ["response-template"]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
SHAPES = {
    "@alnum8": r"[a-z0-9]{8}",
    "@uuid": UUID,
    "@numeric5": r"[0-9]{5}",
    "@hex6": r"[0-9A-F]{6}",
    "@date": r"\d{4}-\d{2}-\d{2}",
    "@iso": r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z",
    "@epoch": r"\d{13}",
}
"""Values drawn or timed: compared by their shape (the text after the marker)."""


def m(request: dict[str, Any], response: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"request": request, "response": response, **more}


CORPUS: dict[str, Any] = {
    "owners.json": {
        "mappings": [
            m(
                {"method": "GET", "urlPathTemplate": "/owners/{ownerId}"},
                {
                    "status": 200,
                    "headers": {
                        "Content-Type": "application/json",
                        "X-Owner": "{{request.path.ownerId}}",
                    },
                    "body": '{"id": "{{request.path.ownerId}}", "seg": "{{request.path.[0]}}", '
                    '"q": "{{request.query.x}}", "q1": "{{request.query.x.[1]}}", '
                    '"h": "{{request.headers.X-Req}}", "url": "{{request.url}}", '
                    '"m": "{{request.method}}", "ps": "{{request.pathSegments.[1]}}", '
                    '"path": "{{request.path}}", "none": "{{request.headers.Nope}}"}',
                    "transformers": TEMPLATE,
                },
            ),
            m(
                {
                    "method": "GET",
                    "urlPathTemplate": "/owners/{ownerId}/pets",
                    "pathParameters": {"ownerId": {"matches": "[0-9]+"}},
                },
                {
                    "status": 200,
                    "jsonBody": {"pets": ["{{request.path.ownerId}}"]},
                    "transformers": TEMPLATE,
                },
            ),
            m(
                {"method": "GET", "urlPath": "/owners"},
                {"status": 200, "jsonBody": {"all": True, "n": [1, 2]}},
            ),
            m(
                {
                    "method": "GET",
                    "urlPath": "/owners",
                    "queryParameters": {"page": {"equalTo": "2"}},
                },
                {"status": 206, "body": "page two", "statusMessage": "Partial Owners"},
            ),
        ]
    },
    "matching.json": {
        "mappings": [
            m({"method": "GET", "url": "/exact?a=1&b=two"}, {"status": 201, "body": "exact"}),
            m(
                {"method": "GET", "urlPattern": "/pattern/[a-z]+\\?id=[0-9]+"},
                {"status": 202, "body": "pattern"},
            ),
            m(
                {"method": "ANY", "urlPathPattern": "/any/.*"},
                {"status": 203, "body": "any {{request.method}}"},
            ),
            m(
                {
                    "method": "GET",
                    "urlPath": "/query",
                    "queryParameters": {
                        "mode": {"equalTo": "FAST", "caseInsensitive": True},
                        "tag": {"contains": "ab"},
                        "n": {"doesNotMatch": "[0-9]+"},
                        "debug": {"absent": True},
                    },
                    "headers": {"Accept": {"matches": ".*json.*"}, "X-Trace": {"contains": "t-"}},
                },
                {"status": 200, "body": "query ok"},
            ),
            m({"method": "GET", "urlPath": "/prio"}, {"status": 200, "body": "low"}, priority=9),
            m({"method": "GET", "urlPath": "/prio"}, {"status": 200, "body": "high"}, priority=1),
            m({"method": "GET", "urlPath": "/order"}, {"status": 200, "body": "first"}),
            m({"method": "GET", "urlPath": "/order"}, {"status": 200, "body": "second"}),
        ]
    },
    "bodies.json": {
        "mappings": [
            m(
                {
                    "method": "POST",
                    "urlPath": "/json",
                    "bodyPatterns": [
                        {"equalToJson": {"a": [1, 2], "b": "x"}, "ignoreArrayOrder": True}
                    ],
                },
                {"status": 200, "body": "json order"},
            ),
            m(
                {
                    "method": "POST",
                    "urlPath": "/json",
                    "bodyPatterns": [{"equalToJson": '{"a": 1}', "ignoreExtraElements": True}],
                },
                {"status": 200, "body": "json extra"},
            ),
            m(
                {
                    "method": "POST",
                    "urlPath": "/path",
                    "bodyPatterns": [{"matchesJsonPath": "$.items[?(@.qty > 0)]"}],
                },
                {"status": 200, "body": "has items"},
            ),
            m(
                {
                    "method": "POST",
                    "urlPath": "/path",
                    "bodyPatterns": [
                        {"matchesJsonPath": {"expression": "$.kind", "equalTo": "card"}}
                    ],
                },
                {"status": 200, "body": "card"},
            ),
            m(
                {
                    "method": "POST",
                    "urlPath": "/text",
                    "bodyPatterns": [
                        {"contains": "hello"},
                        {"matches": "[a-z ]+"},
                        {"doesNotMatch": ".*bye.*"},
                    ],
                },
                {"status": 200, "body": "text ok"},
            ),
            m(
                {
                    "method": "POST",
                    "urlPath": "/equal",
                    "bodyPatterns": [{"equalTo": "exactly this"}],
                },
                {"status": 200, "body": "equal"},
            ),
            m(
                {"method": "POST", "urlPath": "/echo"},
                {
                    "status": 200,
                    "headers": {"Content-Type": "application/json"},
                    "body": '{"a": "{{jsonPath request.body \'$.a\'}}", '
                    '"n": "{{jsonPath request.body \'$.n\'}}", '
                    '"miss": "{{jsonPath request.body \'$.nope\'}}", "raw": {{{request.body}}} }',
                    "transformers": TEMPLATE,
                },
            ),
        ]
    },
    "responses.json": {
        "mappings": [
            m(
                {"method": "GET", "urlPath": "/b64"},
                {"status": 200, "base64Body": "aGVsbG8gd29ybGQ="},
            ),
            m(
                {"method": "GET", "urlPath": "/file"},
                {
                    "status": 200,
                    "bodyFileName": "owner.json",
                    "headers": {"Content-Type": "application/json"},
                    "transformers": TEMPLATE,
                },
            ),
            m(
                {"method": "GET", "urlPath": "/raw"},
                {"status": 200, "body": "{{request.path}} as written"},
            ),
            m(
                {"method": "GET", "urlPath": "/loop"},
                {
                    "status": 200,
                    "body": "{{#each request.query.id}}[{{this}}:{{@index}}]{{/each}}"
                    "{{#if request.query.flag}}F{{else}}N{{/if}}"
                    "{{#unless request.query.z}}-no-z{{/unless}}",
                    "transformers": TEMPLATE,
                },
            ),
            m(
                {"method": "GET", "urlPath": "/random"},
                {
                    "status": 200,
                    "headers": {
                        "Content-Type": "application/json",
                        "X-Id": "{{randomValue type='UUID'}}",
                    },
                    "body": '{"alnum8": "{{randomValue length=8 type=\'ALPHANUMERIC\'}}", '
                    '"uuid": "{{randomValue type=\'UUID\'}}", '
                    '"numeric5": "{{randomValue length=5 type=\'NUMERIC\'}}", '
                    '"hex6": "{{randomValue length=6 type=\'HEXADECIMAL\' uppercase=true}}", '
                    '"date": "{{now format=\'yyyy-MM-dd\'}}", "iso": "{{now}}", '
                    '"epoch": "{{now format=\'epoch\'}}"}',
                    "transformers": TEMPLATE,
                },
            ),
            m(
                {"method": "GET", "urlPath": "/multi"},
                {"status": 200, "headers": {"X-Many": ["a", "b"]}, "body": "m"},
            ),
            m({"method": "GET", "urlPath": "/reset"}, {"fault": "CONNECTION_RESET_BY_PEER"}),
            m({"method": "GET", "urlPath": "/empty"}, {"fault": "EMPTY_RESPONSE"}),
            m(
                {"method": "GET", "urlPath": "/slow"},
                {"status": 200, "body": "slow", "fixedDelayMilliseconds": 30},
            ),
        ]
    },
}
FILES = {"owner.json": '{"owner": "{{request.query.name}}", "path": "{{request.path}}"}'}


@dataclass
class Case:
    method: str
    path: str
    query: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    shapes: dict[str, str] = field(default_factory=dict)
    """Body fields (JSON) or headers compared by shape: name -> a key of SHAPES."""


CASES = [
    Case("GET", "/owners/42", [("x", "1"), ("x", "2")], {"X-Req": "r1"}),
    Case("GET", "/owners/7/pets"),
    Case("GET", "/owners/abc/pets"),  # pathParameters refuses: unmatched
    Case("GET", "/owners"),
    Case("GET", "/owners", [("page", "2")]),
    Case("GET", "/exact", [("a", "1"), ("b", "two")]),
    Case("GET", "/exact", [("b", "two"), ("a", "1")]),  # url compares the query as sent
    Case("GET", "/pattern/abc", [("id", "12")]),
    Case("GET", "/pattern/abc", [("id", "x")]),
    Case("DELETE", "/any/thing"),
    Case(
        "GET",
        "/query",
        [("mode", "fast"), ("tag", "xaby"), ("n", "k")],
        {"Accept": "application/json", "X-Trace": "t-1"},
    ),
    Case(
        "GET",
        "/query",
        [("mode", "slow"), ("tag", "xaby"), ("n", "k")],
        {"Accept": "application/json", "X-Trace": "t-1"},
    ),
    Case(
        "GET",
        "/query",
        [("mode", "fast"), ("tag", "xaby"), ("n", "12")],
        {"Accept": "application/json", "X-Trace": "t-1"},
    ),
    Case(
        "GET",
        "/query",
        [("mode", "fast"), ("tag", "xaby"), ("n", "k"), ("debug", "1")],
        {"Accept": "application/json", "X-Trace": "t-1"},
    ),
    Case(
        "GET",
        "/query",
        [("mode", "fast"), ("tag", "xaby"), ("n", "k")],
        {"Accept": "text/html", "X-Trace": "t-1"},
    ),
    Case("GET", "/prio"),
    Case("GET", "/order"),
    Case("POST", "/json", body=b'{"b": "x", "a": [2, 1]}'),
    Case("POST", "/json", body=b'{"a": 1, "c": true}'),
    Case("POST", "/json", body=b'{"a": 2}'),
    Case("POST", "/path", body=b'{"items": [{"qty": 0}, {"qty": 3}]}'),
    Case("POST", "/path", body=b'{"items": [{"qty": 0}], "kind": "card"}'),
    Case("POST", "/path", body=b'{"items": [], "kind": "cash"}'),
    Case("POST", "/text", body=b"hello there"),
    Case("POST", "/text", body=b"hello bye"),
    Case("POST", "/equal", body=b"exactly this"),
    Case("POST", "/equal", body=b"exactly that"),
    Case("POST", "/echo", body=b'{"a": "A", "n": 3.5, "o": {"k": [1]}}'),
    Case("GET", "/b64"),
    Case("GET", "/file", [("name", "Jean")]),
    Case("GET", "/raw"),
    Case("GET", "/loop", [("id", "a"), ("id", "b"), ("flag", "1")]),
    Case("GET", "/loop", [("id", "z")]),
    Case(
        "GET",
        "/random",
        shapes={
            "alnum8": "@alnum8",
            "uuid": "@uuid",
            "numeric5": "@numeric5",
            "hex6": "@hex6",
            "date": "@date",
            "iso": "@iso",
            "epoch": "@epoch",
            "X-Id": "@uuid",
        },
    ),
    Case("GET", "/multi"),
    Case("GET", "/reset"),
    Case("GET", "/empty"),
    Case("GET", "/slow"),
    Case("GET", "/nothing/here", [("x", "1")]),
    Case("PUT", "/owners/42"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wiremock")
    (folder / "mappings").mkdir()
    (folder / "__files").mkdir()
    for name, content in CORPUS.items():
        (folder / "mappings" / name).write_text(json.dumps(content, indent=2))
    for name, text in FILES.items():
        (folder / "__files" / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def wiremock(root: Path) -> Iterator[str]:
    made = subprocess.run(
        ["make", "--no-print-directory", "wiremock-jar"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert made.returncode == 0 and JAR.is_file(), made.stdout + made.stderr
    port = free_port()
    log = (root / "wiremock.log").open("w")
    proc = subprocess.Popen(
        [
            "java",
            "-XX:TieredStopAtLevel=1",
            "-jar",
            str(JAR),
            "--port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "--root-dir",
            str(root),
            "--disable-banner",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/__admin/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return proc.poll() is not None

    try:
        assert wait_for(up, timeout=120) and proc.poll() is None, (
            root / "wiremock.log"
        ).read_text()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def ours(root: Path) -> Stubs:
    return load_mappings(root / "mappings")


def our_answer(stubs: Stubs, case: Case) -> StubAnswer:
    query: dict[str, list[str]] = {}
    for name, value in case.query:
        query.setdefault(name, []).append(value)
    raw = urlencode(case.query, quote_via=quote)
    request = StubRequest(case.method, case.path, query, case.headers, case.body, raw_query=raw)
    matched = stubs.match(request)
    if matched is None:
        return unmatched_answer(request)
    return matched.render(request, random.Random(1), datetime.now(UTC))


def shaped(value: Any, shape: str) -> bool:
    return isinstance(value, str) and re.fullmatch(SHAPES[shape], value) is not None


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.method} {c.path}?{urlencode(c.query)}")
def test_the_same_answer_as_wiremock(wiremock: str, ours: Stubs, case: Case) -> None:
    expected = our_answer(ours, case)
    raw = urlencode(case.query, quote_via=quote)
    url = f"{wiremock}{case.path}" + (f"?{raw}" if raw else "")
    try:
        got = httpx.request(case.method, url, headers=case.headers, content=case.body, timeout=30)
    except httpx.TransportError:
        assert expected.fault in ("reset", "empty"), (
            f"WireMock broke the connection; we answered {expected}"
        )
        return
    assert expected.fault is None, (
        f"WireMock answered {got.status_code}; we break it ({expected.fault})"
    )
    assert got.status_code == expected.status, got.text
    if expected.reason is not None:
        assert got.reason_phrase == expected.reason
    if (
        expected.status == 404
        and expected.headers == unmatched_answer(StubRequest("GET", "/", {}, {}, b"")).headers
    ):
        assert got.headers["content-type"] == "text/plain;charset=UTF-8"
        assert got.text.splitlines()[:3] == expected.body.decode().splitlines()[:3]
        return
    for name in {n for n, _ in expected.headers}:
        ours_values = [v for n, v in expected.headers if n == name]
        theirs = got.headers.get_list(name)
        if name in case.shapes:
            assert all(shaped(v, case.shapes[name]) for v in ours_values + theirs), (
                ours_values,
                theirs,
            )
        else:
            assert theirs == ours_values, name
    try:
        theirs_body: Any = json.loads(got.content)
        ours_body: Any = json.loads(expected.body)
    except ValueError:
        assert got.content == expected.body
        return
    for key, shape in case.shapes.items():
        if isinstance(theirs_body, dict) and key in theirs_body:
            assert shaped(theirs_body.pop(key), shape) and shaped(ours_body.pop(key), shape), key
    assert theirs_body == ours_body
