"""A dependency's HTTP API as data: routes that match requests and render answers.

Two sources compile to the same ``Route``s: the routes a scenario writes
(``StubRoute``, YAML, kebab-case keys; ``Stubs.from_routes``) and a WireMock
``mappings/`` folder read as it is (``harness.stubs.wiremock.load_mappings``).
``Stubs.match`` gives the first route, in order, whose method, URL, query,
headers and body all match; ``Matched.render`` its answer, with templates
rendered (``harness.stubs.templates``: WireMock's Handlebars subset), the delay
drawn from the ``random.Random`` given and ``now`` for ``{{now}}``. A request
no route matches is answered by ``unmatched_answer``, as WireMock answers it.

Nothing here does I/O but reading mapping files at load: the gateway serves.
docs/stubs.md is the user's reference.
"""

from __future__ import annotations

import base64
import json
import math
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

from multidict import CIMultiDict
from pydantic import AfterValidator, Field, model_validator

from harness.core.durations import Duration
from harness.core.errors import InputError
from harness.core.yamlmodel import StrictModel
from harness.stubs.matchers import (
    BodyMatcher,
    JsonEquals,
    PathTemplate,
    UrlMatcher,
    ValueMatcher,
    compile_regex,
)
from harness.stubs.templates import Template, TemplateError, compile_template, request_context

Fault = Literal["reset", "empty", "garbage", "truncated"]
"""How an answer breaks the connection instead of answering (WireMock's faults:
CONNECTION_RESET_BY_PEER, EMPTY_RESPONSE, RANDOM_DATA_THEN_CLOSE, MALFORMED_RESPONSE_CHUNK)."""

MAX_DELAY_S = 600.0
"""A route's delay (fixed or drawn) at most 10 min, as a scenario's timeouts."""
MAX_ROUTES = 10_000
"""Routes of one dependency."""

FieldPath = tuple[str | int, ...]


# ------------------------------------------------------------------ requests and answers


@dataclass(frozen=True, eq=False)
class StubRequest:
    """One request as the gateway received it.

    ``path``: as sent (percent-encoded, no query); ``query``: decoded names to values in
    order; ``headers``: looked up case-insensitively; ``raw_query``: the query string as
    sent, when the server has it (``url`` matchers compare it; else it is rebuilt).
    """

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes
    raw_query: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.headers, CIMultiDict):
            object.__setattr__(self, "headers", CIMultiDict(self.headers))

    @property
    def url(self) -> str:
        """Path and query as sent (``/owners/1?x=2``)."""
        query = self.raw_query
        if query is None:
            query = urlencode(
                [(k, v) for k, values in self.query.items() for v in values], quote_via=quote
            )
        return f"{self.path}?{query}" if query else self.path


@dataclass(frozen=True)
class StubAnswer:
    """What the gateway sends back (or how it breaks the connection: ``fault``)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    delay_s: float = 0.0
    fault: Fault | None = None
    reason: str | None = None
    """The status line's text (WireMock's ``statusMessage``); None: the status's usual one."""


UNMATCHED = "unmatched"
"""The route a ledger records for a call no route matched (written by the gateway, counted by
``harness.analysis.dependencies``)."""
UNMATCHED_CONTENT_TYPE = "text/plain;charset=UTF-8"
_INDENT = " " * 47


def unmatched_answer(request: StubRequest) -> StubAnswer:
    """The answer to a request no route matches, as WireMock 3 gives it: 404, plain text
    starting ``Request was not matched`` (WireMock's table of the closest stub is left out:
    the request is shown instead)."""
    body = (
        f"\n{_INDENT}Request was not matched\n{_INDENT}=======================\n\n"
        f"{request.method} {request.url}\n"
    )
    return StubAnswer(404, (("Content-Type", UNMATCHED_CONTENT_TYPE),), body.encode())


# ------------------------------------------------------------------ compiled routes


