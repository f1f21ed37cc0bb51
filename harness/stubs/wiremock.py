"""A WireMock ``mappings/`` folder read as it is, within a subset; the rest refused at load.

``load_mappings(folder)`` reads every ``*.json`` under ``folder`` (recursively), each
one mapping or ``{"mappings": [...]}``; a response's ``bodyFileName`` is read from the
sibling ``__files/`` folder. The subset (docs/stubs.md lists it):

- request: ``method`` (ANY too), one of ``url``, ``urlPattern``, ``urlPath``,
  ``urlPathPattern``, ``urlPathTemplate`` (none: any URL), ``pathParameters``,
  ``queryParameters`` and ``headers`` with ``equalTo`` (``caseInsensitive``), ``matches``,
  ``doesNotMatch``, ``contains``, ``absent``; ``bodyPatterns`` with ``equalTo``,
  ``contains``, ``matches``, ``doesNotMatch``, ``equalToJson`` (``ignoreArrayOrder``,
  ``ignoreExtraElements``), ``matchesJsonPath`` (an expression, or one with a matcher);
- ``priority``, ``id``, ``uuid``, ``name``, ``metadata``, ``persistent``,
  ``insertionIndex`` (the last four change nothing here);
- response: ``status``, ``statusMessage``, ``headers``, one of ``body``, ``jsonBody``,
  ``base64Body``, ``bodyFileName``; ``fixedDelayMilliseconds``, ``delayDistribution``
  (lognormal ``median``/``sigma``/``maxValue``, uniform ``lower``/``upper``, fixed
  ``milliseconds``), ``fault``, ``transformers: ["response-template"]``.

Anything else (another matcher, ``proxyBaseUrl``, ``scenarioName``, ``postServeActions``,
webhooks, ``chunkedDribbleDelay``, an unknown helper in a template, a file that is not
JSON) raises ``InputError`` naming the file, the JSON pointer (RFC 6901) and why, all
problems of the folder at once.

Templating applies only where a mapping asks for it (``transformers``), as WireMock 3
standalone does unless started with ``--global-response-templating``.

Order: WireMock tries stubs by ``priority`` (lower first, default 5), and among equal
priorities the most recently added first. It adds a folder's files in the order
``java.io.File.listFiles`` gives them (the file system's, unspecified) and a file's
mappings in array order. Here files load in sorted path order and, as in WireMock,
a later mapping beats an earlier one of equal priority. Since WireMock's file order is
not defined, two mappings in different files with the same priority and the same
request pattern are refused (which one WireMock answers with depends on the disk).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import InputError
from harness.stubs.matchers import (
    BodyMatcher,
    JsonEquals,
    PathTemplate,
    UrlMatcher,
    ValueMatcher,
    compile_regex,
)
from harness.stubs.model import (
    MAX_DELAY_S,
    MAX_ROUTES,
    Body,
    Delay,
    Fault,
    ResponseSpec,
    Route,
    Stubs,
    decode_base64,
)
from harness.stubs.templates import Template, TemplateError, compile_template

MAX_MAPPING_BYTES = 10 * 1024 * 1024
"""A mapping file or a body file, at most."""

FAULTS: dict[str, Fault] = {
    "CONNECTION_RESET_BY_PEER": "reset",
    "EMPTY_RESPONSE": "empty",
    "RANDOM_DATA_THEN_CLOSE": "garbage",
    "MALFORMED_RESPONSE_CHUNK": "truncated",
}
DEFAULT_PRIORITY = 5
"""WireMock's priority for a stub that gives none."""

