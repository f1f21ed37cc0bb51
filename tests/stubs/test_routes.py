"""A scenario's stub routes (harness.stubs.model): matching, rendering, and the refusals."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from harness.stubs import (
    StubAnswer,
    StubRequest,
    StubRoute,
    StubRoutesError,
    Stubs,
    unmatched_answer,
)

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def stubs(text: str) -> Stubs:
    routes = [
        StubRoute.model_validate(r, by_alias=True, by_name=False) for r in yaml.safe_load(text)
    ]
    return Stubs.from_routes(routes, "dependencies.owners.routes")


def request(
    method: str = "GET",
    path: str = "/",
    query: dict[str, list[str]] | None = None,
    headers: dict[str, str] | None = None,
    body: Any = b"",
) -> StubRequest:
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return StubRequest(method, path, query or {}, headers or {}, data)


def answer(s: Stubs, req: StubRequest) -> StubAnswer | None:
    matched = s.match(req)
    return None if matched is None else matched.render(req, random.Random(1), NOW)


OWNERS = """
- name: owner
  request:
    method: GET
    path: /owners/{ownerId}
    query: {page: "1", q: {matches: "^a.*"}}
    headers: {Authorization: {matches: "^Bearer .*"}}
  response:
    status: 200
    headers: {X-Owner: "{{request.path.ownerId}}"}
    body: {id: "{{request.path.ownerId}}", name: Jean, tags: ["{{request.query.q}}", 3]}
    delay: 20ms
- request: {method: POST, path: /orders, body: [{json-path: "$.items[?(@.qty > 0)]"}]}
  response: {status: 201, body-text: "made {{jsonPath request.body '$.items[0].sku'}}"}
- request: {method: POST, path: /orders}
  response: {status: 422, body-text: "no items"}
- request: {path-pattern: "/health(/.*)?"}
  response: {fault: reset}
"""


def test_a_route_matches_and_renders() -> None:
    s = stubs(OWNERS)
    req = request(
        path="/owners/7",
        query={"page": ["1"], "q": ["abc"]},
        headers={"authorization": "Bearer t"},
    )
    matched = s.match(req)
    assert matched is not None and matched.route_id == "owner"
    assert dict(matched.path_params) == {"ownerId": "7"}
    got = matched.render(req, random.Random(1), NOW)
    assert got.status == 200
    assert ("X-Owner", "7") in got.headers
    assert ("Content-Type", "application/json") in got.headers
    assert json.loads(got.body) == {"id": "7", "name": "Jean", "tags": ["abc", 3]}
    assert got.delay_s == pytest.approx(0.02)
    assert got.fault is None


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ({"page": ["2"], "q": ["abc"]}, {"Authorization": "Bearer t"}),  # page not equal
        ({"page": ["1"], "q": ["xbc"]}, {"Authorization": "Bearer t"}),  # q does not match
        ({"page": ["1"], "q": ["abc"]}, {"Authorization": "Basic t"}),  # header does not match
        ({"page": ["1"], "q": ["abc"]}, {}),  # header missing
        ({"q": ["abc"]}, {"Authorization": "Bearer t"}),  # page missing
    ],
)
def test_each_condition_is_required(query: dict[str, list[str]], headers: dict[str, str]) -> None:
    s = stubs(OWNERS)
    assert s.match(request(path="/owners/7", query=query, headers=headers)) is None


def test_routes_are_tried_in_order_and_body_matchers_choose() -> None:
    s = stubs(OWNERS)
    made = answer(s, request("POST", "/orders", body={"items": [{"qty": 2, "sku": "A1"}]}))
    assert made is not None and (made.status, made.body) == (201, b"made A1")
    refused = answer(s, request("POST", "/orders", body={"items": [{"qty": 0}]}))
    assert refused is not None and refused.status == 422
    assert s.match(request("GET", "/orders")) is None  # method


def test_path_pattern_any_method_and_fault() -> None:
    s = stubs(OWNERS)
    for path in ("/health", "/health/deep"):
        got = answer(s, request("DELETE", path))
        assert got is not None and got.fault == "reset"
    assert s.match(request("GET", "/healthz")) is None


def test_default_route_ids_are_unique() -> None:
    s = stubs(OWNERS)
    assert [r.route_id for r in s] == [
        "owner",
        "POST /orders",
        "POST /orders #2",
        "ANY /health(/.*)?",
    ]


@pytest.mark.parametrize(
    ("spec", "body", "matches"),
    [
        ({"equal-to-json": {"a": [1, 2]}}, {"a": [1, 2]}, True),
        ({"equal-to-json": {"a": [1, 2]}}, {"a": [2, 1]}, False),
        ({"equal-to-json": {"a": [1, 2]}, "ignore-array-order": True}, {"a": [2, 1]}, True),
        ({"equal-to-json": {"a": 1}}, {"a": 1, "b": 2}, False),
        ({"equal-to-json": {"a": 1}, "ignore-extra-elements": True}, {"a": 1, "b": 2}, True),
        ({"equal-to-json": {"a": 1}}, {"a": 1.0}, True),
        ({"equal-to-json": {"a": 1}}, {"a": True}, False),
        ({"contains": "x"}, "axb", True),
        ({"equal-to": '"axb"'}, "axb", True),
        ({"matches": '.*b"'}, "axb", True),
        ({"json-path": "$.a", "equal-to": "1"}, {"a": 1}, True),
        ({"json-path": "$.a", "matches": "[0-9]+"}, {"a": "x"}, False),
        ({"json-path": "$.missing"}, {"a": 1}, False),
    ],
)
def test_body_matchers(spec: dict[str, Any], body: Any, matches: bool) -> None:
    s = Stubs.from_routes(
        [StubRoute.model_validate({"request": {"path": "/b", "body": [spec]}}, by_alias=True)],
        "r",
    )
    assert (s.match(request("POST", "/b", body=body)) is not None) is matches


def test_query_absent_and_case_insensitive() -> None:
    s = stubs(
        """
