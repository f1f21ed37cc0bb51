"""WireMock mappings read as they are (harness.stubs.wiremock): the subset and its refusals."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import InputError
from harness.stubs import StubAnswer, StubRequest, Stubs, load_mappings

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def folder(tmp_path: Path, files: dict[str, Any], bodies: dict[str, bytes] | None = None) -> Path:
    mappings = tmp_path / "mappings"
    mappings.mkdir(parents=True)
    for name, content in files.items():
        path = mappings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    for name, data in (bodies or {}).items():
        (tmp_path / "__files").mkdir(exist_ok=True)
        (tmp_path / "__files" / name).write_bytes(data)
    return mappings


def send(
    s: Stubs,
    method: str = "GET",
    path: str = "/",
    query: dict[str, list[str]] | None = None,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    seed: int = 1,
) -> StubAnswer | None:
    req = StubRequest(method, path, query or {}, headers or {}, body)
    matched = s.match(req)
    return None if matched is None else matched.render(req, random.Random(seed), NOW)


def got(s: Stubs, *args: Any, **kwargs: Any) -> StubAnswer:
    answer = send(s, *args, **kwargs)
    assert answer is not None
    return answer


def one(request: dict[str, Any], response: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"request": request, "response": response or {"status": 200}}


def test_url_matchers(tmp_path: Path) -> None:
    s = load_mappings(
        folder(
            tmp_path,
            {
                "a.json": {
                    "mappings": [
                        one({"url": "/u?x=1"}, {"status": 201}),
                        one({"urlPattern": "/up\\?x=[0-9]+"}, {"status": 202}),
                        one({"urlPath": "/p"}, {"status": 203}),
                        one({"urlPathPattern": "/pp/[a-z]+"}, {"status": 204}),
                        one(
                            {
                                "urlPathTemplate": "/t/{id}",
                                "pathParameters": {"id": {"matches": "[0-9]+"}},
                            },
                            {"status": 205},
                        ),
                    ]
                }
            },
        )
    )

    def status(path: str, query: dict[str, list[str]] | None = None) -> int | None:
        got = send(s, path=path, query=query)
        return None if got is None else got.status

    assert status("/u", {"x": ["1"]}) == 201
    assert status("/u", {"x": ["2"]}) is None
    assert status("/u") is None  # url compares the query too
    assert status("/up", {"x": ["12"]}) == 202
    assert status("/p", {"anything": ["1"]}) == 203
    assert status("/pp/abc") == 204
    assert status("/pp/ab1") is None
    assert status("/t/42") == 205
    assert status("/t/x") is None


def test_query_header_matchers_and_method(tmp_path: Path) -> None:
    s = load_mappings(
        folder(
            tmp_path,
            {
                "m.json": one(
                    {
                        "method": "POST",
                        "urlPath": "/m",
                        "queryParameters": {
                            "a": {"equalTo": "X", "caseInsensitive": True},
                            "b": {"doesNotMatch": "[0-9]+"},
                            "c": {"absent": True},
                        },
                        "headers": {"Accept": {"contains": "json"}},
                    }
                )
            },
        )
    )
    good = {"a": ["x"], "b": ["y"]}
    assert send(s, "POST", "/m", good, {"accept": "application/json"}) is not None
    assert send(s, "GET", "/m", good, {"accept": "application/json"}) is None
    assert send(s, "POST", "/m", {**good, "b": ["1"]}, {"accept": "application/json"}) is None
    assert send(s, "POST", "/m", {**good, "c": ["1"]}, {"accept": "application/json"}) is None
    assert send(s, "POST", "/m", good, {"accept": "text/html"}) is None


def test_body_patterns(tmp_path: Path) -> None:
    s = load_mappings(
        folder(
            tmp_path,
            {
                "b.json": {
                    "mappings": [
                        one(
                            {
                                "urlPath": "/j",
                                "bodyPatterns": [
                                    {"equalToJson": '{"a": [1, 2]}', "ignoreArrayOrder": True}
                                ],
                            },
                            {"status": 201},
                        ),
                        one(
                            {
                                "urlPath": "/p",
                                "bodyPatterns": [{"matchesJsonPath": "$.items[?(@.qty > 0)]"}],
                            },
                            {"status": 202},
                        ),
                        one(
                            {
                                "urlPath": "/v",
                                "bodyPatterns": [
                                    {
                                        "matchesJsonPath": {
                                            "expression": "$.kind",
                                            "equalTo": "card",
                                        }
                                    },
                                    {"contains": "kind"},
                                ],
                            },
                            {"status": 203},
                        ),
                    ]
                }
            },
        )
    )
    assert send(s, "POST", "/j", body=b'{"a": [2, 1]}') is not None
    assert send(s, "POST", "/j", body=b'{"a": [2, 1], "b": 1}') is None
    assert send(s, "POST", "/p", body=b'{"items": [{"qty": 1}]}') is not None
    assert send(s, "POST", "/p", body=b'{"items": [{"qty": 0}]}') is None
    assert send(s, "POST", "/p", body=b"not json") is None
    assert send(s, "POST", "/v", body=b'{"kind": "card"}') is not None
    assert send(s, "POST", "/v", body=b'{"kind": "cash"}') is None


def test_priority_then_the_later_mapping_wins(tmp_path: Path) -> None:
    s = load_mappings(
        folder(
            tmp_path,
            {
                "a.json": {
                    "mappings": [
                        one({"urlPath": "/x"}, {"status": 201}),
                        one({"urlPath": "/x"}, {"status": 202}),
                        one({"urlPathPattern": "/.*"}, {"status": 500}) | {"priority": 9},
                    ]
                },
                "b.json": one({"urlPathPattern": "/x|/y"}, {"status": 203}) | {"priority": 1},
                "c.json": one({"urlPath": "/z"}, {"status": 204}),
            },
        )
    )
    assert [got(s, path=p).status for p in ("/x", "/y", "/z", "/w")] == [203, 203, 204, 500]
    s = load_mappings(
        folder(
            tmp_path / "second",
            {
                "a.json": {
                    "mappings": [
                        one({"urlPath": "/x"}, {"status": 201}),
                        one({"urlPath": "/x"}, {"status": 202}),
                    ]
                }
            },
        )
    )
    assert got(s, path="/x").status == 202


def test_route_ids(tmp_path: Path) -> None:
    s = load_mappings(
        folder(
            tmp_path,
            {
                "a.json": {"mappings": [one({"urlPath": "/a"}), one({"urlPath": "/b"})]},
                "sub/c.json": one({"urlPath": "/c"})
                | {"id": "8c5db8b0-2db4-4ad7-a99f-38c9b00da3f7"},
            },
        )
    )
    assert sorted(r.route_id for r in s) == [
        "8c5db8b0-2db4-4ad7-a99f-38c9b00da3f7",
        "mappings/a.json#0",
        "mappings/a.json#1",
    ]


def test_response_forms(tmp_path: Path) -> None:
    s = load_mappings(
        folder(
            tmp_path,
            {
                "r.json": {
                    "mappings": [
                        one(
                            {"urlPath": "/text"},
                            {
                                "status": 200,
                                "body": "{{request.path}}",
                                "statusMessage": "Fine",
                                "headers": {"X-A": "1", "Set-Cookie": ["a=1", "b=2"]},
                            },
                        ),
                        one({"urlPath": "/json"}, {"jsonBody": {"x": [1, 2]}}),
                        one({"urlPath": "/b64"}, {"base64Body": "aGk="}),
                        one(
                            {"urlPath": "/file"},
                            {"bodyFileName": "owner.json", "transformers": ["response-template"]},
                        ),
                        one(
                            {"urlPath": "/bin"},
                            {"bodyFileName": "blob.bin", "transformers": ["response-template"]},
                        ),
                        one(
                            {"urlPathTemplate": "/t/{id}"},
                            {
                                "jsonBody": {"id": "{{request.path.id}}"},
                                "transformers": ["response-template"],
                                "headers": {"X-Id": "{{request.path.id}}"},
                            },
                        ),
                    ]
                }
            },
            {"owner.json": b'{"path": "{{request.path}}"}', "blob.bin": b"\xff\x00{{"},
        )
    )
    text = send(s, path="/text")
    assert text is not None
    assert (text.status, text.reason, text.body) == (
        200,
        "Fine",
        b"{{request.path}}",
    )  # not templated
    assert text.headers == (("X-A", "1"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"))
    assert got(s, path="/json").body == b'{"x":[1,2]}'
    assert got(s, path="/b64").body == b"hi"
    assert got(s, path="/file").body == b'{"path": "/file"}'
    assert got(s, path="/bin").body == b"\xff\x00{{"
    templated = send(s, path="/t/9")
    assert templated is not None
    assert json.loads(templated.body) == {"id": "9"} and templated.headers == (("X-Id", "9"),)


def test_delays_and_faults(tmp_path: Path) -> None:
    s = load_mappings(
        folder(
            tmp_path,
            {
                "d.json": {
                    "mappings": [
                        one({"urlPath": "/fixed"}, {"fixedDelayMilliseconds": 250}),
                        one(
                            {"urlPath": "/uniform"},
                            {"delayDistribution": {"type": "uniform", "lower": 10, "upper": 20}},
                        ),
                        one(
                            {"urlPath": "/lognormal"},
                            {
                                "fixedDelayMilliseconds": 5,
                                "delayDistribution": {
                                    "type": "lognormal",
                                    "median": 80,
                                    "sigma": 0.4,
                                    "maxValue": 200,
                                },
                            },
                        ),
                    ]
                    + [
                        one({"urlPath": f"/f/{name}"}, {"fault": name})
                        for name in (
                            "CONNECTION_RESET_BY_PEER",
                            "EMPTY_RESPONSE",
                            "RANDOM_DATA_THEN_CLOSE",
                            "MALFORMED_RESPONSE_CHUNK",
                        )
                    ]
                }
            },
        )
    )
    assert got(s, path="/fixed").delay_s == pytest.approx(0.25)
    uniform = [got(s, path="/uniform", seed=i).delay_s for i in range(200)]
    assert all(0.010 <= d <= 0.020 for d in uniform)
    lognormal = sorted(got(s, path="/lognormal", seed=i).delay_s for i in range(400))
    assert 0.070 < lognormal[200] < 0.100 and lognormal[-1] <= 0.205 + 1e-9
    assert [
        got(s, path=f"/f/{n}").fault
        for n in (
            "CONNECTION_RESET_BY_PEER",
            "EMPTY_RESPONSE",
            "RANDOM_DATA_THEN_CLOSE",
            "MALFORMED_RESPONSE_CHUNK",
        )
    ] == ["reset", "empty", "garbage", "truncated"]


@pytest.mark.parametrize(
    ("content", "where", "why"),
    [
        (
            one({"urlPath": "/x", "bodyPatterns": [{"matchesXml": "<a/>"}]}),
            "/request/bodyPatterns/0/matchesXml",
            "not in the supported subset",
        ),
        (one({"urlPath": "/x", "cookies": {}}), "/request/cookies", "not in the supported subset"),
        (
            one({"urlPath": "/x"}, {"proxyBaseUrl": "http://x"}),
            "/response/proxyBaseUrl",
            "proxying",
        ),
        (one({"urlPath": "/x"}) | {"scenarioName": "s"}, "/scenarioName", "scenarios"),
        (one({"urlPath": "/x"}) | {"postServeActions": []}, "/postServeActions", "post-serve"),
        (one({"urlPath": "/x"}) | {"serveEventListeners": []}, "/serveEventListeners", "webhooks"),
        (
            one({"urlPath": "/x"}, {"chunkedDribbleDelay": {}}),
            "/response/chunkedDribbleDelay",
            "chunkedDribbleDelay",
        ),
        (
            one({"urlPath": "/x"}, {"body": "{{eq 1 2}}", "transformers": ["response-template"]}),
            "/response/body",
            "helper 'eq'",
        ),
        (
            one({"urlPath": "/x"}, {"transformers": ["other"]}),
            "/response/transformers/0",
            "transformer 'other'",
        ),
        (
            one(
                {"urlPathTemplate": "/o/{ownerId}"},
                {"body": "{{request.path.ownerid}}", "transformers": ["response-template"]},
            ),
            "/response/body",
            "no parameter 'ownerid'",
        ),
        (
            one(
                {"urlPath": "/x"},
                {"body": "{{request.path.id}}", "transformers": ["response-template"]},
            ),
            "/response/body",
            "names no parameter",
        ),
        (one({"urlPattern": "/x("}), "/request/urlPattern", "invalid regular expression"),
        (one({"urlPath": "/x", "url": "/x"}), "/request/urlPath", "both given"),
        (
            one({"urlPathTemplate": "/o/{a}", "pathParameters": {"b": {"equalTo": "1"}}}),
            "/request/pathParameters/b",
            "not a parameter",
        ),
        (
            one({"urlPath": "/x", "headers": {"A": {"equalTo": "1", "matches": "1"}}}),
            "/request/headers/A",
            "exactly one",
        ),
        (
            one({"urlPath": "/x", "queryParameters": {"a/b": {"hasExactly": []}}}),
            "/request/queryParameters/a~1b/hasExactly",
            "matcher 'hasExactly'",
        ),
        (
            one(
                {
                    "urlPath": "/x",
                    "bodyPatterns": [{"equalToJson": {"a": "${json-unit.any-string}"}}],
                }
            ),
            "/request/bodyPatterns/0/equalToJson",
            "placeholders",
        ),
        (
            one({"urlPath": "/x", "bodyPatterns": [{"matchesJsonPath": "$.[["}]}),
            "/request/bodyPatterns/0/matchesJsonPath",
            "does not parse",
        ),
        (one({"urlPath": "/x"}, {"fault": "SOMETHING"}), "/response/fault", "one of"),
        (
            one({"urlPath": "/x"}, {"delayDistribution": {"type": "pareto"}}),
            "/response/delayDistribution/type",
            "lognormal, uniform or fixed",
        ),
        (
            one({"urlPath": "/x"}, {"bodyFileName": "missing.json"}),
            "/response/bodyFileName",
            "cannot read",
        ),
        (
            one({"urlPath": "/x"}, {"bodyFileName": "../secret"}),
            "/response/bodyFileName",
            "outside __files",
        ),
        (one({"urlPath": "/x"}, {"body": "a", "jsonBody": {}}), "/response/jsonBody", "both given"),
        (one({"urlPath": "/x"}, {"status": "200"}), "/response/status", "status code"),
        (one({"urlPath": "/x"}) | {"priority": 0}, "/priority", "at least 1"),
        ("{not json", "/", "not a JSON file"),
    ],
)
def test_refused_with_file_pointer_and_why(
    tmp_path: Path, content: Any, where: str, why: str
) -> None:
    with pytest.raises(InputError) as caught:
        load_mappings(folder(tmp_path, {"owners.json": content}))
    assert f"mappings/owners.json:{where}: " in str(caught.value), str(caught.value)
    assert re.search(re.escape(why), str(caught.value)), str(caught.value)


def test_pointers_inside_a_mappings_list(tmp_path: Path) -> None:
    with pytest.raises(
        InputError,
        match=re.escape("mappings/a.json:/mappings/1/request/bodyPatterns/0/matchesXml:"),
    ):
        load_mappings(
            folder(
                tmp_path,
                {
                    "a.json": {
                        "mappings": [
                            one({"urlPath": "/ok"}),
                            one({"bodyPatterns": [{"matchesXml": "x"}]}),
                        ]
                    }
                },
            )
        )


def test_every_problem_is_listed(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_mappings(folder(tmp_path, {"a.json": "nope", "b.json": one({"cookies": {}})}))
    assert "mappings/a.json:/:" in str(caught.value) and "mappings/b.json:/request/cookies:" in str(
        caught.value
    )


def test_the_same_request_and_priority_in_two_files_is_ambiguous(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="depends on the order the disk lists"):
        load_mappings(
            folder(tmp_path, {"a.json": one({"urlPath": "/x"}), "b.json": one({"urlPath": "/x"})})
        )


def test_duplicate_ids_are_refused(tmp_path: Path) -> None:
    same = "8c5db8b0-2db4-4ad7-a99f-38c9b00da3f7"
    with pytest.raises(InputError, match="is also a mapping's"):
        load_mappings(
            folder(
                tmp_path,
                {
                    "a.json": one({"urlPath": "/a"}) | {"id": same},
                    "b.json": one({"urlPath": "/b"}) | {"id": same},
                },
            )
        )


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder"):
        load_mappings(tmp_path / "missing")
