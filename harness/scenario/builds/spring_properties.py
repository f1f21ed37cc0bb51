"""Spring Boot properties as a ``jar`` build gives them: Spring's own names, nested or dotted.

A scenario pastes a service's ``application.yml`` blocks verbatim (``resilience4j:``,
``server.tomcat.*``), so the names are read the way Spring Boot's relaxed binding reads
them (``ConfigurationPropertyName``): a name is elements separated by ``.`` (or in
``[...]``, taken as written); outside brackets, an element's case and every character
that is not a letter or digit are ignored, so ``server.PORT``, ``server.po-rt`` and
``Server.Port`` are all ``server.port``, while ``management.server-port`` is
``management.serverport``, another name Spring binds to nothing. What the harness sets
(``HARNESS_SET``) is refused in any of those spellings; a name given twice (dotted and
nested, or in two spellings) is refused, since which one Spring keeps is not said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.scenario.placeholders import PLACEHOLDERS, fill, nul_problem, placeholders_in

YamlPath = tuple[str | int, ...]

HARNESS_SET: dict[tuple[str, ...], str] = {
    ("server", "port"): "the port the harness picked ({port})",
    ("server", "address"): "127.0.0.1",
    ("management", "server", "port"): "the management port the harness picked ({metrics_port})",
    ("management", "server", "address"): "127.0.0.1",
}
"""Names the harness sets in every jar build's ``application.yml``, and to what."""

SPRING_CONFIG: dict[tuple[str, ...], str] = {
    ("spring", "config", "import"): "imports other files, whose properties outrank the harness's",
    ("spring", "config", "location"): "replaces the places Spring reads its files from",
    ("spring", "config", "additionallocation"): "is how the harness hands the jar its file",
    ("spring", "config", "name"): "renames the files Spring reads",
}
"""Names that decide which files Spring reads (and in what order), which the harness
decides: its ``application.yml`` (the ports among it) must outrank the jar's. Refused with
anything under them (``spring.config.import[0]``)."""

ADDITIONAL_LOCATION = ("spring", "config", "additionallocation")
"""``--spring.config.additional-location``: how the harness hands the file to the jar."""


def elements(name: str) -> tuple[str, ...]:
    """A property name's elements as Spring compares them (see the module)."""
    found: list[str] = []
    current = ""
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "[":
            end = name.find("]", i + 1)
            end = len(name) if end < 0 else end
            if current:
                found.append(current)
                current = ""
            found.append(name[i + 1 : end])  # an index or a map key: as written
            i = end + 1
            continue
        if ch == ".":
            if current:
                found.append(current)
            current = ""
        elif ch.isascii() and ch.isalnum():
            current += ch.lower()
        i += 1
    if current:
        found.append(current)
    return tuple(found)


def dotted(parts: tuple[str, ...]) -> str:
    return ".".join(parts)


@dataclass(frozen=True)
class Leaf:
    """One value of the properties: its name's elements and where the scenario wrote it."""

    name: tuple[str, ...]
    path: YamlPath
    value: Any


def leaves(properties: Mapping[str, Any], at: YamlPath = ()) -> Iterator[Leaf]:
    """Every value the properties set (a list is one value), nested names joined."""

    def walk(mapping: Mapping[Any, Any], prefix: tuple[str, ...], path: YamlPath) -> Iterator[Leaf]:
        for key, value in mapping.items():
            name = (*prefix, *elements(str(key)))
            if isinstance(value, Mapping) and value:
                yield from walk(value, name, (*path, key))
            else:
                yield Leaf(name, (*path, key), value)

    yield from walk(properties, (), at)


