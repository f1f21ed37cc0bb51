"""``traffic.<ep>.outcomes``: what an answer of the service means, read from the answer itself.

Every attempt the load generator sends ends in one class, recorded in the sample's
``class`` column where the answer is seen (``harness.load.wire``), so no body is kept:

- ``refused``: the service declined the request (a breaker, a rate limiter, a bulkhead);
- ``fallback``: an answer that stands in for the real one (a fixed or default value);
- ``degraded``: an answer that lacks what it should carry (an empty list in an outage);
- ``cached``: the real answer, from a cache;
- ``success``: any other answer 2xx or 3xx (a redirect is not followed: it is the answer);
- ``failure``: any other status, and no answer at all (refused connection, reset, timeout).

The declared classes are tried in that order (``DECLARED``), the first whose rules hold
wins. A class's rules are alternatives; each rule's conditions must all hold: ``status``
(codes, ``5xx``, ``500-504``), ``header`` (``name`` with ``equal``, ``matches`` or
``present``) and ``body`` (a JSONPath, ``jsonpath-ng``'s extended syntax, with ``empty``,
``equal``, ``matches`` or ``present``). The body is read and parsed only when some rule
of the endpoint names it.

An endpoint starts from a preset (``PRESETS``, the one table of them) and replaces any of
its classes with its own rules:

- ``default``: any service. 429 and 503 are refused; nothing is a fallback, degraded or
  cached unless the endpoint says how to tell.
- ``x-outcome``: the reference shop (``targets/shop``, ``targets/spring-shop``), which
  names every answer in its ``X-Outcome`` header: ``not_permitted`` is refused, a 2xx
  ``cached`` is cached; the header's value is also the sample's ``outcome`` (its failed
  answers' names in ``errors``). A value fallback the shop serves 200 when its breaker
  refuses is refused and served: a refused answer 2xx or 3xx counts as answered.

An endpoint that names no preset is read with the one its builds' kind declares
(``BuildSettings.answers``: ``shop`` builds are the reference shop), when every build
of the scenario declares the same, else with ``default`` (``harness.load.plan.endpoint_outcomes``).

Figures read the classes only (``harness.analysis.answers``). Samples written before
the column are read with ``x-outcome`` from their ``status`` and ``outcome`` (the
``X-Outcome`` header as recorded then): what their figures always meant
(``recorded_class``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from jsonpath_ng.exceptions import JSONPathError
from jsonpath_ng.ext.parser import parse as parse_jsonpath
from pydantic import Field, field_validator, model_validator

from harness.core.yamlmodel import StrictModel

AnswerClass = Literal["success", "cached", "fallback", "degraded", "refused", "failure"]
CLASSES: tuple[AnswerClass, ...] = (
    "success",
    "cached",
    "fallback",
    "degraded",
    "refused",
    "failure",
)
"""Every class a sample's ``class`` column holds (a dropped arrival, never sent: ``""``)."""
Declared = Literal["refused", "fallback", "degraded", "cached"]
DECLARED: tuple[Declared, ...] = ("refused", "fallback", "degraded", "cached")
"""The classes rules declare, in the order they are tried."""
STOOD_IN: tuple[AnswerClass, ...] = ("refused", "fallback", "degraded")
"""Not the service's own answer: the resilience layer answered instead."""
NOT_SERVED: tuple[AnswerClass, ...] = ("fallback", "degraded")
"""Answers 2xx/3xx that do not count as answered (success, kept, recovered)."""

MAX_RULES = 20
"""Rules of one class."""
MAX_BODY_BYTES = 1024 * 1024
"""A body longer than this is not parsed: its body conditions do not hold."""
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_RANGE = re.compile(r"([1-5])xx|([1-5]\d\d)-([1-5]\d\d)")


def _status_range(item: int | str) -> tuple[int, int]:
    if isinstance(item, bool):
        raise ValueError(f"status {item!r}: expected a code (503), a class (5xx) or a range")
    if isinstance(item, int):
        if not 100 <= item <= 599:
            raise ValueError(f"status {item}: a status code is 100 to 599")
        return item, item
    m = _RANGE.fullmatch(item.strip().lower())
    if m is None:
        raise ValueError(
            f"status {item!r}: expected a code (503), a class (5xx) or a range (500-504)"
        )
    if m.group(1):
        low = int(m.group(1)) * 100
        return low, low + 99
    low, high = int(m.group(2)), int(m.group(3))
    if low > high:
        raise ValueError(f"status {item!r}: the range's start is above its end")
    return low, high


def _regex(pattern: str | None) -> str | None:
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"matches {pattern!r} is not a regular expression: {exc}") from None
    return pattern


