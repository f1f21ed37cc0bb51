"""The settings really in force, read back from the service and compared with the build's.

A setting a build gives its service can do nothing: a Resilience4j instance's own value
outranks the build's ``configs.default``, the application's code (a customizer, a
registry built in code) outranks both, another property source outranks the build's
file. So after health, before the load, the run reads back what the service says it
has in force, where it says it:

- Spring Boot's Actuator, next to the metrics (``/actuator/prometheus`` ->
  ``/actuator``): ``configprops`` (every ``@ConfigurationProperties`` bean's bound
  values, each with its origin), and Resilience4j's ``circuitbreakers`` (each breaker's
  failure-rate and slow-call-rate thresholds as the breaker itself holds them: what the
  code did included);
- Resilience4j's Micrometer series in the metrics the harness scrapes: which breakers,
  retries, time limiters and bulkheads exist, by their ``name`` label (Resilience4j
  exposes no threshold or duration as a series).

What was read is the build's ``settings_in_force`` (manifest), and each setting the
build gave whose value the service does not hold is a warning naming it, the value
set, the value reported, where it was read and the likely cause. Where the service
exposes nothing readable, that is said once, not per setting.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from harness.analysis.series import parse_text
from harness.results.manifest import Reported, SettingsInForce
from harness.scenario.builds.spring_properties import SetSetting, elements

READ_TIMEOUT_S = 5.0
"""How long each read-back request may take (the service is healthy and idle then)."""

CONFIGPROPS = "actuator/configprops"
"""Sources of ``Reported.source`` (the manifest's ``settings_in_force.settings.<name>``)."""
CIRCUITBREAKERS = "actuator/circuitbreakers"
METRICS = "metrics"

EXPOSE = (
    "expose them on the management port: management.endpoints.web.exposure.include: "
    "health,prometheus,configprops,circuitbreakers, and "
    "management.endpoint.configprops.show-values: always"
)

R4J_KINDS = ("circuitbreaker", "retry", "timelimiter", "bulkhead", "thread-pool-bulkhead",
             "ratelimiter")  # fmt: skip
"""Resilience4j's blocks under ``resilience4j.``, as Spring names them."""

_BREAKER_THRESHOLDS = {
    "failureRateThreshold": "failure-rate-threshold",
    "slowCallRateThreshold": "slow-call-rate-threshold",
}
"""What ``/actuator/circuitbreakers`` tells of each breaker's config (the rest is state)."""

_HIDDEN = "******"
"""Actuator's value for a sanitized property (Boot 3's default: show-values never)."""


# ---------------------------------------------------------------- reading


def actuator_base(metrics_url: str | None, health_urls: tuple[str, ...]) -> str | None:
    """Actuator's base (``http://h:p/actuator``) from where the build's metrics or health
    are read; ``None`` when neither is Actuator's."""
    for url in (metrics_url, *health_urls):
        if url is None:
            continue
        match = re.match(r"^(.*/actuator)/(prometheus|health)(/.*)?$", url)
        if match is not None:
            return match.group(1)
    return None


Getter = Callable[[str], tuple[Any, str]]
"""``url`` -> (its JSON, or ``None``; ``read`` or why not)."""


def http_json(url: str) -> tuple[Any, str]:
    """GET ``url`` as JSON: the value and ``read``, or ``None`` and why not, in words."""
    try:
        answer = httpx.get(url, timeout=READ_TIMEOUT_S)
    except httpx.ConnectError:
        return None, "connection refused"
    except httpx.TimeoutException:
        return None, f"no answer within {READ_TIMEOUT_S:g}s"
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if answer.status_code != 200:
        return None, f"answered {answer.status_code} (not exposed?)"
    try:
        return answer.json(), "read"
    except ValueError:
        return None, "not JSON"


def kebab(name: str) -> str:
    """``failureRateThreshold`` -> ``failure-rate-threshold`` (Spring's canonical form)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).lower()


def _walk(value: Any, inputs: Any, prefix: str, out: dict[str, Reported]) -> None:
    if isinstance(value, Mapping):  # an empty map (no instances) says nothing
        for key, item in value.items():
            if key == "backends":  # Resilience4j's older name of ``instances``, the same map
                continue
            sub = inputs.get(key) if isinstance(inputs, Mapping) else None
            at = key if _is_map_key(prefix) else kebab(str(key))
            _walk(item, sub, f"{prefix}.{at}", out)
        return
    said: Reported = {"value": value, "source": CONFIGPROPS}
    origin = inputs.get("origin") if isinstance(inputs, Mapping) else None
    if isinstance(origin, str):
        said["origin"] = origin
    out[prefix] = said


def _is_map_key(prefix: str) -> bool:
    """Whether the next element after ``prefix`` is a map's key (an instance's name), kept
    as written: Resilience4j's ``instances``, ``configs``, ``backends``."""
    return prefix.rsplit(".", 1)[-1] in ("instances", "configs", "backends", "limiters")


