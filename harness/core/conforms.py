"""Where a JSON value departs from its TypedDict: the check that read-back files get.

``report.json`` and ``manifest.json`` are typed (``analysis.model``,
``results.manifest``), but ``json.loads`` returns whatever the file holds: a
truncated or hand-edited file, or one of another version, would otherwise fail
deep in the analysis as a ``TypeError``. Read back, each is checked here first
and every departure is said with its dotted place (``builds.after.t0: expected
a number, got 'soon'``).
"""

from __future__ import annotations

import types
import typing
from typing import Any


def conforms(
    value: Any, hint: Any, where: str, *, extra_keys: bool = False, missing_keys: bool = False
) -> list[str]:
    """Where ``value`` departs from the type ``hint`` (TypedDicts checked key by key).

    Keys the model lacks are allowed with ``extra_keys`` (a newer harness of the same
    schema adds keys, which an older one reads past) and reported without it; required
    keys may be absent with ``missing_keys`` (a reader that defaults them).
    """
    flags = {"extra_keys": extra_keys, "missing_keys": missing_keys}
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {_show(value)}"]
        hints = typing.get_type_hints(hint)
        problems = []
        if not missing_keys:
            problems += [f"{where}.{k}: missing" for k in hint.__required_keys__ if k not in value]
        if not extra_keys:
            problems += [f"{where}.{k}: not in the model" for k in value if k not in hints]
        for key, item in value.items():
            if key in hints:
                problems += conforms(item, hints[key], f"{where}.{key}", **flags)
        return problems
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.NotRequired:
        return conforms(value, args[0], where, **flags)
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: expected one of {args}, got {_show(value)}"]
    if origin in (typing.Union, types.UnionType):
        options = [conforms(value, a, where, **flags) for a in args]
        return [] if any(not o for o in options) else min(options, key=len)
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {_show(value)}"]
        return [p for k, v in value.items() for p in conforms(v, args[1], f"{where}.{k}", **flags)]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: expected a list, got {_show(value)}"]
        return [
            p for i, v in enumerate(value) for p in conforms(v, args[0], f"{where}[{i}]", **flags)
        ]
    if hint is type(None):
        return [] if value is None else [f"{where}: expected null, got {_show(value)}"]
    if hint is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected a number, got {_show(value)}"]
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected an integer, got {_show(value)}"]
    if hint is object or hint is Any:
        return []
    name = getattr(hint, "__name__", str(hint))
    return [] if isinstance(value, hint) else [f"{where}: expected {name}, got {_show(value)}"]


def _show(value: Any) -> str:
    """``value`` as a problem shows it: short, so a list of a thousand rows is not printed."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def departures(problems: list[str], limit: int = 5) -> str:
    """The first ``limit`` problems on one line (their dotted places without the lead dot)."""
    shown = [p.lstrip(".") for p in problems[:limit]]
    more = len(problems) - limit
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
