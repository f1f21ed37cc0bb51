"""WireMock's Handlebars subset, compiled by pybars3 and checked when loaded.

One syntax for every dependency answer: our YAML routes and WireMock mappings
(``"transformers": ["response-template"]``) both use it. A template is parsed
once at load; whatever it uses outside the subset below is refused then
(``TemplateError``), never rendered wrong later:

- ``{{request.url}}`` (path and query as sent), ``{{request.path}}`` (and
  ``request.path.[0]``: a segment; ``request.path.name``: a named path parameter,
  which the route's path must have), ``{{request.pathSegments.[1]}}``,
  ``{{request.query.x}}`` (the first value; ``.[1]`` the second), ``{{request.headers.x}}``
  (case-insensitive), ``{{request.method}}``, ``{{request.body}}``;
- ``{{jsonPath request.body '$.x'}}``: text as WireMock gives it (a string as is, a
  number or boolean as text, an object as JSON, nothing when the path finds nothing);
- ``{{randomValue length=N type='ALPHANUMERIC'}}`` (``ALPHABETIC``, ``NUMERIC``,
  ``HEXADECIMAL``, ``ALPHANUMERIC_AND_SYMBOLS``, ``UUID``; ``uppercase=true``), drawn
  from the ``random.Random`` the caller gives (seeded: a run is repeatable);
- ``{{now}}`` (UTC, ``2024-05-01T12:00:00Z``), with ``format`` (a Java date pattern of
  the letters ``yyyy yy MMM MM dd HH hh mm ss SSS EEE a``, or ``epoch``/``unix``) and
  ``offset`` (``'3 days'``, ``'-1 hours'``: seconds to years), from the ``now`` given;
- ``{{#if}}``, ``{{#unless}}`` (with ``{{else}}``), ``{{#each}}`` (the item as ``{{this}}``,
  ``{{@index}}``, ``{{@key}}``, ``{{@first}}``, ``{{@last}}``), ``{{#with}}``, comments.

As in WireMock, nothing is HTML-escaped: ``{{x}}`` and ``{{{x}}}`` render the same.
"""

from __future__ import annotations

import functools
import json
import random
import re
import string
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jsonpath_ng.exceptions import JSONPathError
from jsonpath_ng.ext.parser import parse as jsonpath_parse

MARK = "{{"
"""Text holding this is a template; any other is answered as written."""

REQUEST_FIELDS = ("url", "path", "pathSegments", "query", "headers", "method", "body")
BLOCKS = ("if", "unless", "each", "with")
HELPERS = ("jsonPath", "randomValue", "now")
RANDOM_TYPES = {
    "ALPHANUMERIC": string.ascii_lowercase + string.digits,
    "ALPHABETIC": string.ascii_lowercase,
    "NUMERIC": string.digits,
    "HEXADECIMAL": "0123456789abcdef",
    "ALPHANUMERIC_AND_SYMBOLS": "".join(chr(c) for c in range(33, 127) if chr(c) not in '"\\'),
    "UUID": "",
}
MAX_RANDOM_LENGTH = 10_000
_SCOPE_NAMES = ("this", "@index", "@key", "@first", "@last")


class TemplateError(ValueError):
    """A template outside the subset or not parsing; the message says what and why."""


@dataclass(frozen=True)
class Template:
    """One compiled template: ``render(context, helpers)`` -> text."""

    source: str
    _fn: Callable[..., Any]

    def render(self, request_context: Mapping[str, Any], rng: random.Random, now: datetime) -> str:
        helpers = _helpers(rng, now)
        return str(self._fn({"request": request_context}, helpers=helpers))


@functools.cache
def _pybars() -> tuple[Any, type[Exception], Any]:
    """pybars3's ``Compiler``, its error, and ours, which renders ``{{x}}`` as ``{{{x}}}``
    (WireMock's Handlebars escapes nothing). Imported when a template is first compiled:
    pybars3 builds its grammar at import, ~1 s of CPU, which every ``harness`` command and
    every gateway process paid when this module imported it at the top (every scenario
    loads this package), stubs or not."""
    from pybars import Compiler, PybarsError

    class NoEscapeCompiler(Compiler):  # type: ignore[misc]
        def _generate_code(self, source: str) -> Any:
            tree = parse_tree(source)
            self._compiler.globals["builder"]._reset()
            return self._compiler(_unescaped(tree)).apply("compile")[0]

    return Compiler, PybarsError, NoEscapeCompiler