_MAPPING_KEYS = {
    "request", "response", "priority", "id", "uuid", "name", "metadata", "persistent",
    "insertionIndex",
}  # fmt: skip
_REQUEST_KEYS = {
    "method", "url", "urlPattern", "urlPath", "urlPathPattern", "urlPathTemplate",
    "pathParameters", "queryParameters", "headers", "bodyPatterns",
}  # fmt: skip
_URL_KEYS = ("url", "urlPattern", "urlPath", "urlPathPattern", "urlPathTemplate")
_RESPONSE_KEYS = {
    "status", "statusMessage", "headers", "body", "jsonBody", "base64Body", "bodyFileName",
    "fixedDelayMilliseconds", "delayDistribution", "fault", "transformers",
}  # fmt: skip
_BODY_KEYS = ("body", "jsonBody", "base64Body", "bodyFileName")
_VALUE_OPS = {
    "equalTo": "equal-to",
    "matches": "matches",
    "doesNotMatch": "does-not-match",
    "contains": "contains",
    "absent": "absent",
}
_WHY = {
    "proxyBaseUrl": "proxying is not supported (a real upstream is a forwarded dependency)",
    "scenarioName": "WireMock scenarios (states) are not supported",
    "requiredScenarioState": "WireMock scenarios (states) are not supported",
    "newScenarioState": "WireMock scenarios (states) are not supported",
    "postServeActions": "post-serve actions are not supported",
    "serveEventListeners": "serve-event listeners (webhooks) are not supported",
    "webhooks": "webhooks are not supported",
    "chunkedDribbleDelay": "chunkedDribbleDelay is not supported",
    "transformerParameters": "transformer parameters are not supported",
}


def pointer(*parts: str | int) -> str:
    """An RFC 6901 JSON pointer (``~`` as ``~0``, ``/`` as ``~1``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass
class _Problems:
    """Problems of one folder, each ``file:pointer: why``."""

    lines: list[str]

    def add(self, file: str, at: tuple[str | int, ...], why: str) -> None:
        self.lines.append(f"{file}:{pointer(*at) or '/'}: {why}")


class _Refused(Exception):
    def __init__(self, at: tuple[str | int, ...], why: str) -> None:
        self.at = at
        self.why = why


def load_mappings(folder: Path) -> Stubs:
    """Read a WireMock ``mappings/`` folder (and its sibling ``__files/``) into ``Stubs``.

    ``InputError`` lists every file, pointer and reason refused (docs/stubs.md)."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder (a WireMock mappings/ folder is expected)")
    files_root = folder.parent / "__files"
    problems = _Problems([])
    loaded: list[tuple[int, int, Route, str, str]] = []  # priority, order, route, file, request
    order = 0
    files = sorted(p for p in folder.rglob("*.json") if p.is_file())
    for path in files:
        shown = f"{folder.name}/{path.relative_to(folder).as_posix()}"
        try:
            text = _read(path)
            data = json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.add(shown, (), f"not a JSON file ({exc})")
            continue
        if isinstance(data, dict) and "mappings" in data:
            extra = sorted(set(data) - {"mappings", "meta"})
            if extra:
                problems.add(shown, (extra[0],), "unknown key beside mappings")
            items = data["mappings"]
            if not isinstance(items, list):
                problems.add(shown, ("mappings",), "expected a list of mappings")
                continue
            entries = [(("mappings", i), m, f"{shown}#{i}") for i, m in enumerate(items)]
        else:
            entries = [((), data, shown)]  # type: ignore[list-item]
        for at, mapping, default_id in entries:
            try:
                route, priority = _mapping(mapping, at, default_id, files_root, shown)
            except _Refused as exc:
                problems.add(shown, exc.at, exc.why)
                continue
            request_key = json.dumps(mapping.get("request"), sort_keys=True)
            loaded.append((priority, order, route, shown, request_key))
            order += 1
    if len(loaded) > MAX_ROUTES:
        problems.add(folder.name, (), f"{len(loaded)} mappings; at most {MAX_ROUTES}")
    _refuse_ambiguous(loaded, problems)
    _refuse_duplicate_ids(loaded, problems)
    if problems.lines:
        raise InputError("WireMock mappings refused:\n" + "\n".join(problems.lines))
    loaded.sort(key=lambda item: (item[0], -item[1]))
    return Stubs(item[2] for item in loaded)


