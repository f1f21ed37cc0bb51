"""The recommended candidate's settings in its target's own language.

Each build kind declares its language (``BuildSettings.recommendation``); ``render`` has
one case per language, checked exhaustive by mypy. ``SHOP_RESILIENCE4J`` (the shop): an
``application.yml`` ``resilience4j:`` block for a Spring service whose client instance is
``pgClient`` (the shop's keys are Resilience4j's property names). ``SPRING_PROPERTIES`` (a
jar): its own ``resilience4j`` properties as they would sit in ``application.yml``, and any
other swept property dotted. ``ENVIRONMENT`` (a command): the environment and arguments it
starts with (an opossum service reads its options from them). ``BUILD_KEYS`` (docker, url):
the swept keys as the build writes them.
"""

from __future__ import annotations

from typing import Any, assert_never

import yaml

from harness.scenario.builds import kind_settings
from harness.scenario.builds.base import Recommendation
from harness.tune.candidates import Candidate
from harness.tune.paths import MISSING, get_path

INSTANCE = "pgClient"
"""The Resilience4j instance name of the gateway client (the Spring shop's)."""
SHOP_ONLY = ("type", "failure-count", "window", "open-duration", "fallback")
"""Shop keys Resilience4j has no property for (the naive breaker, the fallbacks)."""


def recommended_config(candidate: Candidate, axes: list[str]) -> tuple[str, str]:
    """(language, text): ``yaml`` (application.yml, the build's keys) or ``sh`` (a command's
    env and argv), in the language the candidate's kind declares."""
    build = candidate.build
    return render(kind_settings(build).recommendation, build, axes)


def render(language: Recommendation, build: dict[str, Any], axes: list[str]) -> tuple[str, str]:
    """``build`` (its swept ``axes``) in ``language``: (highlighting, text)."""
    match language:
        case Recommendation.SHOP_RESILIENCE4J:
            return "yaml", _shop(build)
        case Recommendation.SPRING_PROPERTIES:
            return "yaml", _jar(build, axes)
        case Recommendation.ENVIRONMENT:
            return "sh", _command(build, axes)
        case Recommendation.BUILD_KEYS:
            return "yaml", _build_keys(build, axes)
        case _:
            assert_never(language)


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _shop(build: dict[str, Any]) -> str:
    r4j = build.get("resilience4j") or {}
    block: dict[str, Any] = {}
    notes: list[str] = []
    for layer in ("circuitbreaker", "retry", "bulkhead", "timelimiter", "thread-pool-bulkhead"):
        settings = r4j.get(layer)
        if not isinstance(settings, dict):
            continue
        kept = {k: v for k, v in settings.items() if k not in SHOP_ONLY}
        dropped = sorted(set(settings) - set(kept))
        if settings.get("type") == "naive":
            notes.append(f"# {layer}: the shop's naive breaker has no Resilience4j form")
            continue
        if dropped:
            notes.append(f"# {layer}: {', '.join(dropped)} are the shop's own (not Resilience4j)")
        block[layer] = {"instances": {INSTANCE: kept}}
    head = "".join(n + "\n" for n in notes)
    return head + _dump({"resilience4j": block})


def _jar(build: dict[str, Any], axes: list[str]) -> str:
    props = build.get("properties") or {}
    out: dict[str, Any] = {}
    if "resilience4j" in props:
        out["resilience4j"] = props["resilience4j"]
    dotted = {
        a.removeprefix("properties."): get_path(build, a)
        for a in axes
        if a.startswith("properties.") and not a.startswith("properties.resilience4j")
    }
    out.update(dotted)
    return _dump(out)


def _build_keys(build: dict[str, Any], axes: list[str]) -> str:
    swept = {axis: get_path(build, axis) for axis in axes}
    return _dump({axis: value for axis, value in swept.items() if value is not MISSING})


def _command(build: dict[str, Any], axes: list[str]) -> str:
    env = build.get("env") or {}
    lines = [f"export {k}={_shell(v)}" for k, v in env.items() if f"env.{k}" in axes]
    command = build["command"]  # one string is split as a shell would: print it as it is
    lines.append(command if isinstance(command, str) else " ".join(_shell(a) for a in command))
    return "\n".join(lines) + "\n"


def _shell(value: Any) -> str:
    text = str(value)
    return text if text and all(c.isalnum() or c in "-_./:={}" for c in text) else repr(text)
