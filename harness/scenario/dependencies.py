"""The dependencies the harness plays for the builds: a scenario's ``dependencies:`` and ``pg:``.

A scenario names its dependencies; each is one HTTP listener of its own, with
its own fault phases, ledger and figures, on the run's one phase clock:

- a **stub**: its API as data, ``routes:`` (harness.stubs.model.StubRoute) and/or
  a WireMock ``mappings:`` folder read as it is (``harness.stubs.wiremock``);
- a **forward**: a real upstream (``forward: http://127.0.0.1:9000``), every call
  passed on to it and the phase's faults applied on the way;
- a **TCP** dependency (``tcp: 127.0.0.1:5432``: a database, a cache): the TCP
  fault proxy (``harness.proxy``) in front of the real upstream, its phases'
  ``toxics`` (``harness.scenario.toxics``) on the same clock; no ledger (bytes,
  not calls): its figures are the proxy's counters, scraped;
- ``pg``: the payment gateway with its own two routes (a scenario's ``pg:``),
  kept for every scenario written before dependencies were data.

A build points at a dependency with ``{dep.NAME.url}`` (``{pg_url}`` for ``pg``), or
its ``{dep.NAME.address}`` (host:port), ``{dep.NAME.host}`` and ``{dep.NAME.port}``;
a TCP dependency has no URL, only those three.
Phases of different dependencies may not overlap: the report's time line is one
list of named phases, each breaking one dependency while the others stay healthy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from harness.core.net import AddressError, is_loopback, parse_address
from harness.scenario.faults import PgSchedule, Phase
from harness.scenario.placeholders import Plain
from harness.stubs.model import StubRoute, StubRoutesError, Stubs
from harness.stubs.wiremock import load_mappings

PG = "pg"
"""The payment gateway's name as a dependency (``{pg_url}``, ``pg-ledger.csv``, source ``pg``)."""

MAX_DEPENDENCIES = 16
"""Each dependency is a process of its own (two listeners, a ledger) for every build."""

DEPENDENCY_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
"""Lower case: a name is part of a placeholder, a file name, a process name and a figure path."""

ApiKind = Literal["pg", "stubs", "forward", "tcp"]

PLACEHOLDER_PARTS: dict[str, tuple[str, ...]] = {
    "pg": ("url",),
    "stubs": ("url", "address", "host", "port"),
    "forward": ("url", "address", "host", "port"),
    "tcp": ("address", "host", "port"),
}
"""What ``{dep.NAME.<part>}`` a build may name, by the dependency's API (``pg``: ``{pg_url}``)."""