def _read(path: Path) -> str:
    size = path.stat().st_size
    if size > MAX_MAPPING_BYTES:
        raise ValueError(f"{size} bytes; at most {MAX_MAPPING_BYTES}")
    return path.read_text(encoding="utf-8")


def _refuse_ambiguous(loaded: list[tuple[int, int, Route, str, str]], problems: _Problems) -> None:
    seen: dict[tuple[int, str], str] = {}
    for priority, _, route, file, request in loaded:
        other = seen.setdefault((priority, request), file)
        if other != file:
            problems.add(
                file,
                (),
                f"mapping {route.route_id!r} has the same request and priority as one in "
                f"{other}: which one WireMock answers with depends on the order the disk lists "
                "the files; give one a lower priority",
            )


def _refuse_duplicate_ids(
    loaded: list[tuple[int, int, Route, str, str]], problems: _Problems
) -> None:
    seen: dict[str, str] = {}
    for _, _, route, file, _ in loaded:
        if route.route_id in seen:
            problems.add(
                file, (), f"id {route.route_id!r} is also a mapping's in {seen[route.route_id]}"
            )
        seen.setdefault(route.route_id, file)


# ------------------------------------------------------------------ one mapping


def _object(value: Any, at: tuple[str | int, ...], what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Refused(at, f"expected {what} (a JSON object)")
    return value


def _keys(obj: dict[str, Any], allowed: set[str], at: tuple[str | int, ...]) -> None:
    for key in obj:
        if key not in allowed:
            why = _WHY.get(key, f"{key!r} is not in the supported subset (docs/stubs.md)")
            raise _Refused((*at, key), why)


def _text(value: Any, at: tuple[str | int, ...], what: str = "text") -> str:
    if not isinstance(value, str):
        raise _Refused(at, f"expected {what}")
    return value


def _number(value: Any, at: tuple[str | int, ...], *, low: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < low:
        raise _Refused(at, f"expected a number of at least {low:g}")
    return float(value)


def _mapping(
    mapping: Any, at: tuple[str | int, ...], default_id: str, files_root: Path, file: str
) -> tuple[Route, int]:
    mapping = _object(mapping, at, "a mapping")
    _keys(mapping, _MAPPING_KEYS, at)
    priority = mapping.get("priority", DEFAULT_PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 1:
        raise _Refused((*at, "priority"), "expected a whole number of at least 1")
    route_id = default_id
    for key in ("id", "uuid"):
        if key in mapping:
            value = _text(mapping[key], (*at, key), "a UUID")
            try:
                uuid.UUID(value)
            except ValueError:
                raise _Refused((*at, key), f"{value[:40]!r} is not a UUID") from None
            route_id = value
    if "name" in mapping:
        _text(mapping["name"], (*at, "name"))
    request = _object(mapping.get("request"), (*at, "request"), "a request")
    _keys(request, _REQUEST_KEYS, (*at, "request"))
    method, url, path_params, query, headers, body = _request(request, (*at, "request"))
    names = url.param_names
    response_at = (*at, "response")
    response = _object(mapping.get("response", {}), response_at, "a response")
    spec = _response(response, response_at, names, files_root)
    route = Route(
        route_id=route_id,
        method=method,
        url=url,
        response=spec,
        source=default_id if route_id == default_id else f"{file} ({route_id})",
        path_params=path_params,
        query=query,
        headers=headers,
        body=body,
        priority=priority,
    )
    return route, priority


def _request(
    request: dict[str, Any], at: tuple[str | int, ...]
) -> tuple[
    str | None,
    UrlMatcher,
    tuple[tuple[str, ValueMatcher], ...],
    tuple[tuple[str, ValueMatcher], ...],
    tuple[tuple[str, ValueMatcher], ...],
    tuple[BodyMatcher, ...],
]:
    method_text = _text(request.get("method", "ANY"), (*at, "method"), "a method")
    if not re.fullmatch(r"[A-Za-z]{1,20}", method_text):
        raise _Refused((*at, "method"), f"{method_text[:30]!r} is not a method")
    method = None if method_text.upper() == "ANY" else method_text.upper()
    given = [k for k in _URL_KEYS if k in request]
    if len(given) > 1:
        raise _Refused((*at, given[1]), f"{given[0]} and {given[1]} both given: one URL matcher")
    url = UrlMatcher("any")
    if given:
        key = given[0]
        text = _text(request[key], (*at, key))
        try:
            if key in ("url", "urlPath"):
                url = UrlMatcher("url" if key == "url" else "path", text)
            elif key == "urlPathTemplate":
                url = UrlMatcher("path-template", text, template=PathTemplate.parse(text))
            else:
                kind = "url-pattern" if key == "urlPattern" else "path-pattern"
                url = UrlMatcher(kind, text, regex=compile_regex(text))  # type: ignore[arg-type]
        except ValueError as exc:
            raise _Refused((*at, key), str(exc)) from None
    path_params = _named_matchers(request, "pathParameters", at)
    if path_params:
        names = url.template.names if url.template is not None else ()
        for name, _ in path_params:
            if name not in names:
                raise _Refused(
                    (*at, "pathParameters", name),
                    f"{name!r} is not a parameter of urlPathTemplate "
                    f"({', '.join(names) or 'none given'})",
                )
    query = _named_matchers(request, "queryParameters", at)
    headers = _named_matchers(request, "headers", at)
    patterns = request.get("bodyPatterns", [])
    if not isinstance(patterns, list):
        raise _Refused((*at, "bodyPatterns"), "expected a list of body patterns")
    body = tuple(_body_pattern(p, (*at, "bodyPatterns", i)) for i, p in enumerate(patterns))
    return method, url, path_params, query, headers, body


def _named_matchers(
    request: dict[str, Any], key: str, at: tuple[str | int, ...]
) -> tuple[tuple[str, ValueMatcher], ...]:
    found = _object(request.get(key, {}), (*at, key), "name -> matcher")
    return tuple((name, _value_matcher(m, (*at, key, name))) for name, m in found.items())


def _value_matcher(spec: Any, at: tuple[str | int, ...]) -> ValueMatcher:
    spec = _object(spec, at, 'a matcher such as {"equalTo": "x"}')
    ops = [k for k in spec if k != "caseInsensitive"]
    for key in ops:
        if key not in _VALUE_OPS:
            raise _Refused(
                (*at, key),
                f"matcher {key!r} is not in the supported subset "
                f"({', '.join(_VALUE_OPS)}, caseInsensitive)",
            )
    if len(ops) != 1:
        raise _Refused(at, "expected exactly one matcher")
    op = ops[0]
    insensitive = spec.get("caseInsensitive", False)
    if not isinstance(insensitive, bool):
        raise _Refused((*at, "caseInsensitive"), "expected true or false")
    if insensitive and op != "equalTo":
        raise _Refused((*at, "caseInsensitive"), "caseInsensitive goes with equalTo here")
    if op == "absent":
        if spec[op] is not True:
            raise _Refused((*at, op), "absent: true is supported (absent: false is not)")
        return ValueMatcher.make("absent")
    operand = _text(spec[op], (*at, op))
    try:
        return ValueMatcher.make(_VALUE_OPS[op], operand, case_insensitive=insensitive)  # type: ignore[arg-type]
    except ValueError as exc:
        raise _Refused((*at, op), str(exc)) from None


def _body_pattern(spec: Any, at: tuple[str | int, ...]) -> BodyMatcher:
    spec = _object(spec, at, "a body pattern")
    if "equalToJson" in spec:
        _keys(spec, {"equalToJson", "ignoreArrayOrder", "ignoreExtraElements"}, at)
        return BodyMatcher(json=_json_equals(spec, at))
    if "matchesJsonPath" in spec:
        _keys(spec, {"matchesJsonPath"}, at)
        value = spec["matchesJsonPath"]
        if isinstance(value, str):
            return _json_path(value, None, (*at, "matchesJsonPath"))
        inner = _object(value, (*at, "matchesJsonPath"), "an expression or {expression, matcher}")
        expression = _text(inner.get("expression"), (*at, "matchesJsonPath", "expression"))
        rest = {k: v for k, v in inner.items() if k != "expression"}
        if not rest:
            return _json_path(expression, None, (*at, "matchesJsonPath"))
        matcher: ValueMatcher | JsonEquals
        if "equalToJson" in rest:
            _keys(
                rest,
                {"equalToJson", "ignoreArrayOrder", "ignoreExtraElements"},
                (*at, "matchesJsonPath"),
            )
            matcher = _json_equals(rest, (*at, "matchesJsonPath"))
        else:
            matcher = _value_matcher(rest, (*at, "matchesJsonPath"))
        return _json_path(expression, matcher, (*at, "matchesJsonPath"))
    return BodyMatcher(text=_value_matcher(spec, at))


def _json_path(
    expression: str, matcher: ValueMatcher | JsonEquals | None, at: tuple[str | int, ...]
) -> BodyMatcher:
    try:
        return BodyMatcher.for_json_path(expression, matcher)
    except ValueError as exc:
        raise _Refused(at, str(exc)) from None


def _json_equals(spec: dict[str, Any], at: tuple[str | int, ...]) -> JsonEquals:
    expected = spec["equalToJson"]
    if isinstance(expected, str):
        try:
            expected = json.loads(expected)
        except ValueError as exc:
            raise _Refused((*at, "equalToJson"), f"not JSON: {exc}") from None
    if "${json-unit." in json.dumps(expected):
        raise _Refused((*at, "equalToJson"), "json-unit placeholders are not supported")
    flags = []
    for key in ("ignoreArrayOrder", "ignoreExtraElements"):
        flag = spec.get(key, False)
        if not isinstance(flag, bool):
            raise _Refused((*at, key), "expected true or false")
        flags.append(flag)
    return JsonEquals(expected, flags[0], flags[1])


# ------------------------------------------------------------------ the response


def _response(
    response: dict[str, Any],
    at: tuple[str | int, ...],
    names: tuple[str, ...] | None,
    files_root: Path,
) -> ResponseSpec:
    _keys(response, _RESPONSE_KEYS, at)
    status = response.get("status", 200)
    if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
        raise _Refused((*at, "status"), "expected a status code from 100 to 599")
    reason = response.get("statusMessage")
    if reason is not None:
        reason = _text(reason, (*at, "statusMessage"))
    transformers = response.get("transformers", [])
    if not isinstance(transformers, list):
        raise _Refused((*at, "transformers"), "expected a list")
    for i, name in enumerate(transformers):
        if name != "response-template":
            raise _Refused(
                (*at, "transformers", i),
                f"transformer {name!r} is not supported (response-template is)",
            )
    templated = bool(transformers)

    def template(text: str, where: tuple[str | int, ...]) -> str | Template:
        if not templated or "{{" not in text:
            return text
        try:
            return compile_template(text, names)
        except TemplateError as exc:
            raise _Refused(where, str(exc)) from None

    headers: list[tuple[str, str | Template]] = []
    raw_headers = _object(response.get("headers", {}), (*at, "headers"), "name -> value")
    for name, value in raw_headers.items():
        values = value if isinstance(value, list) else [value]
        for i, item in enumerate(values):
            where = (*at, "headers", name, i) if isinstance(value, list) else (*at, "headers", name)
            headers.append((name, template(_text(item, where), where)))
    bodies = [k for k in _BODY_KEYS if k in response]
    if len(bodies) > 1:
        raise _Refused((*at, bodies[1]), f"{bodies[0]} and {bodies[1]} both given: one body")
    body: Body = b""
    if bodies:
        body = _body(bodies[0], response[bodies[0]], (*at, bodies[0]), files_root, template)
    fault = None
    if "fault" in response:
        name = _text(response["fault"], (*at, "fault"))
        if name not in FAULTS:
            raise _Refused((*at, "fault"), f"fault {name!r}: one of {', '.join(FAULTS)}")
        fault = FAULTS[name]
    return ResponseSpec(
        status=status,
        reason=reason,
        headers=tuple(headers),
        body=body,
        delay=_delay(response, at),
        fault=fault,
    )


def _body(
    key: str,
    value: Any,
    at: tuple[str | int, ...],
    files_root: Path,
    template: Callable[[str, tuple[str | int, ...]], str | Template],
) -> Body:
    if key == "jsonBody":
        # As WireMock: the JSON is written compactly, then the text is templated.
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        rendered = template(text, at)
        return rendered if isinstance(rendered, Template) else text.encode()
    if key == "base64Body":
        try:
            return decode_base64(_text(value, at))
        except ValueError as exc:
            raise _Refused(at, str(exc)) from None
    if key == "bodyFileName":
        name = _text(value, at)
        if "{{" in name:
            raise _Refused(at, "a templated bodyFileName is not supported")
        path = (files_root / name).resolve()
        if not path.is_relative_to(files_root.resolve()):
            raise _Refused(at, f"{name!r} is outside __files/")
        try:
            size = path.stat().st_size
            if size > MAX_MAPPING_BYTES:
                raise _Refused(at, f"{name}: {size} bytes; at most {MAX_MAPPING_BYTES}")
            data = path.read_bytes()
        except OSError as exc:
            raise _Refused(at, f"cannot read __files/{name}: {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data  # binary: never templated
        rendered = template(text, at)
        return rendered if isinstance(rendered, Template) else data
    text = _text(value, at)
    rendered = template(text, at)
    return rendered if isinstance(rendered, Template) else text.encode()


def _delay(response: dict[str, Any], at: tuple[str | int, ...]) -> Delay:
    fixed = 0.0
    if "fixedDelayMilliseconds" in response:
        fixed = _number(response["fixedDelayMilliseconds"], (*at, "fixedDelayMilliseconds")) / 1000
    spec = response.get("delayDistribution")
    if spec is None:
        return _bounded(Delay(fixed_s=fixed), at)
    dist_at = (*at, "delayDistribution")
    spec = _object(spec, dist_at, "a delay distribution")
    kind = spec.get("type")
    if kind == "lognormal":
        _keys(spec, {"type", "median", "sigma", "maxValue"}, dist_at)
        median = _number(spec.get("median"), (*dist_at, "median")) / 1000
        sigma = _number(spec.get("sigma"), (*dist_at, "sigma"))
        max_s = None
        if "maxValue" in spec:
            max_s = _number(spec["maxValue"], (*dist_at, "maxValue")) / 1000
        return _bounded(Delay(fixed, "lognormal", median, sigma, max_s), at)
    if kind == "uniform":
        _keys(spec, {"type", "lower", "upper"}, dist_at)
        lower = _number(spec.get("lower"), (*dist_at, "lower")) / 1000
        upper = _number(spec.get("upper"), (*dist_at, "upper")) / 1000
        if upper < lower:
            raise _Refused((*dist_at, "upper"), "upper is below lower")
        return _bounded(Delay(fixed, "uniform", lower, upper), at)
    if kind == "fixed":
        _keys(spec, {"type", "milliseconds"}, dist_at)
        ms = _number(spec.get("milliseconds"), (*dist_at, "milliseconds"))
        return _bounded(Delay(fixed_s=fixed + ms / 1000), at)
    raise _Refused((*dist_at, "type"), f"{kind!r}: lognormal, uniform or fixed")


def _bounded(delay: Delay, at: tuple[str | int, ...]) -> Delay:
    top = delay.fixed_s + (delay.b if delay.kind == "uniform" else delay.a)
    if top > MAX_DELAY_S:
        raise _Refused(at, f"a delay of at most {MAX_DELAY_S:g} s")
    return delay