_LOCK = threading.Lock()
"""pybars3's compiler keeps its state on the class: one compile at a time."""


def parse_tree(source: str) -> list[Any]:
    """pybars3's syntax tree of ``source``; ``TemplateError`` when it does not parse whole."""
    compiler = _pybars()[0]
    try:
        text = compiler().whitespace_control(source)
        grammar = compiler._handlebars(text)
        tree, _ = grammar.apply("template")
        position = grammar.input.position  # how far the grammar read: all, or it stopped
    except Exception as exc:  # pymeta raises its own parse errors
        raise TemplateError(f"template does not parse: {exc}") from None
    if position < len(text):
        line = text.count("\n", 0, position) + 1
        near = text[position : position + 20]
        raise TemplateError(
            f"template does not parse at line {line}, near {near!r} (an unclosed {{{{...}}}} "
            "or block?)"
        )
    return list(tree)


def _unescaped(node: Any) -> Any:
    if isinstance(node, tuple) and node and node[0] == "escapedexpand":
        return ("expand", *(_unescaped(n) for n in node[1:]))
    if isinstance(node, tuple):
        return tuple(_unescaped(n) for n in node)
    if isinstance(node, list):
        return [_unescaped(n) for n in node]
    return node


def compile_template(source: str, path_params: Iterable[str] | None) -> Template:
    """Check ``source`` against the subset and compile it.

    ``path_params``: the named parameters the route's path has (``request.path.<name>``
    must be one of them); None when the route's path names none at all.
    """
    tree = parse_tree(source)
    _check(tree[1:], frozenset(path_params or ()), path_params is not None, scoped=False)
    _, error, no_escape = _pybars()
    with _LOCK:
        try:
            fn = no_escape().compile(source)
        except error as exc:
            raise TemplateError(f"template does not compile: {exc}") from None
    return Template(source, fn)


def is_template(text: str) -> bool:
    return MARK in text


# ------------------------------------------------------------------ the static check


def _check(nodes: Sequence[Any], params: frozenset[str], templated: bool, *, scoped: bool) -> None:
    for node in nodes:
        kind = node[0]
        if kind == "literal" and MARK in node[1]:
            raise TemplateError(f"unclosed or malformed {{{{...}}}} near {node[1][:30]!r}")
        if kind in ("literal", "newline", "whitespace", "comment"):
            continue
        if kind in ("expand", "escapedexpand"):
            _check_expression(node[1], node[2], params, templated, scoped=scoped)
        elif kind in ("block", "invertedblock"):
            symbol, args, body, alt = node[1], node[2], node[3], node[4]
            if symbol not in BLOCKS:
                raise TemplateError(
                    f"{{{{#{symbol}}}}} is not in the supported subset (blocks: "
                    f"{', '.join(BLOCKS)})"
                )
            if kind == "invertedblock":
                raise TemplateError("{{^...}} blocks are not in the supported subset")
            if any(a[0] == "subexpr" for a in args):
                raise TemplateError("subexpressions ((helper ...)) are not in the supported subset")
            if len(args) != 1 or args[0][0] != "path":
                raise TemplateError(f"{{{{#{symbol}}}}} takes one value, such as request.query.x")
            _check_value(args[0], params, templated, scoped=scoped)
            inner = scoped or symbol in ("each", "with")
            _check(body[1:], params, templated, scoped=inner)
            if alt:
                _check(alt[1:], params, templated, scoped=scoped)
        elif kind == "partial":
            raise TemplateError("partials ({{> name}}) are not in the supported subset")
        elif kind == "rawblock":
            raise TemplateError("raw blocks ({{{{raw}}}}) are not in the supported subset")
        else:
            raise TemplateError(f"{kind} is not in the supported subset")


def _segments(path: tuple[str, list[str]]) -> list[str]:
    return [s for s in path[1] if s != ""]