@dataclass(frozen=True)
class Delay:
    """A fixed delay plus one drawn from a distribution (WireMock adds both)."""

    fixed_s: float = 0.0
    kind: Literal["none", "lognormal", "uniform"] = "none"
    a: float = 0.0
    """lognormal: the median (s); uniform: the lower bound (s)."""
    b: float = 0.0
    """lognormal: sigma; uniform: the upper bound (s)."""
    max_s: float | None = None
    """lognormal: the largest value drawn (WireMock's ``maxValue``)."""

    def sample(self, rng: random.Random) -> float:
        drawn = 0.0
        if self.kind == "uniform":
            drawn = rng.uniform(self.a, self.b)
        elif self.kind == "lognormal":
            drawn = rng.lognormvariate(math.log(self.a), self.b) if self.a > 0 else 0.0
            if self.max_s is not None:
                drawn = min(drawn, self.max_s)
        return min(self.fixed_s + drawn, MAX_DELAY_S)


@dataclass(frozen=True)
class JsonBody:
    """A JSON body whose text leaves may be templates, each rendered as a JSON string."""

    value: Any

    def render(self, context: Mapping[str, Any], rng: random.Random, now: datetime) -> bytes:
        return json.dumps(_render_json(self.value, context, rng, now), ensure_ascii=False).encode()


def _render_json(value: Any, context: Mapping[str, Any], rng: random.Random, now: datetime) -> Any:
    if isinstance(value, Template):
        return value.render(context, rng, now)
    if isinstance(value, dict):
        return {k: _render_json(v, context, rng, now) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_json(v, context, rng, now) for v in value]
    return value


Body = bytes | Template | JsonBody


@dataclass(frozen=True)
class ResponseSpec:
    status: int = 200
    reason: str | None = None
    headers: tuple[tuple[str, str | Template], ...] = ()
    body: Body = b""
    delay: Delay = field(default_factory=Delay)
    fault: Fault | None = None


@dataclass(frozen=True)
class Route:
    """One compiled route: what it matches and what it answers.

    ``route_id``: stable and unique within its ``Stubs`` (a YAML route's ``name``, else
    ``METHOD path``; a WireMock mapping's ``id``/``uuid``, else its file and index);
    ``source``: where it was written, for messages.
    """

    route_id: str
    method: str | None
    """None: any method (ANY)."""
    url: UrlMatcher
    response: ResponseSpec
    source: str = ""
    path_params: tuple[tuple[str, ValueMatcher], ...] = ()
    query: tuple[tuple[str, ValueMatcher], ...] = ()
    headers: tuple[tuple[str, ValueMatcher], ...] = ()
    body: tuple[BodyMatcher, ...] = ()
    priority: int = 5

    def match(self, request: StubRequest) -> Mapping[str, str] | None:
        """The path parameters when the request matches, else None."""
        if self.method is not None and request.method.upper() != self.method:
            return None
        params = self.url.match(request.path, request.url)
        if params is None:
            return None
        for name, matcher in self.path_params:
            if not matcher.test_values([params[name]] if name in params else None):
                return None
        for name, matcher in self.query:
            if not matcher.test_values(request.query.get(name)):
                return None
        headers = request.headers
        for name, matcher in self.headers:
            values = headers.getall(name, []) if isinstance(headers, CIMultiDict) else []
            if not matcher.test_values(values):
                return None
        if not all(b.test(request.body) for b in self.body):
            return None
        return params

    @property
    def has_conditions(self) -> bool:
        return bool(self.path_params or self.query or self.headers or self.body)


@dataclass(frozen=True)
class Matched:
    """A route that matched one request, with the request's path parameters."""

    route: Route
    path_params: Mapping[str, str]

    @property
    def route_id(self) -> str:
        return self.route.route_id

    def render(self, request: StubRequest, rng: random.Random, now: datetime) -> StubAnswer:
        """The answer: templates rendered (``now`` for ``{{now}}``), the delay drawn."""
        spec = self.route.response
        context = request_context(
            method=request.method,
            url=request.url,
            path=request.path,
            path_params=self.path_params,
            query=request.query,
            headers=list(request.headers.items()),
            body=request.body,
        )
        headers = tuple(
            (name, value.render(context, rng, now) if isinstance(value, Template) else value)
            for name, value in spec.headers
        )
        if isinstance(spec.body, Template):
            body = spec.body.render(context, rng, now).encode()
        elif isinstance(spec.body, JsonBody):
            body = spec.body.render(context, rng, now)
        else:
            body = spec.body
        return StubAnswer(
            status=spec.status,
            headers=headers,
            body=body,
            delay_s=spec.delay.sample(rng),
            fault=spec.fault,
            reason=spec.reason,
        )


