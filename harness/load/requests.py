"""Each request of an endpoint, by index: which of its requests (a mix), its path and query,
its headers and its body, as the scenario's ``RequestShape`` says (``harness.scenario.requests``).

Deterministic, as the arrivals are: the path's params come from the endpoint's
sequential stream (``Paths``, as always), everything else the request draws (its
request in a mix, a random row, ``uuid``, ``random_int``, ``choice``) from its own
stream (``request_rng``: the seed, the endpoint's name, its index), in a fixed
order: the mix first, then the row, then ``uuid``, then the templates' draws in
the order headers, query, body. The same index gives the same request in every
build and however the plan is split over workers. An endpoint without a shape is
sent exactly as before (no per-request stream is made).

Secrets (``{env: NAME}``) are read here, from this process's environment, once,
and sent as fixed headers; they never pass through a template.
"""

from __future__ import annotations

import bisect
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlencode

from harness.load.plan import EndpointPlan, Paths, idempotency_key
from harness.scenario.requests import FromEnv, Variant
from harness.scenario.templating import (
    Render,
    compile_text,
    compile_value,
    draw_uuid,
    functions,
    is_template,
    names_used,
    request_rng,
)

_DRAWING = frozenset({"uuid", "random_int", "choice"})


class MissingSecret(RuntimeError):
    """An ``{env: NAME}`` whose variable this process does not have (a worker started
    without it); the message names the variable, never a value."""


class Built(NamedTuple):
    """One request: which of the endpoint's requests (its wire endpoint), the target
    (path and query), extra header lines, and its body (None: the request's fixed one)."""

    variant: int
    path: str
    headers: str
    body: bytes | None


@dataclass
class Kind:
    """One of an endpoint's requests (the endpoint itself when it has no mix), compiled."""

    method: str
    path: str
    weight: float = 1.0
    body: Any = None
    """Its JSON body when fixed (or the shape of a templated one, for the wire's headers)."""
    body_render: Callable[[Mapping[str, Any]], Any] | None = None
    fixed_headers: dict[str, str] = field(default_factory=dict)
    header_templates: list[tuple[str, Render]] = field(default_factory=list)
    query: list[tuple[str, str | Render]] = field(default_factory=list)
    uses: set[str] = field(default_factory=set)
    """Names its templates read."""

    @property
    def varying(self) -> list[str]:
        return [name for name, _ in self.header_templates]


class Requests:
    """The requests of one endpoint, built in index order (``build``)."""

    def __init__(
        self, seed: int, name: str, ep: EndpointPlan, environ: Mapping[str, str] | None = None
    ) -> None:
        """``environ``: where secrets are read (the load generator's own environment);
        None when nothing is sent (the simulator asks only ``target``)."""
        self.seed, self.name, self.ep = seed, name, ep
        self.paths = Paths(seed, name, ep)
        self.keyed = ep.idempotency_key
        shape = ep.shape
        self.kinds: list[Kind]
        if shape is None or not shape.shaped:
            self.kinds = [Kind(ep.method, ep.path, body=ep.body)]
            self.shaped = False
            self.order, self.rows, self.columns = "cycle", ep.rows, ep.columns
            self.cumulative: list[float] = []
            self.draws = False
            return
        self.shaped = True
        variants = shape.requests or [Variant(path=ep.path)]
        self.kinds = [
            _compile(
                v.method or ep.method,
                v.path,
                v.weight,
                {**_by_lower(shape.headers), **_by_lower(v.headers)},
                {**shape.query, **v.query},
                v.body if v.body is not None else ep.body,
                environ,
                name,
            )
            for v in variants
        ]
        self.cumulative = []
        total = 0.0
        for kind in self.kinds:
            total += kind.weight
            self.cumulative.append(total)
        data = shape.data
        self.order = data.order if data is not None else "cycle"
        self.columns, self.rows = ep.columns, ep.rows
        self.draws = (
            len(self.kinds) > 1
            or (data is not None and self.order == "random")
            or any(kind.uses & _DRAWING for kind in self.kinds)
        )

    def kind(self, index: int, rng: random.Random | None = None) -> int:
        """Which of the endpoint's requests request ``index`` is (the first draw of its
        stream); ``rng``: that stream, when the caller has it already."""
        if len(self.kinds) == 1:
            return 0
        if rng is None:
            rng = request_rng(self.seed, self.name, index)
        point = rng.random() * self.cumulative[-1]
        return min(bisect.bisect_right(self.cumulative, point), len(self.kinds) - 1)

    def target(self, index: int) -> tuple[str, str]:
        """Request ``index``'s method and path (without its query): what the simulator
        needs, the same request ``build`` would make."""
        kind = self.kinds[self.kind(index)]
        values = self.paths.values(index)
        return kind.method, kind.path.format(**values) if values else kind.path

    def build(self, index: int) -> Built:
        """Request ``index`` (indices come in increasing order: params are a sequential
        stream)."""
        values = self.paths.values(index)
        if not self.shaped:
            path = self.ep.path.format(**values) if values else self.ep.path
            return Built(0, path, self._key(index), None)
        rng = request_rng(self.seed, self.name, index) if self.draws else None
        k = self.kind(index, rng)
        kind = self.kinds[k]
        context: dict[str, Any] = {**values, "seq": index}
        if self.columns:
            if self.order == "random":
                assert rng is not None
                row = self.rows[rng.randrange(len(self.rows))]
            else:
                row = self.rows[index % len(self.rows)]
            context.update(zip(self.columns, row, strict=True))
        if "uuid" in kind.uses:
            assert rng is not None
            context["uuid"] = draw_uuid(rng)
        if rng is not None and kind.uses & {"random_int", "choice"}:
            context.update(functions(rng))
        path = kind.path.format(**values) if values else kind.path
        if kind.query:
            pairs = [(n, v if isinstance(v, str) else v(context)) for n, v in kind.query]
            path += ("&" if "?" in path else "?") + urlencode(pairs)
        headers = self._key(index)
        for name, render in kind.header_templates:
            headers += f"{name}: {_header_value(name, render(context))}\r\n"
        body = None
        if kind.body_render is not None:
            body = json.dumps(kind.body_render(context), allow_nan=False).encode()
        return Built(k, path, headers, body)

    def _key(self, index: int) -> str:
        if not self.keyed:
            return ""
        return f"Idempotency-Key: {idempotency_key(self.seed, self.name, index)}\r\n"


