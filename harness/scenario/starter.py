"""Starter scenarios (``harness init``) and the scenario's JSON Schema (``harness schema``).

``starter_scenario`` writes the YAML text of a commented scenario for a
user's own service: a stack (``spring-boot``, ``opossum`` or ``shop``: which
health path and metric names it speaks) and a build kind (a ``command`` the
harness starts, a Spring Boot ``jar`` run with each build's properties, a docker
``image``, a ``url`` already running, or, for the shop, the reference shop
itself). Its first line points editors that speak the ``yaml-language-server``
comment at the schema file written next to it, so they complete keys and flag
mistakes while the user types.

``scenario_json_schema`` is the JSON Schema of ``Scenario`` as pydantic
generates it from the models (validation mode: what a file may say, so a
duration is a number of seconds *or* text such as ``30s``), with the bounds
pydantic leaves under its own names (``le`` next to an ``anyOf``) renamed to
JSON Schema's. Pure functions: no file is read or written here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from harness.core.errors import InputError
from harness.scenario.schema import Scenario

SCHEMA_FILE = "harness.schema.json"
"""Name of the schema file ``harness init`` writes next to the scenario."""

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect pydantic generates."""

SCHEMA_TITLE = "harness scenario"

StarterPreset = Literal["spring-boot", "opossum", "shop"]
STARTER_PRESETS: tuple[StarterPreset, ...] = ("spring-boot", "opossum", "shop")
"""The stacks ``harness init`` knows (``metrics.preset`` names)."""

StarterKind = Literal["shop", "command", "jar", "docker", "url"]

PG_PORT = 18089
"""The fixed gateway port of a ``url`` starter (its service must be pointed there)."""

# ---------------------------------------------------------------- JSON Schema

_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}