def _one_predicate(model: StrictModel, keys: Sequence[str]) -> None:
    given = [k for k in keys if getattr(model, k) is not None]
    if len(given) != 1:
        raise ValueError(
            f"give exactly one of {', '.join(keys)}"
            + (f" (given: {', '.join(given)})" if given else "")
        )


class HeaderMatch(StrictModel):
    """A response header: equal to a value (case-sensitive), matching a regular expression
    (searched), or present (or absent: ``present: false``)."""

    name: str = Field(min_length=1, max_length=200, description="the header's name")
    equal: str | None = Field(None, max_length=8192, description="its value is exactly this")
    matches: str | None = Field(None, max_length=1000, description="a regex found in its value")
    present: bool | None = Field(None, description="the header is there (false: it is not)")

    @field_validator("name")
    @classmethod
    def _token(cls, name: str) -> str:
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"header name {name!r} is not a header name (RFC 9110 token)")
        return name

    @field_validator("matches")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return _regex(value)

    @model_validator(mode="after")
    def _one(self) -> HeaderMatch:
        _one_predicate(self, ("equal", "matches", "present"))
        return self

    def holds(self, value: str | None) -> bool:
        if self.present is not None:
            return (value is not None) == self.present
        if value is None:
            return False
        if self.equal is not None:
            return value == self.equal
        return re.search(self.matches or "", value) is not None


class BodyMatch(StrictModel):
    """A JSONPath over the JSON body (``jsonpath-ng``, extended: filters ``[?(@.a == 1)]``).

    ``empty: true``: every value it finds is empty (``[]``, ``{}``, ``""``, null), or it
    finds none (``$.pets[*].visits`` of an answer without pets); ``false``: some value is
    not. ``equal``: some value equals this JSON value. ``matches``: some value, as text
    (JSON for a list or mapping), contains a match of the regular expression.
    ``present``: it finds some value (false: none). A body that is not JSON holds none.
    """

    path: str = Field(min_length=1, max_length=1000, description="a JSONPath from $")
    empty: bool | None = Field(None, description="every value found is empty, or none is")
    equal: Any = Field(None, description="some value found equals this")
    matches: str | None = Field(None, max_length=1000, description="a regex found in a value")
    present: bool | None = Field(None, description="it finds some value (false: none)")

    @field_validator("path")
    @classmethod
    def _jsonpath(cls, path: str) -> str:
        if not path.startswith("$"):
            raise ValueError(f"path {path!r}: a JSONPath starts at the body's root, $")
        try:
            parse_jsonpath(path)
        except (JSONPathError, Exception) as exc:  # the parser raises a few kinds
            raise ValueError(f"path {path!r} is not a JSONPath: {exc}") from None
        return path

    @field_validator("matches")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return _regex(value)

    @model_validator(mode="after")
    def _one(self) -> BodyMatch:
        keys = ("empty", "equal", "matches", "present")
        given = [k for k in keys if getattr(self, k) is not None]
        if not given and "equal" in self.model_fields_set:
            given.append("equal")  # equal: null alone is a value to compare with
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of {', '.join(keys)}"
                + (f" (given: {', '.join(given)})" if given else "")
            )
        return self

    def finder(self) -> Any:
        """The compiled JSONPath (``holds`` takes it: compiled once per endpoint)."""
        return parse_jsonpath(self.path)

    def holds(self, finder: Any, document: Any) -> bool:
        values = [m.value for m in finder.find(document)]
        if self.present is not None:
            return bool(values) == self.present
        if self.empty is not None:
            return all(v is None or v in ("", [], {}) for v in values) == self.empty
        if self.matches is not None:
            return any(re.search(self.matches, _text(v)) for v in values)
        return any(_same(v, self.equal) for v in values)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, but 1 is 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


class Rule(StrictModel):
    """One way to tell a class: every condition given holds (at least one is given)."""

    status: list[int | str] | None = Field(
        None, min_length=1, max_length=100, description="codes, classes (5xx), ranges (500-504)"
    )
    header: list[HeaderMatch] | None = Field(None, min_length=1, max_length=20)
    body: list[BodyMatch] | None = Field(None, min_length=1, max_length=20)

    @field_validator("status", mode="before")
    @classmethod
    def _one_status(cls, value: object) -> object:
        return [value] if isinstance(value, int | str) else value

    @field_validator("header", "body", mode="before")
    @classmethod
    def _one_match(cls, value: object) -> object:
        return [value] if isinstance(value, dict) else value

    @field_validator("status")
    @classmethod
    def _statuses(cls, value: list[int | str] | None) -> list[int | str] | None:
        for item in value or ():
            _status_range(item)
        return value

    @model_validator(mode="after")
    def _some_condition(self) -> Rule:
        if self.status is None and self.header is None and self.body is None:
            raise ValueError("a rule gives status, header or body (or several)")
        return self

    def ranges(self) -> tuple[tuple[int, int], ...]:
        return tuple(_status_range(s) for s in self.status or ())