def configprops_settings(document: Any, wanted: Callable[[str], bool]) -> dict[str, Reported]:
    """The bound values of every ``@ConfigurationProperties`` bean whose prefix ``wanted``
    accepts, by dotted name (``/actuator/configprops`` of Boot 2.x and 3.x)."""
    found: dict[str, Reported] = {}
    contexts = document.get("contexts", {}) if isinstance(document, Mapping) else {}
    for context in contexts.values() if isinstance(contexts, Mapping) else ():
        beans = context.get("beans", {}) if isinstance(context, Mapping) else {}
        for bean in beans.values() if isinstance(beans, Mapping) else ():
            if not isinstance(bean, Mapping) or not isinstance(bean.get("prefix"), str):
                continue
            if wanted(bean["prefix"]):
                _walk(bean.get("properties", {}), bean.get("inputs"), bean["prefix"], found)
    return found


def _percent(value: Any) -> Any:
    if isinstance(value, str) and value.endswith("%"):
        try:
            return float(value[:-1])
        except ValueError:
            return value
    return value


def breaker_settings(document: Any) -> dict[str, Reported]:
    """Each breaker's thresholds as it holds them (resilience4j-spring-boot's
    ``/actuator/circuitbreakers``: ``{"circuitBreakers": {name: {...}}}``)."""
    found: dict[str, Reported] = {}
    breakers = document.get("circuitBreakers") if isinstance(document, Mapping) else None
    for name, details in breakers.items() if isinstance(breakers, Mapping) else ():
        if not isinstance(details, Mapping):
            continue
        for key, setting in _BREAKER_THRESHOLDS.items():
            if key in details:
                found[f"resilience4j.circuitbreaker.instances.{name}.{setting}"] = {
                    "value": _percent(details[key]),
                    "source": CIRCUITBREAKERS,
                }
    return found


_R4J_SERIES = re.compile(
    r"^resilience4j_(circuitbreaker|retry|timelimiter|bulkhead|thread_pool_bulkhead|ratelimiter)_"
)


def metric_instances(text: str) -> dict[str, list[str]]:
    """Resilience4j's instances by kind, from their Micrometer series' ``name`` label
    (``resilience4j_circuitbreaker_state{name="pgClient",...}``)."""
    found: dict[str, set[str]] = {}
    for _, _, series, labels, _ in parse_text(text, 0.0, METRICS):
        match = _R4J_SERIES.match(series)
        name = json.loads(labels).get("name") if labels else None
        if match is not None and isinstance(name, str) and name:
            found.setdefault(match.group(1).replace("_", "-"), set()).add(name)
    return {kind: sorted(names) for kind, names in sorted(found.items())}


