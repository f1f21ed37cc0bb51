"""Templates in what a request carries (header, query and body values): Jinja2, sandboxed.

A value is a template when it holds ``{{``, ``{%`` or ``{#``; any other text is
sent as written. Templates run in Jinja2's ``SandboxedEnvironment`` (no
attribute of Python's internals is reachable) with ``StrictUndefined``, and
every name a template uses is checked when the scenario is loaded
(``names_used``), so a typo is refused at ``harness validate``, not at send time.

Names a template may use (``BUILTINS``, beside the endpoint's own ``params``
and the columns of its ``data`` file):

- ``seq``: the request's index in its endpoint (0, 1, ...), the same in every
  build and however the plan is split over workers;
- ``uuid``: a UUID (version 4 form) drawn for the request from the seeded
  stream, the same value everywhere the request uses it;
- ``random_int(low, high)``: an integer drawn uniformly from ``[low, high]``;
- ``choice(values)``: one of ``values``, drawn uniformly.

Draws come from one ``random.Random`` per request, seeded by the scenario's
seed, the endpoint's name and the request's index (``request_rng``): every
build sends the same values.

A body value that is one ``{{ expression }}`` and nothing else keeps the
expression's type (``{{ seq }}`` is a JSON number, ``{{ [1, 2] }}`` a list);
any other template renders text. Header and query values are always text.
"""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, meta, nodes
from jinja2.sandbox import SandboxedEnvironment

BUILTINS = ("seq", "uuid", "random_int", "choice")
"""Names every template may use besides the endpoint's params and data columns."""

_MARKS = ("{{", "{%", "{#")
_WHOLE = re.compile(r"\A\{\{-?(.*?)-?\}\}\Z", re.DOTALL)

ENVIRONMENT = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
"""The one environment templates are parsed and rendered in (no loader: no file is read)."""


def is_template(text: str) -> bool:
    """Whether ``text`` is a template (else it is sent as written)."""
    return any(mark in text for mark in _MARKS)


def names_used(text: str) -> set[str]:
    """The names a template reads from its context; ``ValueError`` when it does not parse."""
    try:
        tree = ENVIRONMENT.parse(text)
    except TemplateSyntaxError as exc:
        raise ValueError(f"template does not parse: {exc.message} (line {exc.lineno})") from None
    return set(meta.find_undeclared_variables(tree)) - set(ENVIRONMENT.globals)


def _whole_expression(text: str) -> str | None:
    """The expression of a template that is one ``{{ ... }}`` and nothing else."""
    match = _WHOLE.match(text)
    if match is None:
        return None
    body = ENVIRONMENT.parse(text).body
    if len(body) != 1 or not isinstance(body[0], nodes.Output) or len(body[0].nodes) != 1:
        return None
    if isinstance(body[0].nodes[0], nodes.TemplateData):
        return None
    return match.group(1)


Render = Callable[[Mapping[str, Any]], Any]
"""A compiled value: from a request's context to what is sent."""


def compile_text(text: str) -> Render:
    """A template rendering text (headers, query values, text within a body)."""
    template = ENVIRONMENT.from_string(text)
    return template.render


def compile_value(text: str) -> Render:
    """A body value: one whole ``{{ expression }}`` keeps its type, anything else is text."""
    expression = _whole_expression(text)
    if expression is None:
        return compile_text(text)
    compiled = ENVIRONMENT.compile_expression(expression, undefined_to_none=False)

    def render(context: Mapping[str, Any]) -> Any:
        value = compiled(**context)
        if isinstance(value, StrictUndefined):  # a missing name (checked at load)
            str(value)  # raises UndefinedError naming it
        return value

    return render


def request_rng(seed: int, endpoint: str, index: int) -> random.Random:
    """The draws of one request (mix, row, uuid, random_int, choice): the same in every build
    and worker split, whatever the other requests drew."""
    return random.Random(f"{seed}:{endpoint}:{index}:request")


def draw_uuid(rng: random.Random) -> str:
    """A version-4 UUID from ``rng`` (not from the system: it must be the same every build)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def functions(rng: random.Random) -> dict[str, Callable[..., Any]]:
    """``random_int`` and ``choice``, drawing from one request's ``rng``."""

    def random_int(low: int, high: int) -> int:
        return rng.randint(int(low), int(high))

    def choice(values: Sequence[Any]) -> Any:
        if not values:
            raise ValueError("choice() of an empty list")
        return values[rng.randrange(len(values))]

    return {"random_int": random_int, "choice": choice}
