"""WireMock's Handlebars subset (harness.stubs.templates): rendering and the refusals."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from harness.stubs.templates import TemplateError, compile_template, request_context
from tests.conftest import ROOT

NOW = datetime(2024, 1, 31, 12, 0, 5, 123456, tzinfo=UTC)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def render(source: str, params: list[str] | None = None, **request: object) -> str:
    context = request_context(
        method=str(request.get("method", "GET")),
        url=str(request.get("url", "/owners/42?x=1&x=2")),
        path=str(request.get("path", "/owners/42")),
        path_params=dict(request.get("path_params", {"ownerId": "42"})),  # type: ignore[call-overload]
        query=request.get("query", {"x": ["1", "2"]}),  # type: ignore[arg-type]
        headers=request.get("headers", [("X-Req", "r1")]),  # type: ignore[arg-type]
        body=bytes(request.get("body", b"")),  # type: ignore[call-overload]
    )
    template = compile_template(source, ["ownerId"] if params is None else params)
    return template.render(context, random.Random(7), NOW)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{request.path}}", "/owners/42"),
        ("{{request.path.ownerId}}", "42"),
        ("{{request.path.[0]}}", "owners"),
        ("{{request.pathSegments.[1]}}", "42"),
        ("{{request.url}}", "/owners/42?x=1&x=2"),
        ("{{request.query.x}}", "1"),
        ("{{request.query.x.[1]}}", "2"),
        ("{{request.query.nope}}", ""),
        ("{{request.headers.x-req}}", "r1"),
        ("{{request.headers.X-REQ}}", "r1"),
        ("{{request.method}}", "GET"),
        ("{{#each request.query.x}}[{{this}}:{{@index}}]{{/each}}", "[1:0][2:1]"),
        ("{{#if request.query.x}}yes{{else}}no{{/if}}", "yes"),
        ("{{#unless request.query.nope}}none{{/unless}}", "none"),
        ("{{! a comment }}x", "x"),
        ("{{now}}", "2024-01-31T12:00:05Z"),
        ("{{now format='yyyy-MM-dd HH:mm:ss.SSS'}}", "2024-01-31 12:00:05.123"),
        ("{{now format='epoch'}}", str(int(NOW.timestamp() * 1000))),
        ("{{now format='unix'}}", str(int(NOW.timestamp()))),
        ("{{now offset='3 days' format='yyyy-MM-dd'}}", "2024-02-03"),
        ("{{now offset='1 months' format='yyyy-MM-dd'}}", "2024-02-29"),
        ("{{now offset='-2 hours' format=\"HH 'h'\"}}", "10 h"),
    ],
)
def test_renders(source: str, expected: str) -> None:
    assert render(source) == expected


def test_nothing_is_html_escaped_as_in_wiremock() -> None:
    assert render("{{request.query.e}}", query={"e": ['<a>"&']}) == '<a>"&'


def test_json_path_gives_text_as_wiremock() -> None:
    body = b'{"a": "A", "n": 3.5, "i": 2, "t": true, "o": {"k": 1}, "l": [1, "x"]}'
    got = {
        key: render(f"{{{{jsonPath request.body '$.{key}'}}}}", body=body)
        for key in ("a", "n", "i", "t", "o", "l", "missing")
    }
    assert got == {
        "a": "A",
        "n": "3.5",
        "i": "2",
        "t": "true",
        "o": '{\n  "k" : 1\n}',
        "l": '[1,"x"]',
        "missing": "",
    }
    assert render("{{jsonPath request.body '$.a'}}", body=b"not json") == ""


def test_random_values_are_drawn_from_the_rng_given() -> None:
    text = render(
        "{{randomValue length=8 type='ALPHANUMERIC'}} {{randomValue type='UUID'}} "
        "{{randomValue length=5 type='NUMERIC'}} {{randomValue length=6 type='HEXADECIMAL' "
        "uppercase=true}}"
    )
    alnum, uuid, numeric, hexa = text.split(" ")
    assert re.fullmatch(r"[a-z0-9]{8}", alnum)
    assert UUID.fullmatch(uuid)
    assert re.fullmatch(r"[0-9]{5}", numeric)
    assert re.fullmatch(r"[0-9A-F]{6}", hexa)
    assert render("{{randomValue type='UUID'}}") == render("{{randomValue type='UUID'}}")


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("{{request.path.ownerid}}", "no parameter 'ownerid'"),
        ("{{eq 1 2}}", "helper 'eq' is not in the supported subset"),
        ("{{#switch request.method}}{{/switch}}", "{{#switch}} is not in the supported subset"),
        ("{{request.cookies.x}}", "request.cookies is not in the supported subset"),
        ("{{request.host}}", "request.host is not in the supported subset"),
        ("{{randomValue length=3 type='FOO'}}", "type 'FOO'"),
        ("{{randomValue type='ALPHABETIC'}}", "length=N"),
        ("{{now format='yyyy-QQ'}}", "format letter 'Q'"),
        ("{{now offset='3 fortnights'}}", "offset '3 fortnights'"),
        ("{{now timezone='Europe/Paris'}}", "argument 'timezone'"),
        ("{{foo}}", "'foo' is unknown"),
        ("{{> partial}}", "partials"),
        ("{{#each request.query.x}}{{request.path}}{{/each}}", "only the item"),
        ("{{jsonPath request.body '$.[['}}", "does not parse"),
        ("{{jsonPath request.body}}", "jsonPath takes a value and a JSONPath"),
        ("{{request.path", "unclosed"),
        ("x {{#if request.method}}y", "unclosed"),
        ("{{#if (eq request.method 'GET')}}x{{/if}}", "subexpressions"),
        ("{{this}}", "only meaningful inside"),
    ],
)
def test_refused_at_compile(source: str, why: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(why)):
        compile_template(source, ["ownerId"])


def test_a_named_path_parameter_needs_a_path_that_names_some() -> None:
    with pytest.raises(TemplateError, match="names no parameter"):
        compile_template("{{request.path.id}}", None)
    assert render("{{request.path.[1]}}", params=[]) == "42"


def test_a_scenario_is_read_without_the_template_engine() -> None:
    """pybars3 builds its grammar at import (~1 s of CPU): every harness command and gateway
    process loads the scenario model, so the engine is imported only to compile a template."""
    code = (
        "import sys; import harness.cli, harness.gateway.server, harness.stubs.model; "
        "print(sorted(m for m in ('pybars', 'pymeta') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    compile_template("{{jsonPath request.body '$.id'}}", None)  # and on first use it is there