Rules = Annotated[list[Rule], Field(max_length=MAX_RULES)]


class Outcomes(StrictModel):
    """``traffic.<ep>.outcomes``: a preset, and the classes this endpoint tells its own way.

    ``outcomes: x-outcome`` is ``outcomes: {preset: x-outcome}``. A class given here
    replaces the preset's (``[]``: never); ``label``: the header whose value names an
    answer (the sample's ``outcome``: the failed answers' names in ``errors``).
    """

    preset: str = Field("default", description="the rules to start from: default, x-outcome")
    label: str | None = Field(None, max_length=200, description="the header naming an answer")
    refused: Rules | None = Field(None, description="the service declined (429, 503 by default)")
    fallback: Rules | None = Field(None, description="an answer standing in for the real one")
    degraded: Rules | None = Field(None, description="an answer lacking what it should carry")
    cached: Rules | None = Field(None, description="the real answer, from a cache")

    @model_validator(mode="before")
    @classmethod
    def _preset_by_name(cls, value: object) -> object:
        return {"preset": value} if isinstance(value, str) else value

    @field_validator(*DECLARED, mode="before")
    @classmethod
    def _one_rule(cls, value: object) -> object:
        return [value] if isinstance(value, dict) else value

    @field_validator("preset")
    @classmethod
    def _known(cls, name: str) -> str:
        if name not in PRESETS:
            raise ValueError(f"unknown outcomes preset {name!r}; known: {', '.join(PRESETS)}")
        return name

    @field_validator("label")
    @classmethod
    def _label_token(cls, name: str | None) -> str | None:
        if name is not None and not _TOKEN.fullmatch(name):
            raise ValueError(f"label {name!r} is not a header name (RFC 9110 token)")
        return name

    @classmethod
    def given(cls, value: Outcomes | str | None) -> Outcomes | None:
        """An endpoint's ``outcomes`` as written (a preset's name alone, or the mapping)."""
        return cls(preset=value) if isinstance(value, str) else value

    def resolved(self) -> Outcomes:
        """Every class and the label spelt out: the preset's where this gives none."""
        base = PRESETS[self.preset]
        return Outcomes(
            preset=self.preset,
            label=self.label if "label" in self.model_fields_set else base.label,
            **{
                k: list(getattr(self, k) if getattr(self, k) is not None else getattr(base, k))
                for k in DECLARED
            },
        )

    def rules(self, name: Declared) -> list[Rule]:
        found: list[Rule] | None = getattr(self, name)
        return found if found is not None else list(getattr(PRESETS[self.preset], name) or [])

    @property
    def reads_body(self) -> bool:
        """Whether some rule looks into the body (else it is never kept or parsed)."""
        return any(r.body for k in DECLARED for r in self.rules(k))

    def classifier(self) -> Classifier:
        return Classifier(self)

    def describe(self) -> str:
        """In a few words, for reports: ``x-outcome``, ``default + degraded``."""
        own = [k for k in DECLARED if getattr(self, k) is not None]
        return " + ".join([self.preset, *own])


PresetName = Literal["default", "x-outcome"]
"""A preset's name alone (``outcomes: x-outcome``): the JSON Schema's spelling of it."""

PRESETS: dict[str, Outcomes] = {
    "default": Outcomes.model_construct(
        preset="default",
        label=None,
        refused=[Rule(status=[429, 503])],
        fallback=[],
        degraded=[],
        cached=[],
    ),
    "x-outcome": Outcomes.model_construct(
        preset="x-outcome",
        label="X-Outcome",
        refused=[Rule(header=[HeaderMatch(name="X-Outcome", equal="not_permitted")])],
        fallback=[],
        degraded=[],
        cached=[Rule(status=["2xx"], header=[HeaderMatch(name="X-Outcome", equal="cached")])],
    ),
}
"""The outcomes presets: the one table of them. ``default`` is any service's; ``x-outcome``
the reference shop's (its ``X-Outcome`` header)."""
assert set(PRESETS) == set(get_args(PresetName)), "PresetName names every preset"
RECORDED_PRESET = "x-outcome"
"""How samples written before the ``class`` column are read (``recorded_class``)."""


