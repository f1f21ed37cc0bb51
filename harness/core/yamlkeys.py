"""The keys a model allows at a point of its input, found from a pydantic error's location.

An unknown key is reported with the closest allowed spelling ("did you mean
``health``?"); pydantic says only where the key was. This walks the model's
type hints along that location: model fields by their alias (the spelling a
file uses), mappings and lists by their item type, and unions by the tag
pydantic put in the location (a ``Tag``, a ``type: Literal[...]`` value, a
member's class name), else by every member at once.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, Tag

_UNIONS = (typing.Union, types.UnionType)
_SEQUENCES = (list, tuple, set, frozenset, Sequence)
_MAPPINGS = (dict, Mapping)
_MAX_STEPS = 64
"""A location is at most as deep as the YAML it came from (``MAX_DEPTH``)."""


def keys_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys (aliases) allowed in the mapping at ``loc``; empty when it cannot be told."""
    found: dict[str, None] = {}
    for cls in _models_at(model, tuple(loc)[:_MAX_STEPS]):
        for name, field in cls.model_fields.items():
            found[field.alias or name] = None
    return list(found)


def _strip(tp: Any) -> tuple[Any, set[str]]:
    """``tp`` without ``Annotated``, and the union tags its metadata names."""
    tags: set[str] = set()
    while get_origin(tp) is typing.Annotated:
        tp, *meta = get_args(tp)
        tags |= {m.tag for m in meta if isinstance(m, Tag)}
    return tp, tags


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _tags(member: Any) -> set[str]:
    """How pydantic names a union member in an error location."""
    tp, tags = _strip(member)
    if _is_model(tp):
        tags.add(tp.__name__)
        for field in tp.model_fields.values():
            if get_origin(field.annotation) is Literal:
                tags |= {str(v) for v in get_args(field.annotation)}
    return tags


def _models_at(tp: Any, loc: tuple[str | int, ...]) -> list[type[BaseModel]]:
    tp, _ = _strip(tp)
    origin = get_origin(tp)
    if origin in _UNIONS:
        members = get_args(tp)
        if loc:
            tagged = [m for m in members if str(loc[0]) in _tags(m)]
            if tagged:
                return [c for m in tagged for c in _models_at(m, loc[1:])]
        return [c for m in members for c in _models_at(m, loc)]
    if not loc:
        return [tp] if _is_model(tp) else []
    part, rest = loc[0], loc[1:]
    if _is_model(tp):
        for name, field in tp.model_fields.items():
            if part in (field.alias, name):
                return _models_at(field.annotation, rest)
        return []
    args = get_args(tp)
    if origin in _MAPPINGS and len(args) == 2:
        return _models_at(args[1], rest)
    if origin in _SEQUENCES and args:
        if origin is tuple and isinstance(part, int) and part < len(args) and args[-1] is not ...:
            return _models_at(args[part], rest)
        return _models_at(args[0], rest)
    return []