def _check_expression(
    path: tuple[str, list[str]],
    args: list[Any],
    params: frozenset[str],
    templated: bool,
    *,
    scoped: bool,
) -> None:
    segments = _segments(path)
    name = segments[0] if segments else "this"
    if len(segments) == 1 and name in HELPERS:
        _check_helper(name, args, params, templated, scoped=scoped)
        return
    if args:
        raise TemplateError(
            f"helper {name!r} is not in the supported subset (helpers: {', '.join(HELPERS)})"
        )
    _check_value(path, params, templated, scoped=scoped)


def _check_value(
    path: tuple[str, list[str]], params: frozenset[str], templated: bool, *, scoped: bool
) -> None:
    segments = _segments(path)
    shown = ".".join(segments) or "this"
    if not segments or segments[0] in _SCOPE_NAMES:
        if not scoped:
            raise TemplateError(f"{{{{{shown}}}}} is only meaningful inside {{{{#each}}}}")
        if segments[1:] and segments[0] != "this":
            raise TemplateError(f"{shown}: {segments[0]} has no fields")
        return
    if segments[0] != "request":
        raise TemplateError(
            f"{shown!r} is unknown: values start with request. (request.path, "
            "request.query.x, ...) or are helpers (jsonPath, randomValue, now)"
        )
    if scoped:
        raise TemplateError(
            f"{shown}: inside {{{{#each}}}} or {{{{#with}}}} only the item ({{{{this}}}}, "
            "{{@index}}) is reachable; use request.* outside the block"
        )
    if len(segments) == 1:
        raise TemplateError("{{request}} alone is not a value: say request.path, request.url, ...")
    field, rest = segments[1], segments[2:]
    if field not in REQUEST_FIELDS:
        raise TemplateError(
            f"request.{field} is not in the supported subset ({', '.join(REQUEST_FIELDS)})"
        )
    if field in ("url", "method", "body") and rest:
        raise TemplateError(f"request.{field} has no fields (got {shown})")
    if field == "pathSegments" and (len(rest) != 1 or not rest[0].isdigit()):
        raise TemplateError(f"{shown}: say request.pathSegments.[N], a segment's index")
    if field == "path" and rest:
        if len(rest) > 1:
            raise TemplateError(f"{shown}: request.path has one level (a segment or a parameter)")
        if not rest[0].isdigit() and rest[0] not in params:
            if not templated:
                raise TemplateError(
                    f"{shown}: the route's path names no parameter (a path template such as "
                    "/owners/{ownerId} does)"
                )
            known = ", ".join(sorted(params)) or "none"
            raise TemplateError(
                f"{shown}: the path has no parameter {rest[0]!r} (it has: {known}; names are "
                "case-sensitive)"
            )
    if field in ("query", "headers") and (
        not rest or len(rest) > 2 or (len(rest) == 2 and not rest[1].isdigit())
    ):
        raise TemplateError(f"{shown}: say request.{field}.name or request.{field}.name.[N]")


def _literal(arg: Any) -> Any:
    """A literal argument's Python value (pybars keeps strings with their quotes)."""
    if arg[0] != "literalparam":
        return None
    value = arg[1]
    if isinstance(value, str) and value[:1] in ("'", '"'):
        return value[1:-1].replace("\\'", "'").replace('\\"', '"')
    return value