- request:
    path: /q
    query: {debug: {absent: true}}
    headers: {X-Mode: {equal-to: FAST, case-insensitive: true}}
"""
    )
    assert s.match(request(path="/q", headers={"x-mode": "fast"})) is not None
    assert s.match(request(path="/q", query={"debug": ["1"]}, headers={"x-mode": "fast"})) is None


def test_unmatched_is_answered_as_wiremock() -> None:
    got = unmatched_answer(request("GET", "/nothing", query={"x": ["1"]}))
    assert got.status == 404
    assert got.headers == (("Content-Type", "text/plain;charset=UTF-8"),)
    assert got.body.decode().strip().startswith("Request was not matched")
    assert "GET /nothing?x=1" in got.body.decode()


def problems(text: str) -> list[str]:
    with pytest.raises(StubRoutesError) as caught:
        stubs(text)
    return [str(p) for p in caught.value.problems]


def test_a_template_naming_a_parameter_the_path_lacks_is_refused_with_its_field() -> None:
    found = problems(
        """
- request: {path: "/owners/{ownerId}"}
  response: {body: {id: "{{request.path.ownerid}}"}, headers: {X-A: "{{request.nope}}"}}
"""
    )
    assert found == [
        "dependencies.owners.routes[0].response.headers.X-A: request.nope is not in the "
        "supported subset (url, path, pathSegments, query, headers, method, body)",
        "dependencies.owners.routes[0].response.body.id: request.path.ownerid: the path has no "
        "parameter 'ownerid' (it has: ownerId; names are case-sensitive)",
    ]


def test_a_shadowed_route_is_refused() -> None:
    found = problems(
        """
- request: {path: "/owners/{id}"}
- request: {method: GET, path: "/owners/{ownerId}", query: {a: "1"}}
- request: {method: GET, path: "/owners/{ownerId}/pets"}
"""
    )
    assert len(found) == 1
    assert found[0].startswith(
        "dependencies.owners.routes[1].request.path: never answered: route 0"
    )
    # an earlier route with a condition shadows nothing; a later catch-all is fine
    stubs(
        """
- request: {method: GET, path: /x, query: {a: "1"}}
- request: {method: GET, path: /x}
- request: {method: POST, path: /x}
"""
    )


def test_duplicate_names_are_refused() -> None:
    found = problems(
        """
- {name: a, request: {path: /x}}
- {name: a, request: {path: /y}}
"""
    )
    assert found == ["dependencies.owners.routes[1].name: name 'a' is already route 0's"]


@pytest.mark.parametrize(
    ("route", "why"),
    [
        ({"request": {"path-pattern": "/x("}}, "invalid regular expression"),
        ({"request": {"path": "/x", "query": {"a": {"matches": "("}}}}, "invalid regular"),
        ({"request": {}}, "give path"),
        ({"request": {"path": "/x", "path-pattern": "/x"}}, "give path"),
        ({"request": {"path": "x"}}, "starts with '/'"),
        ({"request": {"path": "/a/{id}/{id}"}}, "appears twice"),
        (
            {"request": {"path": "/x", "query": {"a": {"equal-to": "1", "contains": "1"}}}},
            "exactly one",
        ),
        ({"request": {"path": "/x", "body": [{"json-path": "$.[["}]}}, "does not parse"),
        ({"request": {"path": "/x"}, "response": {"body": {}, "body-text": "x"}}, "not both"),
        ({"request": {"path": "/x"}, "response": {"status": 99}}, "greater than or equal"),
        ({"request": {"path": "/x"}, "response": {"delay": "1h"}}, "less than or equal"),
        ({"request": {"path": "/x", "bogus": 1}}, "Extra inputs"),
    ],
)
def test_bad_yaml_routes_are_refused(route: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why.replace("(", r"\(")):
        StubRoute.model_validate(route, by_alias=True, by_name=False)