def read_back(
    actuator: str | None,
    metrics_text: str | None,
    given: list[SetSetting],
    get: Getter = http_json,
) -> SettingsInForce:
    """What the service says it has in force, and how it differs from ``given``."""
    sources: dict[str, str] = {}
    settings: dict[str, Reported] = {}
    prefixes = {s.name[:2] for s in given}

    def wanted(prefix: str) -> bool:
        name = elements(prefix)
        return name[:1] == ("resilience4j",) or any(name[: len(p)] == p for p in prefixes)

    if actuator is None:
        sources["actuator"] = "the build's metrics and health are not Actuator's"
    else:
        document, how = get(f"{actuator}/configprops")
        if document is not None:
            bound = configprops_settings(document, wanted)
            if bound and all(said["value"] == _HIDDEN for said in bound.values()):
                how = "its values are hidden (management.endpoint.configprops.show-values)"
            else:
                settings.update(bound)
        sources[CONFIGPROPS] = how
        document, how = get(f"{actuator}/circuitbreakers")
        if document is not None:
            breakers = breaker_settings(document)
            for name, said in breakers.items():
                if name in settings:  # what Spring bound, beside what the breaker holds
                    said["bound"] = settings[name]["value"]
                    if "origin" in settings[name]:
                        said["origin"] = settings[name]["origin"]
                settings[name] = said
        sources[CIRCUITBREAKERS] = how
    instances = metric_instances(metrics_text) if metrics_text else {}
    sources[METRICS] = "read" if metrics_text else "not scraped"
    found: SettingsInForce = {
        "sources": sources,
        "settings": settings,
        "instances": instances,
        "differences": differences(given, settings) if settings else [],
    }
    if given and not any(how == "read" for k, how in sources.items() if k != METRICS):
        why = "; ".join(f"{k}: {how}" for k, how in sources.items() if k != METRICS)
        found["unread"] = (
            f"the settings the build gives ({len(given)}) could not be read back from the "
            f"service ({why}), so none was checked against what it has in force; {EXPOSE}"
        )
    return found


# ---------------------------------------------------------------- comparing


_SPRING_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(ns|us|ms|s|m|h|d)?\s*$", re.I)
_ISO_DURATION = re.compile(
    r"^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(-?\d+(?:\.\d+)?)S)?)?$",
    re.I,
)
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _duration_s(value: Any) -> float | None:
    """A duration as Spring reads one: ``PT10S``, ``10s``, ``100ms``; ``None`` if it is not."""
    if not isinstance(value, str):
        return None
    iso = _ISO_DURATION.match(value.strip())
    if iso is not None and value.strip().upper() not in ("P", "PT"):
        d, h, m, s = (float(g) if g else 0.0 for g in iso.groups())
        return d * 86400 + h * 3600 + m * 60 + s
    simple = _SPRING_DURATION.match(value)
    if simple is not None and simple.group(2):
        return float(simple.group(1)) * _UNIT_S[simple.group(2).lower()]
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _same(given: Any, reported: Any) -> bool:
    """Whether the service holds what was given, each read as Spring reads it."""
    a, b = _duration_s(given), _duration_s(reported)
    if a is not None or b is not None:
        if a is None:  # a plain number for a Duration: milliseconds
            n = _number(given)
            a = None if n is None else n / 1000
        if b is None:
            n = _number(reported)
            b = None if n is None else n / 1000
        return a is not None and b is not None and math.isclose(a, b, abs_tol=1e-9)
    x, y = _number(given), _number(reported)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(given, list) or isinstance(reported, list):
        left = given if isinstance(given, list) else str(given).split(",")
        right = reported if isinstance(reported, list) else str(reported).split(",")
        return len(left) == len(right) and all(
            _same(p, q) for p, q in zip(left, right, strict=True)
        )
    return str(given).strip().lower() == str(reported).strip().lower()


CODE = (
    "the application's code sets it over the properties (a customizer, or a registry built in code)"
)
_NOTHING = object()


def _bound(reported: Reported) -> Any:
    """What Spring bound to the name (``_NOTHING``: not said): the code may have replaced it."""
    if reported["source"] == CONFIGPROPS:
        return reported["value"]
    return reported.get("bound", _NOTHING)


def _said(value: Any) -> str:
    return (
        value
        if isinstance(value, str)
        else repr(value).replace("True", "true").replace("False", "false")
    )


def _lookup(settings: Mapping[str, Reported], name: tuple[str, ...]) -> tuple[str, Reported] | None:
    """The reported setting whose name is ``name`` to Spring (any spelling)."""
    matches = [(k, v) for k, v in settings.items() if _elements_ci(k) == name]
    for key, said in matches:  # the breaker's own word first: it is what is in force
        if said["source"] == CIRCUITBREAKERS:
            return key, said
    return matches[0] if matches else None


def _elements_ci(name: str) -> tuple[str, ...]:
    return tuple(e.lower() for e in elements(name))


