"""Compiled matchers: what a route asks of a request's path, query, headers and body.

Both sources compile to these: our YAML routes (``harness.stubs.model``) and
WireMock mappings (``harness.stubs.wiremock``). Regular expressions match the
whole value, as Java's ``String.matches`` does in WireMock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.stubs.templates import TemplateError, compile_jsonpath

Op = Literal["equal-to", "matches", "does-not-match", "contains", "absent"]


def compile_regex(pattern: str) -> re.Pattern[str]:
    """``ValueError`` naming the pattern and why, when it does not compile."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None


@dataclass(frozen=True)
class ValueMatcher:
    """One value's test: equal-to, matches, does-not-match, contains, or absent."""

    op: Op
    operand: str = ""
    case_insensitive: bool = False
    regex: re.Pattern[str] | None = None

    @classmethod
    def make(cls, op: Op, operand: str = "", *, case_insensitive: bool = False) -> ValueMatcher:
        regex = None
        if op in ("matches", "does-not-match"):
            regex = compile_regex(operand)
        return cls(op, operand, case_insensitive, regex)

    def test(self, value: str) -> bool:
        if self.op == "equal-to":
            if self.case_insensitive:
                return value.casefold() == self.operand.casefold()
            return value == self.operand
        if self.op == "contains":
            return self.operand in value
        if self.op == "matches":
            assert self.regex is not None
            return self.regex.fullmatch(value) is not None
        if self.op == "does-not-match":
            assert self.regex is not None
            return self.regex.fullmatch(value) is None
        return False  # absent: a value is there

    def test_values(self, values: Sequence[str] | None) -> bool:
        """A parameter or header with these values (None or empty: not sent): any value."""
        if self.op == "absent":
            return not values
        return bool(values) and any(self.test(v) for v in values or ())


@dataclass(frozen=True)
class JsonEquals:
    """The body is JSON equal to ``expected`` (options as WireMock's ``equalToJson``)."""

    expected: Any
    ignore_array_order: bool = False
    ignore_extra_elements: bool = False

    def test(self, actual: Any) -> bool:
        return _json_equal(
            self.expected, actual, self.ignore_array_order, self.ignore_extra_elements
        )


def _json_equal(expected: Any, actual: Any, any_order: bool, extra: bool) -> bool:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        if not extra and set(actual) != set(expected):
            return False
        return all(
            k in actual and _json_equal(v, actual[k], any_order, extra) for k, v in expected.items()
        )
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return False
        if not extra and len(actual) != len(expected):
            return False
        if not any_order:
            if len(actual) < len(expected):
                return False
            if extra:  # extra elements at the end of an array are extra elements too
                return all(
                    _json_equal(e, a, any_order, extra)
                    for e, a in zip(expected, actual, strict=False)
                )
            return all(
                _json_equal(e, a, any_order, extra) for e, a in zip(expected, actual, strict=True)
            )
        left = list(actual)
        for item in expected:
            hit = next(
                (i for i, a in enumerate(left) if _json_equal(item, a, any_order, extra)), -1
            )
            if hit < 0:
                return False
            left.pop(hit)
        return True
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return float(expected) == float(actual)
    return bool(type(expected) is type(actual) and expected == actual)


@dataclass(frozen=True)
class BodyMatcher:
    """One body pattern: text (a ``ValueMatcher``), JSON equality, or a JSONPath (which
    must find something, and when ``value`` is given, a value that passes it)."""

    text: ValueMatcher | None = None
    json: JsonEquals | None = None
    json_path: str | None = None
    value: ValueMatcher | JsonEquals | None = None
    _compiled: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def for_json_path(cls, expression: str, value: ValueMatcher | JsonEquals | None) -> BodyMatcher:
        try:
            compiled = compile_jsonpath(expression)
        except TemplateError as exc:
            raise ValueError(str(exc)) from None
        return cls(json_path=expression, value=value, _compiled=compiled)

    def test(self, body: bytes) -> bool:
        text = body.decode("utf-8", errors="replace")
        if self.text is not None:
            return self.text.test(text)
        try:
            data = json.loads(text)
        except ValueError:
            return False
        if self.json is not None:
            return self.json.test(data)
        found = [m.value for m in self._compiled.find(data)]
        if not found:
            return False
        if self.value is None:
            return not (len(found) == 1 and found[0] in (None, [], {}))
        for item in found:
            if isinstance(self.value, JsonEquals):
                if self.value.test(item):
                    return True
            elif self.value.test(_as_text(item)):
                return True
        return False


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")


@dataclass(frozen=True)
class PathTemplate:
    """``/owners/{ownerId}``: each ``{name}`` is one non-empty path segment."""

    template: str
    names: tuple[str, ...]
    regex: re.Pattern[str]

    @classmethod
    def parse(cls, template: str) -> PathTemplate:
        if not template.startswith("/"):
            raise ValueError(f"a path starts with '/', got {template[:60]!r}")
        names: list[str] = []
        parts: list[str] = []
        last = 0
        for found in _PARAM.finditer(template):
            parts.append(re.escape(template[last : found.start()]))
            name = found.group(1)
            if name in names:
                raise ValueError(f"path parameter {{{name}}} appears twice in {template!r}")
            names.append(name)
            parts.append(f"(?P<p{len(names) - 1}>[^/]+)")
            last = found.end()
        rest = template[last:]
        if "{" in rest or "}" in rest or any("{" in p or "}" in p for p in parts[::2]):
            raise ValueError(
                f"path {template!r}: a parameter is {{name}} (letters, digits, '_', '-'), "
                "a whole segment's part"
            )
        parts.append(re.escape(rest))
        return cls(template, tuple(names), re.compile("".join(parts)))

    def match(self, path: str) -> dict[str, str] | None:
        found = self.regex.fullmatch(path)
        if found is None:
            return None
        return {name: found.group(f"p{i}") for i, name in enumerate(self.names)}

    @property
    def shape(self) -> str:
        """The template with its parameters unnamed: two templates of one shape match alike."""
        return _PARAM.sub("{}", self.template)


@dataclass(frozen=True)
class UrlMatcher:
    """What a route asks of the URL: the path only (equal, regex or template) or the path
    with its query (``url``/``urlPattern`` of WireMock); None: any URL."""

    kind: Literal["path", "path-pattern", "path-template", "url", "url-pattern", "any"]
    text: str = ""
    regex: re.Pattern[str] | None = None
    template: PathTemplate | None = None

    def match(self, path: str, url: str) -> Mapping[str, str] | None:
        """The path parameters (empty when none) when the URL matches, else None."""
        if self.kind == "any":
            return {}
        if self.kind == "path":
            return {} if path == self.text else None
        if self.kind == "url":
            return {} if url == self.text else None
        if self.kind == "path-template":
            assert self.template is not None
            return self.template.match(path)
        assert self.regex is not None
        found = self.regex.fullmatch(url if self.kind == "url-pattern" else path)
        if found is None:
            return None
        return {k: v for k, v in found.groupdict().items() if v is not None}

    @property
    def param_names(self) -> tuple[str, ...] | None:
        """The named parameters ``request.path.<name>`` may use; None when the kind has none."""
        if self.template is not None:
            return self.template.names
        if self.regex is not None and self.regex.groupindex:
            return tuple(self.regex.groupindex)
        return None