def _check_helper(
    name: str, args: list[Any], params: frozenset[str], templated: bool, *, scoped: bool
) -> None:
    positional = [a for a in args if a[0] != "kwparam"]
    keywords = {a[1]: a[2] for a in args if a[0] == "kwparam"}
    if name == "jsonPath":
        if len(positional) != 2 or keywords:
            raise TemplateError(
                "jsonPath takes a value and a JSONPath: {{jsonPath request.body '$.x'}}"
            )
        if positional[0][0] != "path":
            raise TemplateError("jsonPath's first argument is a value such as request.body")
        _check_value(positional[0], params, templated, scoped=scoped)
        expression = _literal(positional[1])
        if not isinstance(expression, str):
            raise TemplateError(
                "jsonPath's second argument is a JSONPath in quotes, such as '$.id'"
            )
        compile_jsonpath(expression)
        return
    if positional:
        raise TemplateError(f"{name} takes only named arguments (such as length=8)")
    allowed = {"randomValue": ("length", "type", "uppercase"), "now": ("format", "offset")}[name]
    for key, value in keywords.items():
        if key not in allowed:
            raise TemplateError(
                f"{name}: argument {key!r} is not in the supported subset ({', '.join(allowed)})"
            )
        if value[0] != "literalparam":
            raise TemplateError(f"{name}: {key} must be a literal (text in quotes, a number)")
    if name == "randomValue":
        kind = _literal(keywords["type"]) if "type" in keywords else "ALPHANUMERIC"
        if kind not in RANDOM_TYPES:
            raise TemplateError(
                f"randomValue: type {kind!r} is not in the supported subset "
                f"({', '.join(RANDOM_TYPES)})"
            )
        length = _literal(keywords["length"]) if "length" in keywords else None
        if kind != "UUID" and not (
            isinstance(length, int) and not isinstance(length, bool) and length > 0
        ):
            raise TemplateError("randomValue: length=N (a positive whole number) is required")
        if isinstance(length, int) and length > MAX_RANDOM_LENGTH:
            raise TemplateError(f"randomValue: length at most {MAX_RANDOM_LENGTH}")
        upper = _literal(keywords["uppercase"]) if "uppercase" in keywords else False
        if not isinstance(upper, bool):
            raise TemplateError("randomValue: uppercase is true or false")
    else:
        if "format" in keywords:
            fmt = _literal(keywords["format"])
            if not isinstance(fmt, str):
                raise TemplateError("now: format is text in quotes")
            java_date_format(fmt)
        if "offset" in keywords:
            offset = _literal(keywords["offset"])
            if not isinstance(offset, str):
                raise TemplateError("now: offset is text in quotes, such as '3 days'")
            parse_offset(offset)


# ------------------------------------------------------------------ helpers


def compile_jsonpath(expression: str) -> Any:
    """A JSONPath (jsonpath-ng's extended syntax, filters included); ``TemplateError`` if bad."""
    try:
        return jsonpath_parse(expression)
    except (JSONPathError, ValueError, TypeError, AttributeError) as exc:
        raise TemplateError(f"JSONPath {expression!r} does not parse: {exc}") from None


_JAVA_LETTERS = {
    "yyyy": "%Y",
    "yy": "%y",
    "MMM": "%b",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "hh": "%I",
    "mm": "%M",
    "ss": "%S",
    "EEE": "%a",
    "a": "%p",
}
_JAVA_TOKEN = re.compile(r"'([^']*)'|(yyyy|yy|MMM|MM|dd|HH|hh|mm|ss|SSS|EEE|a)|([A-Za-z])|(.)")


def java_date_format(pattern: str) -> Callable[[datetime], str]:
    """A Java date pattern (the letters listed in the module's docstring) as a function."""
    if pattern == "epoch":
        return lambda t: str(int(t.timestamp() * 1000))
    if pattern == "unix":
        return lambda t: str(int(t.timestamp()))
    parts: list[Callable[[datetime], str]] = []
    for quoted, known, unknown, other in _JAVA_TOKEN.findall(pattern):
        if unknown:
            raise TemplateError(
                f"now: format letter {unknown!r} is not in the supported subset "
                "(yyyy yy MMM MM dd HH hh mm ss SSS EEE a, 'quoted text', epoch, unix)"
            )
        if known == "SSS":
            parts.append(lambda t: f"{t.microsecond // 1000:03d}")
        elif known:
            code = _JAVA_LETTERS[known]
            parts.append(lambda t, code=code: t.strftime(code))  # type: ignore[misc]
        else:
            text = "'" if quoted == "" and other == "" else quoted or other
            parts.append(lambda t, text=text: text)  # type: ignore[misc]
    return lambda t: "".join(p(t) for p in parts)


_OFFSET = re.compile(r"\s*(-?\d+)\s+(second|minute|hour|day|month|year)s?\s*", re.IGNORECASE)