class Dependency(PgSchedule):
    """One named dependency (``dependencies.<name>``): its API, and its fault schedule."""

    routes: list[StubRoute] = Field(
        default_factory=list, max_length=1000, description="the API as data, matched in order"
    )
    mappings: Plain | None = Field(
        None,
        description="a WireMock mappings folder (relative to the scenario file), after routes",
    )
    forward: str | None = Field(
        None, description="a real upstream's base URL: each call is passed on to it"
    )
    call_key: str | None = Field(
        None,
        max_length=200,
        description="the request header that names a call (its fate and attempt count); "
        "default: method, path, query and body",
    )
    tcp: str | None = Field(
        None,
        description="a real TCP upstream's loopback HOST:PORT (a database, a cache): the TCP "
        "fault proxy stands before it and its phases give toxics",
    )

    @property
    def api(self) -> ApiKind:
        if self.tcp is not None:
            return "tcp"
        return "forward" if self.forward is not None else "stubs"

    @field_validator("tcp")
    @classmethod
    def _loopback_address(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            host, port = parse_address(value, "tcp", port_zero=False)
        except AddressError as exc:
            raise ValueError(
                f"{exc}; traffic stays on this machine: the proxy breaks a dependency on loopback"
            ) from None
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @field_validator("forward")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL such as http://127.0.0.1:9000")
        if parts.query or parts.fragment:
            raise ValueError(f"{value!r}: a base URL has no query or fragment")
        if not is_loopback(parts.hostname):
            raise ValueError(
                f"{value!r}: traffic stays on this machine; forward to a loopback address"
            )
        return value.rstrip("/")

    @model_validator(mode="after")
    def _one_api(self) -> Dependency:
        stubs = bool(self.routes) or self.mappings is not None
        if self.tcp is not None:
            given = [k for k in ("routes", "mappings", "forward", "call_key", "capacity")
                     if k in self.model_fields_set]  # fmt: skip
            if given:
                keys = ", ".join(k.replace("_", "-") for k in given)
                raise ValueError(
                    f"a TCP dependency (tcp:) is bytes behind the proxy, not HTTP calls: drop "
                    f"{keys}"
                )
            return self
        if self.forward is not None and stubs:
            raise ValueError("give forward (a real upstream) or routes/mappings (a stub), not both")
        if self.forward is None and not stubs:
            raise ValueError(
                "a dependency needs its API: routes (stubs as data), mappings (a WireMock "
                "mappings folder), forward (a real upstream's URL) or tcp (a real TCP "
                "upstream's HOST:PORT)"
            )
        return self


@dataclass(frozen=True)
class Played:
    """A dependency as the run plays it: ``pg`` and the named ones alike."""

    name: str
    schedule: PgSchedule
    """Phases, capacity and port (a ``Dependency`` for a named one)."""
    api: ApiKind

    @property
    def phases(self) -> list[Phase]:
        return self.schedule.phases

    @property
    def placeholder(self) -> str:
        """How a build names where it is (a TCP dependency has no URL: its address)."""
        if self.name == PG:
            return "pg_url"
        return f"dep.{self.name}.{'address' if self.api == 'tcp' else 'url'}"

    @property
    def ledger_file(self) -> str:
        """Its ledger in the build's folder (a TCP dependency keeps none: ``has_ledger``)."""
        return "pg-ledger.csv" if self.name == PG else f"dep-{self.name}-ledger.csv"

    @property
    def has_ledger(self) -> bool:
        """Whether it records every call (an HTTP dependency); the TCP proxy counts bytes."""
        return self.api != "tcp"

    @property
    def tcp_upstream(self) -> str | None:
        """A TCP dependency's real upstream (HOST:PORT); None for an HTTP one."""
        return self.schedule.tcp if isinstance(self.schedule, Dependency) else None

    @property
    def source(self) -> str:
        """Its name as a process of the build and as a metrics source."""
        return PG if self.name == PG else f"dep-{self.name}"

    @property
    def at(self) -> tuple[str, ...]:
        """Where it is declared in the scenario file."""
        return (PG,) if self.name == PG else ("dependencies", self.name)


def check_dependency_name(name: str) -> str:
    if name == PG:
        raise ValueError(
            "'pg' is the payment gateway's name: declare it as the top-level pg: block"
        )
    if not DEPENDENCY_NAME.match(name):
        raise ValueError(
            f"dependency name {name!r}: lower-case letters, digits, '-' and '_', starting with "
            "a letter, at most 40 characters (it names a placeholder, a file and a figure)"
        )
    return name


def toxic_problems(played: list[Played]) -> list[tuple[tuple[str | int, ...], str]]:
    """Toxics on an HTTP dependency's phase, and HTTP faults or blips on a TCP one's."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    for dep in played:
        tcp = dep.api == "tcp"
        for i, phase in enumerate(dep.phases):
            at: tuple[str | int, ...] = (*dep.at, "phases", i)
            if not tcp and phase.toxics:
                found.append(
                    (
                        (*at, "toxics"),
                        f"toxics are a TCP dependency's faults; {dep.name!r} is HTTP: give its "
                        "phase fault or faults",
                    )
                )
            if tcp and phase.given_fault is not None:
                found.append(
                    (
                        (*at, phase.given_fault),
                        f"{dep.name!r} is a TCP dependency (tcp:): its phases give toxics "
                        "(latency, bandwidth, slow-close, timeout, reset-peer, slicer, "
                        "limit-data: docs/proxy.md), not HTTP faults",
                    )
                )
            if tcp and phase.repeat is not None:
                found.append(
                    (
                        (*at, "repeat"),
                        "a TCP dependency's toxics hold for the whole phase; for blips, give "
                        "several short phases",
                    )
                )
    return found


def overlap_problems(played: list[Played]) -> list[tuple[tuple[str | int, ...], str]]:
    """Phases of different dependencies that overlap in time, or share a name: the run's time
    line is one list of phases."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    seen: list[tuple[Played, Phase]] = []
    for dep in played:
        for i, phase in enumerate(dep.phases):
            for other, earlier in seen:
                if other.name == dep.name:
                    continue
                if earlier.name == phase.name:
                    found.append(
                        (
                            (*dep.at, "phases", i, "name"),
                            f"phase name {phase.name!r} is also a phase of {other.name!r}: "
                            "phase names are unique across dependencies",
                        )
                    )
                elif phase.start < earlier.end - 1e-9 and earlier.start < phase.end - 1e-9:
                    found.append(
                        (
                            (*dep.at, "phases", i, "start"),
                            f"phase {phase.name!r} of {dep.name!r} overlaps phase "
                            f"{earlier.name!r} of {other.name!r}: a phase breaks one "
                            "dependency while the others stay healthy; give them "
                            "consecutive phases",
                        )
                    )
            seen.append((dep, phase))
    return found


def timeline(played: list[Played]) -> list[Phase]:
    """Every dependency's phases in one list, by start (checked not to overlap)."""
    return sorted((p for dep in played for p in dep.phases), key=lambda p: p.start)


def dependency_stubs(dep: Dependency, base: Path, where: str) -> Stubs:
    """The dependency's stubs: its routes, then its mappings folder's (from ``base``).

    ``InputError`` says every route or mapping refused, with its place."""
    routes = Stubs.from_routes(dep.routes, f"{where}.routes")
    if dep.mappings is None:
        return routes
    return Stubs([*routes.routes, *load_mappings(base / dep.mappings).routes])


def route_problems(name: str, dep: Dependency) -> list[tuple[tuple[str | int, ...], str]]:
    """The dependency's routes checked as the gateway compiles them (templates, shadowing),
    each at its route's field."""
    try:
        Stubs.from_routes(dep.routes, f"dependencies.{name}.routes")
    except StubRoutesError as exc:
        return [
            (("dependencies", name, "routes", p.index, *p.field), p.message) for p in exc.problems
        ]
    return []