class Stubs:
    """An ordered, immutable set of routes: ``match`` gives the first that matches."""

    __slots__ = ("_routes",)

    def __init__(self, routes: Iterable[Route]) -> None:
        self._routes = tuple(routes)

    @property
    def routes(self) -> tuple[Route, ...]:
        return self._routes

    def __len__(self) -> int:
        return len(self._routes)

    def __iter__(self) -> Iterator[Route]:
        return iter(self._routes)

    def match(self, request: StubRequest) -> Matched | None:
        for route in self._routes:
            params = route.match(request)
            if params is not None:
                return Matched(route, params)
        return None

    @classmethod
    def from_routes(cls, routes: Sequence[StubRoute], where: str) -> Stubs:
        """Compile a scenario's routes, in order (the first that matches answers).

        Raises ``StubRoutesError`` listing every problem with its route index and field
        (a template naming a path parameter the path lacks, a template outside the
        subset, a route wholly shadowed by an earlier one). ``where``: the routes' place
        in the scenario (``dependencies.owners.routes``), which each message starts with.
        """
        problems: list[RouteProblem] = []
        compiled: list[Route] = []
        ids: dict[str, int] = {}
        for index, route in enumerate(routes):
            try:
                made = _compile_route(route, index, where)
            except _RouteErrors as exc:
                problems.extend(exc.problems)
                continue
            if made.route_id in ids:
                if route.name is not None:
                    problems.append(
                        RouteProblem(
                            where,
                            index,
                            ("name",),
                            f"name {route.name!r} is already route {ids[made.route_id]}'s",
                        )
                    )
                    continue
                made = _with_id(made, f"{made.route_id} #{index}")
            ids[made.route_id] = index
            problems.extend(_shadowing(compiled, made, index, where))
            compiled.append(made)
        if problems:
            raise StubRoutesError(problems)
        return cls(compiled)


def _with_id(route: Route, route_id: str) -> Route:
    from dataclasses import replace

    return replace(route, route_id=route_id)


@dataclass(frozen=True)
class RouteProblem:
    """One problem of a scenario's routes: ``field`` is the path under the route
    (kebab-case keys and indices, as the YAML writes them)."""

    where: str
    index: int
    field: FieldPath
    message: str

    def __str__(self) -> str:
        at = ".".join(str(p) for p in self.field)
        return f"{self.where}[{self.index}]{'.' + at if at else ''}: {self.message}"


