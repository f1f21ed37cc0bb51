"""Placeholders in a build's command and environment, and the types that check them.

A command's arguments and environment values (and a container's) may use
``{port}``, ``{metrics_port}``, ``{pg_url}``, ``{dep.NAME.url}`` (and ``.address``, ``.host``,
``.port``), ``{run_dir}`` and ``{build}``;
they are filled when the build starts (``fill``), from loopback ports the
harness picked. ``{{`` and ``}}`` are literal braces. An unknown name, or a
placeholder in an environment variable's name, is a validation error with its
line. So is a NUL character (a ``\\0`` escape) in any text a build hands its service
(``no_nul``): no argument, environment value or file name can hold one.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

PLACEHOLDERS = ("build", "metrics_port", "pg_url", "port", "run_dir")
"""Names a command or container may use as ``{name}``; and ``{dep.NAME.PART}``, where a
named dependency listens (``DEPENDENCY_PLACEHOLDER``: its name is checked against the
scenario's, and its part against the dependency's kind)."""

DEPENDENCY_PARTS = ("url", "address", "host", "port")
"""``{dep.NAME.url}`` (``http://127.0.0.1:PORT``, an HTTP dependency's only),
``{dep.NAME.address}`` (``127.0.0.1:PORT``), ``{dep.NAME.host}`` and ``{dep.NAME.port}``."""

DEPENDENCY_PLACEHOLDER = re.compile(
    r"^dep\.([a-z][a-z0-9_-]{0,39})\.(" + "|".join(DEPENDENCY_PARTS) + r")$"
)
"""``{dep.NAME.PART}``: where the build finds the dependency ``dependencies.NAME``."""

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def placeholders_in(text: str) -> list[str]:
    """The placeholder names ``text`` uses, in order (``{{`` and ``}}`` are not placeholders)."""
    return [m.group(1) for m in _TOKEN.finditer(text) if m.group(1) is not None]


def fill(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each ``{name}`` replaced by ``values[name]`` and ``{{``/``}}`` unescaped."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        return values[m.group(1)]

    return _TOKEN.sub(one, text)


def nul_problem(text: str) -> str | None:
    """Why ``text`` cannot be handed to a service: a NUL character, at which the operating
    system ends an argument, an environment value or a file name (Python refuses them:
    ``ValueError: embedded null byte``); ``None`` when it has none."""
    at = text.find("\x00")
    if at < 0:
        return None
    return (
        f"contains a NUL character (\\0, at character {at + 1}): no program argument, "
        "environment value, file name or property a build hands its service can hold one"
    )


def no_nul(text: str) -> str:
    """Refuse a NUL character (``nul_problem``)."""
    said = nul_problem(text)
    if said is not None:
        raise ValueError(said)
    return text


def _known_placeholders(text: str) -> str:
    unknown = [
        name
        for name in placeholders_in(text)
        if name not in PLACEHOLDERS and not DEPENDENCY_PLACEHOLDER.match(name)
    ]
    if unknown:
        parts = "dep.NAME." + "|".join(DEPENDENCY_PARTS)
        known = ", ".join("{" + n + "}" for n in (*PLACEHOLDERS, parts))
        raise ValueError(
            f"unknown placeholder {{{unknown[0]}}}; known: {known} "
            "(write {{ and }} for literal braces)"
        )
    return text


def as_text(value: object) -> object:
    """Numbers and booleans as YAML wrote them become text; ``{port}`` unquoted gets a hint."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value.values())) is None:
        name = next(iter(value))
        raise ValueError(
            f'write "{{{name}}}" in quotes: unquoted, YAML reads {{{name}}} as a mapping'
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


Templated = Annotated[
    str,
    BeforeValidator(as_text, json_schema_input_type=str | int | float | bool),
    AfterValidator(no_nul),
    AfterValidator(_known_placeholders),
]
"""Text that may use placeholders (an argument, an environment value)."""


def _env_name(name: str) -> str:
    if placeholders_in(name):
        raise ValueError(
            f"environment variable name {name!r} uses a placeholder; placeholders are filled "
            "in values, not in names"
        )
    if not name or "=" in name or "\x00" in name:
        raise ValueError(f"{name!r} is not an environment variable name")
    return name


def _env_name_text(name: object) -> object:
    if isinstance(name, bool):
        raise ValueError(
            f"YAML read this variable's name as the boolean {str(name).lower()} (unquoted on, "
            "off, yes, no, true and false are booleans): put the name in quotes"
        )
    return str(name) if isinstance(name, int | float) else name


Env = dict[Annotated[str, BeforeValidator(_env_name_text), AfterValidator(_env_name)], Templated]
"""Environment variables for the service; values may use placeholders."""


def _argv(value: object) -> object:
    """A command as a list, or as one string split the way a POSIX shell would (no expansion)."""
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"cannot split the command into arguments: {exc}") from None
    if isinstance(value, list) and not value:
        raise ValueError("the command is empty")
    return value


Argv = Annotated[
    list[Templated], BeforeValidator(_argv, json_schema_input_type=str | list[Templated])
]
"""A command: ``[program, arg, ...]`` or a string, shlex-split."""


def no_placeholders(text: str) -> str:
    if placeholders_in(text):
        raise ValueError("placeholders are filled in command and env only")
    return text


Plain = Annotated[str, AfterValidator(no_nul), AfterValidator(no_placeholders)]
"""Text handed over as written (a folder, a jar, a program): no placeholders, no NUL."""