def _standard_bounds(node: Any) -> Any:
    """``node`` with pydantic's leftover ``le``/``gt``... (beside an ``anyOf``) as JSON Schema's.

    Pydantic cannot push a bound into a union (``Duration | None``), so it keeps
    the constraint's Python name; JSON Schema's numeric keywords apply to
    numbers only, so the renamed bound leaves text and null alone, as the model does.
    """
    if isinstance(node, list):
        return [_standard_bounds(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _standard_bounds(value) for key, value in node.items()}
    if "anyOf" in out:
        for short, standard in _BOUNDS.items():
            if isinstance(out.get(short), int | float) and standard not in out:
                out[standard] = out.pop(short)
    return out


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file (draft 2020-12), from the pydantic models."""
    generated = _standard_bounds(Scenario.model_json_schema(by_alias=True, mode="validation"))
    generated.pop("title", None)
    return {"$schema": SCHEMA_DIALECT, "title": SCHEMA_TITLE, **generated}


def schema_text() -> str:
    """``scenario_json_schema`` as the text of a ``.json`` file."""
    return json.dumps(scenario_json_schema(), indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- starter scenarios


@dataclass(frozen=True)
class _Stack:
    """What a stack's service looks like from outside: where it says it is ready, its metrics."""

    health_path: str
    health_timeout: str
    metrics_path: str
    port_env: str
    pg_env: str
    command: str
    """The command a starter gets when none is given (edit it)."""
    note: tuple[str, ...]
    """Comment lines on what the stack needs to expose its metrics."""


_STACKS: dict[str, _Stack] = {
    "spring-boot": _Stack(
        health_path="/actuator/health",
        health_timeout="120s",
        metrics_path="/actuator/prometheus",
        port_env="SERVER_PORT",
        pg_env="PG_BASE_URL",
        command="java -jar build/libs/app.jar",
        note=(
            "Needs actuator, micrometer-registry-prometheus and resilience4j-spring-boot3, and",
            "server.tomcat.mbeanregistry.enabled=true (README); add breaker: <its name> if the",
            "service has several breakers.",
        ),
    ),
    "opossum": _Stack(
        health_path="/health",
        health_timeout="30s",
        metrics_path="/metrics",
        port_env="PORT",
        pg_env="PG_URL",
        command="node server.js",
        note=(
            "Reads opossum-prometheus's circuit{name,event} counters; map: busy_workers and",
            "max_workers to your in-flight gauge and concurrency limit (docs/scenario.md).",
        ),
    ),
    "shop": _Stack(
        health_path="/health",
        health_timeout="60s",
        metrics_path="/metrics",
        port_env="PORT",
        pg_env="PG_URL",
        command="python -m targets.shop",
        note=("The reference shop's series names (shop_workers_busy, resilience4j_*).",),
    ),
}


def _q(text: str) -> str:
    """``text`` as a double-quoted YAML scalar (JSON's escapes are YAML's)."""
    return json.dumps(text, ensure_ascii=False)


def starter_name(stem: str) -> str:
    """A scenario name from a file's stem: a slug, ``my-service`` when nothing is left."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip(".-")
    slug = re.sub(r"\.{2,}", ".", slug)[:64].strip(".-")
    return slug if slug and slug != "scenario" else "my-service"


def starter_kind(
    preset: str,
    *,
    command: str | None = None,
    image: str | None = None,
    url: str | None = None,
    jar: str | None = None,
) -> StarterKind:
    """Which build kind the options ask for; ``InputError`` for an unknown preset or two kinds."""
    if preset not in STARTER_PRESETS:
        raise InputError(f"unknown preset {preset!r}; known: {', '.join(STARTER_PRESETS)}")
    options = (("--command", command), ("--jar", jar), ("--image", image), ("--url", url))
    given = [opt for opt, value in options if value is not None]
    if len(given) > 1:
        raise InputError(
            f"give one of --command, --jar, --image or --url, not {' and '.join(given)}"
        )
    for opt, value in options:
        if value is not None and not value.strip():
            raise InputError(f"{opt} is empty")
    if jar is not None and preset != "spring-boot":
        raise InputError("--jar runs a Spring Boot jar: give it with --preset spring-boot")
    if command is not None:
        return "command"
    if jar is not None:
        return "jar"
    if image is not None:
        return "docker"
    if url is not None:
        return "url"
    return "shop" if preset == "shop" else "command"


def _after_image(image: str) -> str:
    """``shop:before`` -> ``shop:after``; any other image is used as it is for both builds."""
    name, sep, tag = image.rpartition(":")
    if sep and "/" not in tag and tag == "before":
        return f"{name}:after"
    return image


def _after_url(url: str) -> str:
    """The same URL one port up (the after version runs beside the before one)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return url
    if port is None or port >= 65535 or parts.hostname is None:
        return url
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return urlunsplit(parts._replace(netloc=f"{host}:{port + 1}"))


COMMENT_COLUMN = 40
"""Where an end-of-line comment starts in a starter (one above the line when it does not fit)."""


def _commented(code: str, comment: str | None = None) -> list[str]:
    """``code`` with ``comment`` at the end of the line, or on the line above when too long."""
    if comment is None:
        return [code]
    if len(code) < COMMENT_COLUMN - 1 and COMMENT_COLUMN + 2 + len(comment) <= 100:
        return [f"{code.ljust(COMMENT_COLUMN)}# {comment}"]
    if len(code) + 4 + len(comment) <= 100:
        return [f"{code}  # {comment}"]
    indent = code[: len(code) - len(code.lstrip())]
    return [f"{indent}# {comment}", code]


def starter_scenario(
    preset: str,
    *,
    command: str | None = None,
    image: str | None = None,
    url: str | None = None,
    jar: str | None = None,
    name: str = "my-service",
    schema_ref: str = SCHEMA_FILE,
    mappings: Sequence[tuple[str, str]] = (),
) -> str:
    """The text of a commented starter scenario for a service of stack ``preset``.

    At most one of ``command``, ``jar`` (relative to the file's folder), ``image``
    and ``url`` (none: the reference shop for ``shop``, the stack's usual command
    otherwise). ``schema_ref`` is where
    the first line points editors (a path relative to the file, or a URL).
    ``mappings``: (dependency name, WireMock mappings folder relative to the file) of each
    dependency to play from its mappings, instead of the payment gateway ``pg``.
    """
    kind = starter_kind(preset, command=command, image=image, url=url, jar=jar)
    if mappings and kind == "shop":
        raise InputError(
            "--mappings: the reference shop calls the payment gateway only; give your "
            "service's --command, --jar, --image or --url"
        )
    what = "the reference shop's builds" if kind == "shop" else f"{kind} builds"
    lines = [
        f"# yaml-language-server: $schema={schema_ref}",
        f"# A starter scenario: {preset} metrics, {what}. Edit the paths, rates and builds,",
        "# then: harness validate <this file>, harness run <this file>.",
        "# Every key: docs/scenario.md. Durations: 500ms, 30s, 3m, 1m30s or seconds.",
        *_commented(f"name: {name}", "names the results folder, results/<name>/"),
        *_commented("seed: 42", "same seed, same fate for every request in every build"),
        *_commented("warmup: 10s", "healthy gateway first; excluded from every figure"),
        *_commented("duration: 120s", "the measured window; phases count from its start"),
        "",
        "# The load, open model: each endpoint at a constant rate, sent whether or not earlier",
        "# calls returned.",
        "traffic:",
        "  # Calls the dependency the faults hit (a payment gateway, a vendor API).",
        "  payments: {method: POST, path: /api/payments, rate: 10, timeout: 10s,",
        "             body: {amount: 15000}, idempotency-key: true, calls-gateway: true}",
        "  # Does NOT call it, and is what the experiment is about: when the dependency hangs,",
        "  # do these calls queue behind the workers the hanging calls hold? The gates below",
        "  # compare its latency between builds; without it only the failing calls are seen.",
        '  products: {path: "/api/products/{id}", params: {id: [1, 1000]}, rate: 5, timeout: 10s}',
        "",
    ]
    if mappings:
        lines += _dependency_lines(mappings, fixed=kind == "url")
    elif kind == "url":
        lines += [
            "# The fault gateway the harness plays. The harness does not start your service, so",
            "# the gateway listens on a fixed port: start your service with its gateway URL at",
            f"# http://127.0.0.1:{PG_PORT} (both builds).",
            "pg:",
            f"  port: {PG_PORT}",
        ]
    else:
        lines += [
            "# The fault gateway the harness plays: healthy, hanging (timeout), healthy again.",
            "pg:",
        ]
    lines += [
        *([] if mappings else ["  phases:", *_phases("    ")]),
        "",
        "# The builds, run one after the other under the same load and faults; the first is",
        "# the baseline every figure is compared with.",
        "builds:",
    ]
    if kind == "shop":
        lines += _shop_builds()
    elif kind == "jar":
        assert jar is not None
        lines += _jar_builds(jar, [dep for dep, _ in mappings])
    else:
        deps = [dep for dep, _ in mappings]
        lines += _service_builds(kind, preset, command=command, image=image, url=url, deps=deps)
    lines += ["", *_gates(preset, mappings[0][0] if mappings else None)]
    return "\n".join(lines) + "\n"


def _phases(indent: str) -> list[str]:
    """The starter's time line: healthy, the dependency hanging (timeout), healthy again."""
    return [
        f"{indent}- {{name: baseline, start: 0s,  duration: 20s, fault: {{type: healthy}}}}",
        f"{indent}- {{name: outage,   start: 20s, duration: 60s, fault: {{type: timeout}}}}",
        f"{indent}- {{name: recovery, start: 80s, duration: 40s, fault: {{type: healthy}}}}",
    ]


def mappings_name(folder: Path) -> str:
    """A dependency's name from its mappings folder: ``wiremock/visits/mappings`` -> ``visits``
    (the folder's own name unless it is ``mappings``), lower case, as a name must be."""
    stem = folder.parent.name if folder.name == "mappings" and folder.parent.name else folder.name
    name = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_") or "dependency"
    return name if name[0].isalpha() and name != "pg" else f"dep-{name}"


def _dependency_lines(mappings: Sequence[tuple[str, str]], *, fixed: bool) -> list[str]:
    """The dependencies played from WireMock mappings folders; the first hangs for a phase."""
    lines = [
        "# The dependencies the harness plays, each from its WireMock mappings, read as they",
        "# are (docs/stubs.md): a call no mapping matches is answered 404 and reported. The",
        "# first hangs for the outage while the others stay healthy.",
        "dependencies:",
    ]
    for i, (dep, folder) in enumerate(mappings):
        lines += [f"  {dep}:", f"    mappings: {_q(folder)}"]
        if fixed:  # a url build was started with its dependencies' URLs: they must not move
            lines += [f"    port: {PG_PORT + i}"]
        if i == 0:
            lines += ["    phases:", *_phases("      ")]
    return lines


def _shop_builds() -> list[str]:
    return [
        *_commented("  before:", "the reference shop (targets/shop), Retry only"),
        "    profile: retry-only",
        *_commented("    workers: 20", "request threads, like Tomcat's max-threads"),
        "    pg-client: {connect-timeout: 500ms, read-timeout: 1s}",
        "    resilience4j:",
        "      retry: {max-attempts: 2, wait-duration: 200ms}",
        *_commented("  after:", "the same with a circuit breaker (Resilience4j's keys)"),
        "    profile: retry-circuit-breaker",
        "    workers: 20",
        "    pg-client: {connect-timeout: 500ms, read-timeout: 1s}",
        "    resilience4j:",
        "      retry: {max-attempts: 2, wait-duration: 200ms}",
        "      circuitbreaker: {sliding-window-size: 10, minimum-number-of-calls: 10,",
        "                       failure-rate-threshold: 50, wait-duration-in-open-state: 10s,",
        "                       permitted-number-of-calls-in-half-open-state: 3,",
        "                       automatic-transition-from-open-to-half-open-enabled: true}",
    ]


def _jar_builds(jar: str, deps: Sequence[str] = ()) -> list[str]:
    """``before`` and ``after``: one Spring Boot jar, builds that differ only by properties."""
    urls = (
        [f'      {d}.base-url: "{{dep.{d}.url}}"' for d in deps]
        if deps
        else ['      pg.base-url: "{pg_url}"']
    )
    return [
        *_commented("  before:", "your jar, run with these Spring properties"),
        *_commented(f"    jar: {_q(jar)}", "relative to this file's folder"),
        *_commented("    # maven: .", "or: the harness builds it first (mvn package)"),
        "    java-options: [-Xmx512m]",
        "    # Spring's own names, nested or dotted, as in application.yml (written to",
        "    # <run>/<build>/application.yml). {pg_url} is the fault gateway: give it to the",
        "    # property your client reads its URL from (rename pg.base-url). The harness sets",
        "    # server.port, management.server.port and both addresses itself. A property here",
        "    # replaces the jar's own (its application.yml): only what the harness needs is set,",
        "    # so its thread pool, timeouts and resilience stay as the jar has them (max workers",
        "    # is read from Tomcat's own gauge). Add one only to change it, as after does.",
        "    properties: &common",
        *urls,
        *_commented("      server.tomcat.mbeanregistry.enabled: true", "Tomcat's busy threads"),
        *_commented(
            "      management.endpoints.web.exposure.include: health,prometheus",
            "what the harness reads",
        ),
        "    # health: /actuator/health on the management port (timeout 180s); metrics:",
        "    # /actuator/prometheus there, preset spring-boot. Needs actuator and",
        "    # micrometer-registry-prometheus, and resilience4j-spring-boot3 for the breaker.",
        *_commented("  after:", "the same jar: only the properties differ"),
        f"    jar: {_q(jar)}",
        "    java-options: [-Xmx512m]",
        "    properties:",
        *_commented("      <<: *common", "every property of before, then the change"),
        *_commented("      resilience4j:", "a tuned breaker (rename pgClient to yours)"),
        "        circuitbreaker:",
        "          instances:",
        "            pgClient: {sliding-window-size: 10, minimum-number-of-calls: 10,",
        "                       failure-rate-threshold: 50, wait-duration-in-open-state: 10s}",
    ]


def _service_builds(
    kind: StarterKind,
    preset: str,
    *,
    command: str | None,
    image: str | None,
    url: str | None,
    deps: Sequence[str] = (),
) -> list[str]:
    """``before`` and ``after`` of a command, docker or url build, explained once."""
    stack = _STACKS[preset]
    lines: list[str] = []
    urls = (
        ", ".join(f'{_env_name(d)}: "{{dep.{d}.url}}"' for d in deps)
        if deps
        else f'{stack.pg_env}: "{{pg_url}}"'
    )
    for build in ("before", "after"):
        first = build == "before"
        env = f'{{{stack.port_env}: "{{port}}", {urls}, PROFILE: {build}}}'
        env_note = [
            "    # {port}: a free loopback port the harness picked, where the service listens;",
            f"    # {{pg_url}}: the fault gateway (rename {stack.pg_env} to what it reads)."
            if not deps
            else "    # {dep.NAME.url}: each dependency's URL (rename the variables to yours).",
        ]
        if kind == "command":
            about = (
                "your service: a process the harness starts and stops"
                if first
                else "the change to prove (another jar, flag or profile)"
            )
            lines += [
                *_commented(f"  {build}:", about),
                *_commented(
                    f"    command: {_q(command or stack.command)}",
                    "split like a shell would (no $VARS)" if first else None,
                ),
                *_commented("    cwd: .", "relative to this file's folder" if first else None),
                *(env_note if first else []),
                f"    env: {env}",
            ]
        elif kind == "docker":
            assert image is not None
            about = (
                "your service's image; host networking reaches the gateway"
                if first
                else "the image with the change (another tag)"
            )
            lines += [
                *_commented(f"  {build}:", about),
                "    docker:",
                f"      image: {_q(image if first else _after_image(image))}",
                *(["  " + line for line in env_note] if first else []),
                f"      env: {env}",
            ]
        else:
            assert url is not None
            about = (
                "your service, already running: the harness neither starts nor stops it"
                if first
                else "the version with the change, running beside it on another port"
            )
            lines += [
                *_commented(f"  {build}:", about),
                *_commented(
                    f"    url: {_q(url if first else _after_url(url))}",
                    "loopback only, unless allow-remote" if first else None,
                ),
            ]
        lines += [
            *_commented(
                f"    health: {{path: {stack.health_path}, timeout: {stack.health_timeout}}}",
                "ready when GET path answers 200" if first else None,
            ),
            *([f"    # {line}" for line in stack.note] if first else []),
            f"    metrics: {{path: {stack.metrics_path}, preset: {preset}}}",
        ]
    return lines


def _env_name(dep: str) -> str:
    """The environment variable a starter gives a dependency's URL in (``visits`` -> VISITS_URL)."""
    return re.sub(r"[^A-Z0-9]+", "_", dep.upper()).strip("_") + "_URL"


def _gates(preset: str, dependency: str | None = None) -> list[str]:
    storm = (
        f'    expr: "after.dependencies.{dependency}.per_request[outage] <= 1.0"'
        if dependency is not None
        else '    expr: "after.pg.amplification[outage] <= 1.0"'
    )
    lines = [
        "# Checked after the run: harness run exits 1 if one fails (harness gate re-checks).",
        "gates:",
        "  - name: product reads protected during the outage",
        '    expr: "after.products.p95[outage] <= 0.5 * before.products.p95[outage]"',
        "  - name: breaker refuses calls",
        '    expr: "after.blocked.total > 0"',
        f"  - name: no retry storm at {'the gateway' if dependency is None else dependency}",
        storm,
    ]
    if preset != "opossum":  # opossum-prometheus has no gauge of busy workers
        lines += [
            "  - name: breaker frees the workers",
            '    expr: "after.busy_workers.p50[outage] <= 0.25 * after.max_workers"',
        ]
    return lines