def texts(value: Any, path: YamlPath) -> Iterator[tuple[YamlPath, str]]:
    """Every text inside a value (lists and mappings walked), with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from texts(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from texts(item, (*path, i))


def _nul_problems(properties: Mapping[str, Any], at: YamlPath) -> Iterator[tuple[YamlPath, str]]:
    """A NUL character in a name or a text value, each at its own key: ``application.yml``
    would carry it (as ``\\0``) into a setting of the service, a path or a URL."""

    def walk(value: Any, path: YamlPath) -> Iterator[tuple[YamlPath, str]]:
        if isinstance(value, str) and (said := nul_problem(value)) is not None:
            yield path, said
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if (said := nul_problem(str(key))) is not None:
                    yield (*path, key), f"the name {str(key)!r} {said}"
                yield from walk(item, (*path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, (*path, i))

    yield from walk(properties, at)


def _set_by_harness(name: tuple[str, ...], written: str) -> str | None:
    if name in HARNESS_SET:
        return (
            f"{written} is {dotted(name)} to Spring, which the harness sets ("
            f"{HARNESS_SET[name]}) so that it knows where the service answers; remove it"
        )
    if name[:3] in SPRING_CONFIG:
        return (
            f"{written} is {dotted(name)} to Spring, which {SPRING_CONFIG[name[:3]]}: the "
            "harness decides which files the jar reads (its own, with the ports it picked, "
            "over the jar's), so that it knows where the service answers; remove it"
        )
    return None


def property_problems(properties: Mapping[str, Any], at: YamlPath) -> list[tuple[YamlPath, str]]:
    """What the properties get wrong: names the harness sets, names given twice, unknown
    placeholders; each at its own key (``at``: the ``properties`` key's path)."""
    found: list[tuple[YamlPath, str]] = []
    seen: dict[tuple[str, ...], YamlPath] = {}
    for leaf in leaves(properties, at):
        written = ".".join(str(p) for p in leaf.path[len(at) :])
        said = _set_by_harness(leaf.name, written)
        if said is not None:
            found.append((leaf.path, said))
        elif leaf.name in seen:
            first = ".".join(str(p) for p in seen[leaf.name][len(at) :])
            found.append(
                (
                    leaf.path,
                    f"{written} is {dotted(leaf.name)} to Spring, already given as {first}: "
                    "keep one (which one Spring would take is not said)",
                )
            )
        else:
            seen[leaf.name] = leaf.path
        for path, text in texts(leaf.value, leaf.path):
            unknown = [n for n in placeholders_in(text) if n not in PLACEHOLDERS]
            if unknown:
                known = ", ".join("{" + n + "}" for n in PLACEHOLDERS)
                found.append(
                    (path, f"unknown placeholder {{{unknown[0]}}}; known: {known} "
                     "(write {{ and }} for literal braces)")
                )  # fmt: skip
    return found + list(_nul_problems(properties, at))


_ARG = re.compile(r"^--([^=]+)(=.*)?$")
_SYSTEM_PROPERTY = re.compile(r"^-D([^=]+)(=.*)?$")


def argument_problem(text: str, *, java_option: bool) -> str | None:
    """Why a command-line argument (``--name=value``) or a JVM option (``-Dname=value``)
    may not be given: it would set what the harness sets, over its file."""
    match = (_SYSTEM_PROPERTY if java_option else _ARG).match(text)
    if match is None:
        return None
    name = elements(match.group(1))
    if name == ADDITIONAL_LOCATION:
        return (
            f"{text!r}: the harness passes --spring.config.additional-location (the file it "
            "writes with the build's properties); put these settings in properties"
        )
    return _set_by_harness(name, repr(text))


def filled(value: Any, values: Mapping[str, str]) -> Any:
    """``value`` with the placeholders in every text inside it filled."""
    if isinstance(value, str):
        return fill(value, values)
    if isinstance(value, Mapping):
        return {str(key): filled(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [filled(item, values) for item in value]
    return value


@dataclass(frozen=True)
class SetSetting:
    """A Spring setting a build gives its service, read back and compared after health
    (``harness.run.settings_in_force``)."""

    name: tuple[str, ...]
    """Its name's elements as Spring compares them (``elements``)."""
    written: str
    """The name as the scenario wrote it, dotted."""
    value: Any
    where: str
    """Where the build gives it: ``properties``, ``env SPRING_APPLICATION_JSON``, ``args``."""


_UNKNOWN = "\ue000"
"""Stands for a placeholder's value in a templated text: only the run knows it."""


def _as_run_gives(text: str) -> str:
    """A templated text (an env value, an argument) as the service will read it, each
    placeholder ``_UNKNOWN``."""
    return fill(text, {name: _UNKNOWN for name in placeholders_in(text)})


def settings_given(
    properties: Mapping[str, Any], env: Mapping[str, str], args: list[str]
) -> list[SetSetting]:
    """What a build sets in Spring's names: its ``properties``, the environment's
    ``SPRING_APPLICATION_JSON`` (a JSON object, nested or dotted) and ``--name=value``
    arguments (both templated: ``{{`` is a brace). A value with a placeholder in it (a
    port the harness picks) is left out: only the run knows it, and no Resilience4j
    setting takes one."""
    found: list[SetSetting] = []

    def add(mapping: Mapping[str, Any], where: str) -> None:
        for leaf in leaves(mapping):
            if leaf.value is None:
                continue
            if any(placeholders_in(t) or _UNKNOWN in t for _, t in texts(leaf.value, ())):
                continue
            written = ".".join(str(p) for p in leaf.path)
            found.append(SetSetting(leaf.name, written, leaf.value, where))

    add(properties, "properties")
    raw = env.get("SPRING_APPLICATION_JSON")
    if raw:
        try:
            parsed = json.loads(_as_run_gives(raw))
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            add(parsed, "env SPRING_APPLICATION_JSON")
    for text in args:
        match = _ARG.match(_as_run_gives(text))
        if match is not None and match.group(2) is not None:
            add({match.group(1): match.group(2)[1:]}, "args")
    return found