def _instances_of(settings: Mapping[str, Reported], kind: str) -> dict[str, str]:
    """``kind``'s instances the service reports (lower-cased name -> name as it has it)."""
    found: dict[str, str] = {}
    for key in settings:
        parts = key.split(".")
        if len(parts) > 3 and parts[:3] in (["resilience4j", kind, "instances"],
                                            ["resilience4j", kind, "backends"]):  # fmt: skip
            found.setdefault(parts[3].lower(), parts[3])
    return found


def differences(given: list[SetSetting], settings: Mapping[str, Reported]) -> list[str]:
    """A sentence per setting in ``given`` that the service does not hold as given."""
    said: list[str] = []
    given_names = {s.name for s in given}
    for setting in given:
        name = tuple(e.lower() for e in setting.name)
        r4j = len(name) >= 5 and name[0] == "resilience4j"
        if r4j and name[2] == "configs":
            said += _default_overridden(setting, name, settings, given_names)
            continue
        found = _lookup(settings, name)
        if found is None or _same(setting.value, found[1]["value"]):
            continue
        reported = found[1]
        bound = _bound(reported)
        if bound is _NOTHING:
            cause = "another property source or the application's code outranks the build's"
        elif _same(setting.value, bound):
            cause = CODE
        else:
            where = f" ({reported['origin']})" if "origin" in reported else ""
            cause = f"another source outranks the build's {setting.where}{where}"
        said.append(
            f"{setting.written}: the build set {_said(setting.value)}, the service reports "
            f"{_said(reported['value'])} ({reported['source']}): {cause}"
        )
    return said


def _default_overridden(
    setting: SetSetting,
    name: tuple[str, ...],
    settings: Mapping[str, Reported],
    given_names: set[tuple[str, ...]],
) -> list[str]:
    """A ``resilience4j.<kind>.configs.<config>.<x>`` given: each instance based on that
    config whose ``x`` in force is another value (its own setting, or the code's)."""
    kind, config, rest = name[1], name[3], name[4:]
    said: list[str] = []
    for lower, instance in _instances_of(settings, kind).items():
        own = ("resilience4j", kind, "instances", lower, *rest)
        if any(tuple(e.lower() for e in g) == own for g in given_names):
            continue  # the build set the instance's own: that one is compared itself
        base = _lookup(settings, ("resilience4j", kind, "instances", lower, "baseconfig"))
        if str(base[1]["value"] if base else "default").lower() != config:
            continue
        found = _lookup(settings, own)
        if found is None or _same(setting.value, found[1]["value"]):
            continue
        reported = found[1]
        bound = _bound(reported)
        if bound is not _NOTHING and not _same(setting.value, bound):
            where = f" ({reported['origin']})" if "origin" in reported else ""
            own_name = f"resilience4j.{kind}.instances.{instance}.{found[0].rsplit('.', 1)[-1]}"
            cause = (
                f"a setting under configs.{config} is overridden by the instance's own "
                f"{own_name}: {_said(bound)}{where}"
            )
        else:
            cause = (
                f"a setting under configs.{config} is overridden by the application's code "
                "(a customizer, or a registry built in code)"
                if bound is not _NOTHING
                else f"a setting under configs.{config} is overridden by the instance's own "
                "setting or the application's code (actuator/configprops would say which)"
            )
        said.append(
            f"{setting.written}: the build set {_said(setting.value)}, the service reports "
            f"{_said(reported['value'])} for {kind} {instance} ({reported['source']}): {cause}"
        )
    return said


def read_service(
    metrics_url: str | None, health_urls: tuple[str, ...], given: list[SetSetting]
) -> SettingsInForce | None:
    """Read a healthy build's settings back (``read_back``) from its Actuator and its
    metrics; ``None`` when it neither has an Actuator nor was given a Spring setting
    (a service that says nothing, and was told nothing, of Spring's)."""
    actuator = actuator_base(metrics_url, health_urls)
    if actuator is None and not given:
        return None
    text = None
    if metrics_url is not None:
        try:
            answer = httpx.get(metrics_url, timeout=READ_TIMEOUT_S)
            text = answer.text if answer.status_code == 200 else None
        except httpx.HTTPError:
            text = None
    return read_back(actuator, text, given)