def parse_offset(text: str) -> Callable[[datetime], datetime]:
    """``'3 days'``, ``'-1 hours'`` ... as a function of the time."""
    found = _OFFSET.fullmatch(text)
    if not found:
        raise TemplateError(
            f"now: offset {text!r} is not 'N unit' (unit: seconds, minutes, hours, days, "
            "months, years; N may be negative)"
        )
    amount, unit = int(found.group(1)), found.group(2).lower()
    if unit in ("month", "year"):
        months = amount * (12 if unit == "year" else 1)
        return lambda t: _add_months(t, months)
    seconds = amount * {"second": 1, "minute": 60, "hour": 3600, "day": 86400}[unit]
    return lambda t: t + timedelta(seconds=seconds)


def _add_months(t: datetime, months: int) -> datetime:
    index = t.year * 12 + t.month - 1 + months
    year, month = divmod(index, 12)
    for day in range(t.day, 27, -1):  # the month's last day when it has no t.day
        try:
            return t.replace(year=year, month=month + 1, day=day)
        except ValueError:
            continue
    return t.replace(year=year, month=month + 1, day=min(t.day, 28))


def json_text(value: Any) -> str:
    """A JSONPath result as WireMock's ``jsonPath`` helper writes it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, indent=2, separators=(",", " : "), ensure_ascii=False)
    if isinstance(value, list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _helpers(rng: random.Random, now: datetime) -> dict[str, Callable[..., Any]]:
    utc = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)

    def json_path(_this: Any, value: Any, expression: str) -> str:
        try:
            data = json.loads(str(value)) if value is not None else None
        except ValueError:
            return ""
        found = [m.value for m in compile_jsonpath(expression).find(data)]
        if not found:
            return ""
        return json_text(found[0] if len(found) == 1 else found)

    def random_value(
        _this: Any, length: int = 0, type: str = "ALPHANUMERIC", uppercase: bool = False
    ) -> str:
        if type == "UUID":
            text = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        else:
            text = "".join(rng.choice(RANDOM_TYPES[type]) for _ in range(length))
        return text.upper() if uppercase else text

    def now_helper(_this: Any, format: str | None = None, offset: str | None = None) -> str:
        t = parse_offset(offset)(utc) if offset else utc
        if format is None:
            return t.strftime("%Y-%m-%dT%H:%M:%SZ")
        return java_date_format(format)(t)

    return {"jsonPath": json_path, "randomValue": random_value, "now": now_helper}


# ------------------------------------------------------------------ the request as a context


class Text(str):
    """A value that renders as text and has fields (``request.path`` and ``.ownerId``)."""

    fields: Mapping[str, Any]

    def __new__(cls, text: str, fields: Mapping[str, Any]) -> Text:
        made = super().__new__(cls, text)
        made.fields = fields
        return made

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


class Values(list[str]):
    """A query parameter's or header's values: renders as the first; ``.[N]`` the Nth."""

    def __str__(self) -> str:
        return self[0] if self else ""

    def get(self, name: str, default: Any = None) -> Any:
        if name.isdigit() and int(name) < len(self):
            return self[int(name)]
        return default


class Lookup:
    """Names to values, case-insensitive when asked (headers)."""

    def __init__(self, values: Mapping[str, Values], *, fold: bool) -> None:
        self._fold = fold
        self._values = {(k.lower() if fold else k): v for k, v in values.items()}

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name.lower() if self._fold else name, default)

    def __str__(self) -> str:
        return ""


def request_context(
    *,
    method: str,
    url: str,
    path: str,
    path_params: Mapping[str, str],
    query: Mapping[str, Sequence[str]],
    headers: Iterable[tuple[str, str]],
    body: bytes,
) -> dict[str, Any]:
    """What ``{{request.*}}`` reads, for one request."""
    segments = [s for s in path.split("/") if s]
    path_fields: dict[str, Any] = {str(i): s for i, s in enumerate(segments)}
    path_fields.update(path_params)
    grouped: dict[str, Values] = {}
    for name, value in headers:
        grouped.setdefault(name.lower(), Values()).append(value)
    return {
        "url": url,
        "path": Text(path, path_fields),
        "pathSegments": Values(segments),
        "query": Lookup({k: Values(v) for k, v in query.items()}, fold=False),
        "headers": Lookup(grouped, fold=True),
        "method": method,
        "body": body.decode("utf-8", errors="replace"),
    }
