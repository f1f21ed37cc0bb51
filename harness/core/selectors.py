"""Selectors: which scraped series a canonical one is read from, as a scenario writes it.

A selector is a Prometheus series name with optional exact label matches, in
the exposition's own spelling: ``tomcat_threads_busy_threads``,
``circuit{event="reject",name="vendor"}``. Samples matching it are summed.

It sits in ``core`` so that the scenario schema can check a build's
``metrics.map`` at ``harness validate`` time (``parse_selector``) and the
analysis can read with the same objects (``harness.analysis.series``).

Counter names are matched with or without ``_total``: a counter exposed as
``circuit`` (opossum-prometheus, ``# TYPE circuit counter``) is stored by the
parser as ``circuit_total``, and Micrometer's ``..._calls_total`` may be
declared with or without the suffix; ``Selector.spellings`` gives both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

CONTAINER_SOURCE = "container"
"""The scrape source of a ``docker`` build's container: the Engine's stats of it, served as
Prometheus gauges by ``harness.run.kinds.docker.runner`` (beside the ``target`` and ``pg``
sources)."""

RESOURCE_SERIES = {"cpu_pct": "container_cpu_percent", "memory_bytes": "container_memory_bytes"}
"""What a build costs, read from ``CONTAINER_SOURCE`` (not through a preset): canonical name
-> the gauge the docker runner serves. ``cpu_pct`` is % of one core (Docker's ``docker stats``
CPU %: 200 is two cores busy); ``memory_bytes`` is usage less the inactive page cache."""

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_TOTAL = "_total"


@dataclass(frozen=True)
class Selector:
    """A concrete series, optionally narrowed by labels; values of matching samples are summed."""

    series: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def spellings(self) -> tuple[str, str]:
        """The name as written first, then the other counter spelling (``_total`` added or
        removed): a reader tries the second only when the first has no sample."""
        if self.series.endswith(_TOTAL) and len(self.series) > len(_TOTAL):
            return self.series, self.series[: -len(_TOTAL)]
        return self.series, self.series + _TOTAL

    def with_labels(self, **labels: str) -> Selector:
        """The same series with more label matches (existing ones win)."""
        return Selector(self.series, {**labels, **self.labels})

    def __str__(self) -> str:
        if not self.labels:
            return self.series
        pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(self.labels.items()))
        return f"{self.series}{{{pairs}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def parse_selector(text: str) -> Selector:
    """A selector from ``name`` or ``name{label="value",...}`` (exposition syntax).

    Only exact matches (``=``) are accepted; values are double-quoted with the
    exposition's escapes (``\\"``, ``\\\\``, ``\\n``); spaces around tokens and a
    trailing comma are allowed. Raises ``ValueError`` naming the column and what
    was expected, e.g. ``'circuit{event=reject}': column 15: expected a double-quoted
    label value``.
    """
    if not isinstance(text, str):
        raise ValueError(f'a selector must be text such as name{{label="value"}}, got {text!r}')
    p = _Parser(text)
    p.skip()
    name = p.token(_NAME, "a metric name (letters, digits, '_' or ':', not starting with a digit)")
    labels: dict[str, str] = {}
    p.skip()
    if p.peek("{"):
        p.pos += 1
        while True:
            p.skip()
            if p.peek("}"):
                break
            label = p.token(_LABEL, "a label name or '}'")
            p.skip()
            if p.peek("!=") or p.peek("=~") or p.peek("!~"):
                raise p.error(
                    f'only exact matches are supported (label="value"), not {p.rest()[:2]!r}'
                )
            p.expect("=", "'=' after the label name")
            p.skip()
            value = p.quoted()
            if label in labels:
                raise p.error(f"label {label!r} is given twice")
            labels[label] = value
            p.skip()
            if p.peek(","):
                p.pos += 1
                continue
            if not p.peek("}"):
                raise p.error("expected ',' or '}' after a label value")
        p.pos += 1
        p.skip()
    if p.pos < len(text):
        raise p.error(f"unexpected {p.rest()[:10]!r} after the selector")
    return Selector(name, labels)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str) -> ValueError:
        if not self.text.strip():
            return ValueError('empty selector; expected name or name{label="value"}')
        return ValueError(f"{self.text!r}: column {self.pos + 1}: {message}")

    def rest(self) -> str:
        return self.text[self.pos :]

    def peek(self, s: str) -> bool:
        return self.text.startswith(s, self.pos)

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def token(self, pattern: re.Pattern[str], what: str) -> str:
        m = pattern.match(self.text, self.pos)
        if m is None:
            found = self.rest()[:1]
            raise self.error(f"expected {what}" + (f", found {found!r}" if found else ""))
        self.pos = m.end()
        return m.group()

    def expect(self, s: str, what: str) -> None:
        if not self.peek(s):
            raise self.error(f"expected {what}")
        self.pos += len(s)

    def quoted(self) -> str:
        if not self.peek('"'):
            raise self.error('expected a double-quoted label value, such as "vendor"')
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                nxt = self.text[self.pos + 1 : self.pos + 2]
                if nxt not in _ESCAPES:
                    raise self.error(f'unknown escape \\{nxt} (use \\", \\\\ or \\n)')
                out.append(_ESCAPES[nxt])
                self.pos += 2
                continue
            out.append(ch)
            self.pos += 1
        raise self.error("unterminated label value (missing closing '\"')")
