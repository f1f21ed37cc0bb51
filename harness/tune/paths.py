"""Settings addressed as dotted paths into a build's own YAML mapping, in the target's names.

``resilience4j.circuitbreaker.failure-rate-threshold`` (a shop build),
``properties.resilience4j.circuitbreaker.instances.pgClient.sliding-window-size`` (a jar
build: nested or dotted keys, as the file writes them), ``env.ERROR_THRESHOLD`` or
``command.3`` (a command build's variable, or its argument by index).
"""

from __future__ import annotations

import copy
from typing import Any

MISSING = object()
"""What ``get_path`` answers for a setting the build does not write (its default applies)."""

OPEN_MAPPINGS = ("properties", "env")
"""Keys whose mappings take any name (a jar's Spring properties, a process's environment):
an axis under them must name one the base build already sets, since no schema can tell a
typo from a new name."""


def _key(container: Any, parts: list[str]) -> tuple[Any, int]:
    """The key of ``container`` the longest head of ``parts`` names (a dotted key such as
    ``pg.base-url`` written whole), and how many parts it took; (None, 0) when none."""
    if isinstance(container, list):
        head = parts[0]
        if head.isdigit() and int(head) < len(container):
            return int(head), 1
        return None, 0
    if isinstance(container, dict):
        for n in range(len(parts), 0, -1):
            key = ".".join(parts[:n])
            if key in container:
                return key, n
    return None, 0


def get_path(mapping: dict[str, Any], path: str) -> Any:
    """The value at ``path``, or ``MISSING``."""
    value: Any = mapping
    parts = path.split(".")
    while parts:
        key, n = _key(value, parts)
        if n == 0:
            return MISSING
        value, parts = value[key], parts[n:]
    return value


def set_path(mapping: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``mapping`` with ``value`` at ``path``, mappings made on the way."""
    out = copy.deepcopy(mapping)
    container: Any = out
    parts = path.split(".")
    while True:
        key, n = _key(container, parts)
        if n == len(parts):
            container[key] = copy.deepcopy(value)
            return out
        if n == 0:
            if not isinstance(container, dict):
                raise KeyError(f"{path}: {parts[0]!r} is not an index of the list there")
            key, n = parts[0], 1
            container[key] = {} if len(parts) > 1 else None
            if len(parts) == 1:
                container[key] = copy.deepcopy(value)
                return out
        nxt = container[key]
        if not isinstance(nxt, dict | list):
            raise KeyError(f"{path}: {'.'.join(parts[:n])} is a value, not a mapping")
        container, parts = nxt, parts[n:]


def in_open_mapping(path: str) -> bool:
    """Whether ``path`` names a key of a mapping that takes any name (``OPEN_MAPPINGS``)."""
    return any(part in OPEN_MAPPINGS for part in path.split(".")[:-1])