def _by_lower(headers: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    return {name.lower(): (name, value) for name, value in headers.items()}


def _header_value(name: str, value: str) -> str:
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"header {name}: its template gave a line break or NUL")
    return value


def _secret(value: FromEnv, environ: Mapping[str, str] | None, endpoint: str, where: str) -> str:
    """The secret's value from ``environ``; None: nothing is sent (the simulator), empty."""
    if environ is None:
        return ""
    found = environ.get(value.env)
    if not found:
        raise MissingSecret(
            f"traffic.{endpoint}.{where}: the environment variable {value.env} is not set in "
            "the load generator's environment"
        )
    return value.prefix + found


def _compile(
    method: str,
    path: str,
    weight: float,
    headers: dict[str, tuple[str, Any]],
    query: dict[str, Any],
    body: Any,
    environ: Mapping[str, str] | None,
    endpoint: str,
) -> Kind:
    kind = Kind(method, path, weight, body=body)
    for name, value in headers.values():
        if isinstance(value, FromEnv):
            kind.fixed_headers[name] = _secret(value, environ, endpoint, f"headers.{name}")
        elif is_template(value):
            kind.header_templates.append((name, compile_text(value)))
            kind.uses |= names_used(value)
        else:
            kind.fixed_headers[name] = value
    for name, value in query.items():
        if isinstance(value, FromEnv):
            kind.query.append((name, _secret(value, environ, endpoint, f"query.{name}")))
        elif isinstance(value, str) and is_template(value):
            kind.query.append((name, compile_text(value)))
            kind.uses |= names_used(value)
        else:
            kind.query.append((name, _query_text(value)))
    templated: list[str] = []
    kind.body_render = _compile_body(body, templated)
    for text in templated:
        kind.uses |= names_used(text)
    return kind


def _query_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _compile_body(value: Any, templated: list[str]) -> Callable[[Mapping[str, Any]], Any] | None:
    """A body with templates as a function of the request's context; None when it has none."""
    if isinstance(value, str):
        if not is_template(value):
            return None
        templated.append(value)
        return compile_value(value)
    if isinstance(value, dict):
        parts = {k: _compile_body(v, templated) for k, v in value.items()}
        if all(p is None for p in parts.values()):
            return None
        return lambda ctx: {k: value[k] if p is None else p(ctx) for k, p in parts.items()}
    if isinstance(value, list):
        items = [_compile_body(v, templated) for v in value]
        if all(p is None for p in items):
            return None
        return lambda ctx: [value[i] if p is None else p(ctx) for i, p in enumerate(items)]
    return None