class StubRoutesError(InputError):
    """Every problem of a scenario's routes (``problems``), one a line."""

    def __init__(self, problems: list[RouteProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class _RouteErrors(Exception):
    def __init__(self, problems: list[RouteProblem]) -> None:
        self.problems = problems


def _shadowing(earlier: list[Route], route: Route, index: int, where: str) -> list[RouteProblem]:
    for before in earlier:
        if before.has_conditions or before.method not in (None, route.method):
            continue
        if _same_url(before.url, route.url):
            return [
                RouteProblem(
                    where,
                    index,
                    ("request", "path"),
                    f"never answered: route {before.source} ({before.route_id!r}) comes first "
                    "and answers every request this one matches (same method or ANY, same "
                    "path, no query, header or body matcher); put this one first or remove it",
                )
            ]
    return []


def _same_url(a: UrlMatcher, b: UrlMatcher) -> bool:
    if a.kind == "any":
        return True
    if a.template is not None and b.template is not None:
        return a.template.shape == b.template.shape
    return a.kind == b.kind and a.text == b.text


# ------------------------------------------------------------------ the YAML form


def _regex(pattern: str) -> str:
    compile_regex(pattern)
    return pattern


Regex = Annotated[str, AfterValidator(_regex)]
_VALUE_OPS = ("equal_to", "matches", "does_not_match", "contains", "absent")


class ValueMatch(StrictModel):
    """A query parameter's or header's test; text alone means ``equal-to``."""

    equal_to: str | None = Field(None, description="the value is exactly this")
    matches: Regex | None = Field(None, description="a regular expression the whole value matches")
    does_not_match: Regex | None = Field(None, description="a regular expression it does not")
    contains: str | None = Field(None, description="the value contains this text")
    absent: Literal[True] | None = Field(None, description="the parameter or header is not sent")
    case_insensitive: bool = Field(False, description="equal-to ignores case")

    @model_validator(mode="after")
    def _one(self) -> ValueMatch:
        given = [op for op in _VALUE_OPS if getattr(self, op) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of equal-to, matches, does-not-match, contains, absent "
                f"(got {', '.join(g.replace('_', '-') for g in given) or 'none'})"
            )
        return self

    def compile(self) -> ValueMatcher:
        op = next(op for op in _VALUE_OPS if getattr(self, op) is not None)
        operand = "" if op == "absent" else str(getattr(self, op))
        kebab = op.replace("_", "-")
        return ValueMatcher.make(kebab, operand, case_insensitive=self.case_insensitive)  # type: ignore[arg-type]


class BodyMatch(StrictModel):
    """One test of the body: text (``equal-to``, ``contains``, ``matches``), JSON
    (``equal-to-json``), or ``json-path`` (must find something; with ``equal-to``,
    ``contains`` or ``matches`` beside it, a value that passes)."""

    equal_to: str | None = None
    contains: str | None = None
    matches: Regex | None = None
    equal_to_json: Any = Field(None, description="JSON the body equals")
    ignore_array_order: bool = False
    ignore_extra_elements: bool = False
    json_path: str | None = Field(None, description="a JSONPath, e.g. $.items[?(@.qty > 0)]")

    @model_validator(mode="after")
    def _one(self) -> BodyMatch:
        text = [k for k in ("equal_to", "contains", "matches") if getattr(self, k) is not None]
        has_json = "equal_to_json" in self.model_fields_set
        if self.json_path is not None:
            if has_json or len(text) > 1:
                raise ValueError("json-path takes at most one of equal-to, contains, matches")
            from harness.stubs.templates import compile_jsonpath

            try:
                compile_jsonpath(self.json_path)
            except TemplateError as exc:
                raise ValueError(str(exc)) from None
        elif len(text) + has_json != 1:
            raise ValueError(
                "give exactly one of equal-to, contains, matches, equal-to-json, json-path"
            )
        if (self.ignore_array_order or self.ignore_extra_elements) and not has_json:
            raise ValueError("ignore-array-order and ignore-extra-elements go with equal-to-json")
        if has_json:
            try:
                json.dumps(self.equal_to_json, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"equal-to-json must be plain JSON: {exc}") from None
        return self

    def compile(self) -> BodyMatcher:
        text = next(
            (
                ValueMatcher.make(k.replace("_", "-"), getattr(self, k))  # type: ignore[arg-type]
                for k in ("equal_to", "contains", "matches")
                if getattr(self, k) is not None
            ),
            None,
        )
        if self.json_path is not None:
            return BodyMatcher.for_json_path(self.json_path, text)
        if text is not None:
            return BodyMatcher(text=text)
        return BodyMatcher(
            json=JsonEquals(self.equal_to_json, self.ignore_array_order, self.ignore_extra_elements)
        )


Method = Annotated[str, AfterValidator(lambda m: _method(m))]


def _method(method: str) -> str:
    upper = method.upper()
    if not upper.isalpha() or len(upper) > 20:
        raise ValueError(f"method {method[:30]!r}: GET, POST, ... or ANY")
    return upper


class RouteRequest(StrictModel):
    """What a route matches: a method, a path (template or regex), query, headers, body."""

    method: Method = Field("ANY", description="GET, POST, ... or ANY")
    path: str | None = Field(
        None, description="a path template: /owners/{ownerId} ({name}: one segment)"
    )
    path_pattern: Regex | None = Field(
        None, description="a regular expression the whole path matches ((?P<name>...) names a part)"
    )
    query: dict[str, str | ValueMatch] = Field(default_factory=dict)
    headers: dict[str, str | ValueMatch] = Field(default_factory=dict)
    body: list[BodyMatch] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_path(self) -> RouteRequest:
        if (self.path is None) == (self.path_pattern is None):
            raise ValueError("give path (a template) or path-pattern (a regular expression)")
        if self.path is not None:
            PathTemplate.parse(self.path)
        return self


class RouteResponse(StrictModel):
    """What a route answers; its text (headers, ``body``'s strings, ``body-text``) is a
    template (WireMock's Handlebars subset, docs/stubs.md)."""

    status: int = Field(200, ge=100, le=599)
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = Field(None, description="JSON (its strings templates); Content-Type JSON")
    body_text: str | None = Field(None, description="raw text, a template")
    delay: Duration | None = Field(None, le=MAX_DELAY_S, description="a fixed delay, e.g. 20ms")
    fault: Fault | None = Field(None, description="break the connection instead of answering")

    @model_validator(mode="after")
    def _one_body(self) -> RouteResponse:
        if "body" in self.model_fields_set and self.body_text is not None:
            raise ValueError("give body (JSON) or body-text (text), not both")
        if "body" in self.model_fields_set:
            try:
                json.dumps(self.body, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"body must be plain JSON: {exc}") from None
        return self


class StubRoute(StrictModel):
    """One route of a stub dependency (``dependencies.<name>.routes``)."""

    name: str | None = Field(None, min_length=1, description='default: "METHOD path"')
    request: RouteRequest
    response: RouteResponse = Field(default_factory=RouteResponse)


def _compile_route(route: StubRoute, index: int, where: str) -> Route:
    problems: list[RouteProblem] = []
    req, resp = route.request, route.response
    if req.path is not None:
        template = PathTemplate.parse(req.path)
        url = UrlMatcher("path-template", req.path, template=template)
    else:
        assert req.path_pattern is not None
        url = UrlMatcher("path-pattern", req.path_pattern, regex=compile_regex(req.path_pattern))
    params = url.param_names or ()

    def templated(text: str, at: FieldPath) -> str | Template:
        if "{{" not in text:
            return text
        try:
            return compile_template(text, params)
        except TemplateError as exc:
            problems.append(RouteProblem(where, index, ("response", *at), str(exc)))
            return text

    headers = tuple((name, templated(v, ("headers", name))) for name, v in resp.headers.items())
    body: Body = b""
    if "body" in resp.model_fields_set:
        body = JsonBody(_json_templates(resp.body, ("body",), templated))
        if not any(n.lower() == "content-type" for n, _ in headers):
            headers = (("Content-Type", "application/json"), *headers)
    elif resp.body_text is not None:
        compiled = templated(resp.body_text, ("body-text",))
        body = compiled if isinstance(compiled, Template) else compiled.encode()
    if problems:
        raise _RouteErrors(problems)

    def matcher(value: str | ValueMatch) -> ValueMatcher:
        return (
            value.compile()
            if isinstance(value, ValueMatch)
            else ValueMatcher.make("equal-to", value)
        )

    method = None if req.method == "ANY" else req.method
    shown = req.path if req.path is not None else req.path_pattern
    return Route(
        route_id=route.name or f"{req.method} {shown}",
        method=method,
        url=url,
        response=ResponseSpec(
            status=resp.status,
            headers=headers,
            body=body,
            delay=Delay(fixed_s=resp.delay or 0.0),
            fault=resp.fault,
        ),
        source=str(index),
        query=tuple((k, matcher(v)) for k, v in req.query.items()),
        headers=tuple((k, matcher(v)) for k, v in req.headers.items()),
        body=tuple(b.compile() for b in req.body),
    )


def _json_templates(value: Any, at: FieldPath, template: Any) -> Any:
    if isinstance(value, str):
        return template(value, at) if "{{" in value else value
    if isinstance(value, dict):
        return {k: _json_templates(v, (*at, k), template) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_templates(v, (*at, i), template) for i, v in enumerate(value)]
    return value


def decode_base64(text: str) -> bytes:
    """``ValueError`` when ``text`` is not base64."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise ValueError(f"not base64: {exc}") from None