class Classifier:
    """An endpoint's rules, ready for the answers the load generator reads.

    ``classify`` takes the status, the head (status line and headers, as received) and
    its lower-case copy, and the body when ``reads_body`` (else None). Headers are found
    in the head's bytes, so nothing is parsed that no rule asks for.
    """

    def __init__(self, outcomes: Outcomes) -> None:
        self.outcomes = outcomes
        self.reads_body = outcomes.reads_body
        self.label_key = (
            b"\r\n" + outcomes.label.lower().encode("ascii") + b":" if outcomes.label else None
        )
        self.rules = [
            (
                k,
                r.ranges() if r.status is not None else None,
                tuple(_header_test(h) for h in r.header or ()),
                tuple((b, b.finder()) for b in r.body or ()),
            )
            for k in DECLARED
            for r in outcomes.rules(k)
        ]
        self.status_only = all(
            k == "refused" and not headers and not bodies for k, _, headers, bodies in self.rules
        )
        """Only status codes decide (the ``default`` preset): one set lookup an answer."""
        self.refused_codes = frozenset(
            code
            for _, ranges, _, _ in self.rules
            for low, high in ranges or ((100, 599),)
            for code in range(low, high + 1)
        )

    def label(self, head: bytes, lower: bytes) -> str:
        if self.label_key is None:
            return ""
        return _field(head, lower, self.label_key).decode("latin-1")

    def classify(self, status: int, head: bytes, lower: bytes, body: bytes | None) -> str:
        if self.status_only:
            if status in self.refused_codes:
                return "refused"
            return "success" if 200 <= status <= 399 else "failure"
        document: Any = _UNREAD
        for name, ranges, headers, bodies in self.rules:
            if ranges is not None and not any(lo <= status <= hi for lo, hi in ranges):
                continue
            if headers and not _all_hold(headers, head, lower):
                continue
            if bodies:
                if document is _UNREAD:
                    document = _json(body)
                if document is _NOT_JSON or not all(b.holds(f, document) for b, f in bodies):
                    continue
            return name
        return "success" if 200 <= status <= 399 else "failure"


_UNREAD = object()
_NOT_JSON = object()


def _json(body: bytes | None) -> Any:
    if body is None or len(body) > MAX_BODY_BYTES:
        return _NOT_JSON
    try:
        return json.loads(body)
    except ValueError:  # not JSON, not UTF-8
        return _NOT_JSON


def _all_hold(tests: tuple[Callable[[bytes, bytes], bool], ...], head: bytes, lower: bytes) -> bool:
    for test in tests:  # noqa: SIM110 - a loop, not a generator, on each answer
        if not test(head, lower):
            return False
    return True


def _header_test(match: HeaderMatch) -> Callable[[bytes, bytes], bool]:
    """``match`` as a test of a head's bytes, its key and value encoded once: an endpoint's
    answers are each tested without touching the model."""
    key = b"\r\n" + match.name.lower().encode("ascii") + b":"
    if match.present is not None:
        present = match.present
        return lambda head, lower: (key in lower) == present
    if match.equal is not None:
        equal = match.equal.encode("latin-1", "replace")
        return lambda head, lower: key in lower and _field(head, lower, key) == equal
    pattern = re.compile(match.matches or "")
    return lambda head, lower: (
        key in lower and (pattern.search(_field(head, lower, key).decode("latin-1")) is not None)
    )


def _field(head: bytes, lower: bytes, key: bytes) -> bytes:
    """The value of the first header ``key`` (``b"\\r\\nname:"``, lower case) in ``head``."""
    i = lower.find(key)
    if i < 0:
        return b""
    i += len(key)
    end = lower.find(b"\r\n", i)
    return head[i : end if end >= 0 else len(head)].strip()


def recorded_class(status: int, outcome: str, error: str = "") -> str:
    """The class of a sample written before the ``class`` column, from its status and its
    ``outcome`` (then always the ``X-Outcome`` header): the ``x-outcome`` preset's reading.
    A dropped arrival (never sent) has none."""
    if error == "Dropped":
        return ""
    if not status:
        return "failure"
    preset = PRESETS[RECORDED_PRESET]
    head = b"HTTP/1.1 000 -\r\n"
    if outcome and preset.label:
        head += preset.label.encode("ascii") + b": " + outcome.encode("latin-1", "replace")
    head += b"\r\n"
    return _RECORDED.classify(status, head, head.lower(), None)


_RECORDED = Classifier(PRESETS[RECORDED_PRESET])


def headers_of(mapping: Mapping[str, str]) -> tuple[bytes, bytes]:
    """A head holding ``mapping``'s headers, and its lower-case copy (tests and tools)."""
    head = b"HTTP/1.1 000 -\r\n" + b"".join(
        f"{k}: {v}\r\n".encode("latin-1") for k, v in mapping.items()
    )
    return head, head.lower()
