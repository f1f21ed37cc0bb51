"""Which builds the simulator can model, and the shop settings each one stands for.

Each build kind declares how it is modelled (``BuildSettings.simulator_model``);
``service_of`` has one case per ``SimulatorModel``, checked exhaustive by mypy.

A ``shop`` build is modelled from the very settings the shop reads: the build's block
as ``harness run`` writes it to ``target.json``, parsed by the shop's own
``targets.shop.config.ShopConfig``, so the layers, their order, the Retry's exception
lists and the breaker's kind are the shop's by construction. A ``jar`` build (the
Spring shop, ``targets/spring-shop``) is modelled from its Spring properties, read as
Spring binds them (``resilience4j.<layer>.instances.pgClient.*``,
``server.tomcat.threads.max``, Feign's timeouts, Hikari's pool size, ``shop.resilience``),
translated to the same settings. A ``command`` build of ``targets/node-gateway`` is
modelled from its env and flags (``harness.simulate.node``: opossum's options). Anything
else (docker, url, other command builds, a replicated shop, a thread-pool bulkhead,
the Spring shop's seed 002 compositions) is ``NotModelled``, naming the build and why.

A jar or command build is a stranger's service unless it says otherwise: the model of
the Spring shop or the Node gateway stands for it only when the build declares it is
that service (``simulate-as: spring-shop`` / ``node-gateway``), and only for traffic to
the routes that service has (``Service.routes``; ``harness.simulate.run.modelled`` checks
the scenario's traffic against them). A model of our shop answering for a
stranger's jar reported the shop's routes as the stranger's (2400 requests to
``/api/orders`` answered 404, "the gateway received no call").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, assert_never

from pydantic import ValidationError

from harness.core.durations import parse_duration
from harness.scenario.builds import Build
from harness.scenario.builds.base import BuildSettings, SimulatorModel
from harness.scenario.builds.command import CommandBuild
from harness.scenario.builds.jar import JarBuild
from harness.scenario.builds.shop import CircuitBreakerSettings, RetrySettings, ShopBuild
from harness.scenario.builds.spring_properties import leaves
from harness.simulate.node import NODE_ROUTES, NodeConfig, node_config
from harness.simulate.shop import SHOP_ROUTES, SPRING_SHOP_ROUTES, Route
from targets.shop.config import ShopConfig

SHOP_BACKLOG = 2048
"""gunicorn's ``backlog`` as ``targets/shop/__main__.py`` sets it: connections queued for a
thread; one more is refused."""
TOMCAT_BACKLOG = 8192 + 100
"""Tomcat's ``max-connections`` (8192) plus its ``accept-count`` (100): what a Spring
service holds waiting for a request thread."""
SPRING_DEFAULTS: dict[str, Any] = {
    "workers": 200,
    "pg-client": {"connect-timeout": 1.0, "read-timeout": 4.0},
    "db-pool": {"maximum-pool-size": 10},
}
"""``targets/spring-shop/src/main/resources/application.yml``'s values, where a jar build's
properties say nothing."""
SPRING_PROFILES = ("retry-only", "retry-circuit-breaker")
"""The ``shop.resilience`` compositions modelled; the Spring shop's others (seed 002's
``cb-wrong``, ``cb-correct``) are refused."""
INSTANCE = "pgclient"
"""The Resilience4j instance the Spring shop configures (``pgClient``, as Spring compares)."""


class NotModelled(Exception):
    """A build the simulator cannot stand for; the message names it and says why."""

    def __init__(self, build: str, reason: str) -> None:
        super().__init__(f"build {build!r}: {reason}")
        self.build = build
        self.reason = reason


@dataclass(frozen=True)
class Service:
    """One build as the simulator runs it: the shop's settings and its accept queue, the
    reference service it is modelled as (``model``: its name and folder) and its routes."""

    name: str
    kind: str
    config: ShopConfig | NodeConfig
    backlog: int
    model: str
    routes: tuple[Route, ...]


MODELS = {
    SimulatorModel.SHOP: "the shop (targets/shop)",
    SimulatorModel.SPRING_SHOP: "the Spring shop (targets/spring-shop)",
    SimulatorModel.NODE_GATEWAY: "the Node gateway (targets/node-gateway)",
}
"""The services the simulator has a model of: our reference targets, and no other."""
CAN_MODEL = (
    "the simulator models only our reference services: shop builds, jar builds of "
    "targets/spring-shop that say so (simulate-as: spring-shop) and command builds of "
    "targets/node-gateway that say so (simulate-as: node-gateway)"
)
_NOT_MODELLED = "a {kind} build has no model (" + CAN_MODEL + ")"
_UNDECLARED = (
    "a {kind} build has no model unless it says it runs {model} with simulate-as: "
    "{value}: another service's {kind} would be reported as ours (" + CAN_MODEL + ")"
)

_B = TypeVar("_B", bound=BuildSettings)


def service_of(name: str, build: Build) -> Service:
    """The model of build ``name``, as its kind declares (``simulator_model``), or
    ``NotModelled``."""
    model = type(build).simulator_model
    match model:
        case SimulatorModel.SHOP:
            shop = _declared(build, ShopBuild, model)
            if shop.replicas > 1:
                raise NotModelled(
                    name, f"replicas: {shop.replicas} (a balancer in front) is not modelled"
                )
            data = shop.model_dump(mode="json", by_alias=True, exclude={"replicas"})
            config = _config(name, data)
            return Service(name, shop.kind, config, SHOP_BACKLOG, MODELS[model], SHOP_ROUTES)
        case SimulatorModel.SPRING_SHOP:
            jar = _declared(build, JarBuild, model)
            _said(name, jar, jar.simulate_as, model)
            settings = spring_settings(name, jar.properties)
            return Service(
                name, jar.kind, _config(name, settings), TOMCAT_BACKLOG, MODELS[model],
                SPRING_SHOP_ROUTES,
            )  # fmt: skip
        case SimulatorModel.NODE_GATEWAY:
            command = _declared(build, CommandBuild, model)
            _said(name, command, command.simulate_as, model)
            try:
                node = node_config(command.env, command.command)
            except ValueError as exc:
                raise NotModelled(name, f"its node-gateway settings: {exc}") from None
            return Service(name, command.kind, node, 0, MODELS[model], NODE_ROUTES)
        case SimulatorModel.NONE:
            raise NotModelled(name, _NOT_MODELLED.format(kind=build.kind))
        case _:
            assert_never(model)


def _declared(build: BuildSettings, settings: type[_B], model: SimulatorModel) -> _B:
    """``build`` as the settings ``model`` reads; a kind declaring a model for settings it
    does not have is the harness's own mistake."""
    if not isinstance(build, settings):
        raise TypeError(
            f"{type(build).__name__} declares simulator_model {model.name}, which models "
            f"{settings.__name__} builds"
        )
    return build


def _said(name: str, build: BuildSettings, said: str | None, model: SimulatorModel) -> None:
    """A jar or command build is modelled as our reference service only when it says it is
    that service (``simulate-as``): a stranger's jar is not our Spring shop because both
    are jars, nor a command our Node gateway because both are commands."""
    if said != model.value:
        raise NotModelled(
            name, _UNDECLARED.format(kind=build.kind, model=MODELS[model], value=model.value)
        )


def _config(name: str, data: dict[str, Any]) -> ShopConfig:
    blocks = data.get("resilience4j") or {}
    if blocks.get("thread-pool-bulkhead") is not None:
        raise NotModelled(name, "a thread-pool-bulkhead is not modelled")
    try:
        return ShopConfig.from_dict({**data, "pg-url": "http://simulated"})
    except (TypeError, ValueError) as exc:
        raise NotModelled(name, f"its settings do not make a shop: {exc}") from None


def _kebab(fields: Mapping[str, Any]) -> dict[str, str]:
    """Spring's comparison form of each field's name (``maxattempts``) -> its kebab key."""
    return {name.replace("_", ""): name.replace("_", "-") for name in fields}


_RETRY_KEYS = _kebab(RetrySettings.model_fields)
_BREAKER_KEYS = _kebab(CircuitBreakerSettings.model_fields)
_DURATION_KEYS = {
    "wait-duration", "exponential-max-wait-duration", "slow-call-duration-threshold",
    "wait-duration-in-open-state", "max-wait-duration-in-half-open-state",
}  # fmt: skip


def _spring_duration(value: object) -> float:
    """A Spring ``Duration`` property: a bare number is milliseconds, else ``100ms``, ``10s``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) / 1000.0
    return parse_duration(value)


def spring_settings(name: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """The shop settings (kebab case, seconds) a jar build's Spring properties stand for."""
    settings: dict[str, Any] = {**SPRING_DEFAULTS, "pg-client": dict(SPRING_DEFAULTS["pg-client"])}
    settings["db-pool"] = dict(SPRING_DEFAULTS["db-pool"])
    profile = "retry-circuit-breaker"
    retry: dict[str, Any] = {"max-attempts": 2, "wait-duration": 0.1}
    breaker: dict[str, Any] = {
        "sliding-window-type": "COUNT_BASED", "sliding-window-size": 10,
        "minimum-number-of-calls": 10, "failure-rate-threshold": 50,
        "wait-duration-in-open-state": 10.0, "permitted-number-of-calls-in-half-open-state": 3,
        "automatic-transition-from-open-to-half-open-enabled": True,
    }  # fmt: skip
    for leaf in leaves(properties):
        key, value = leaf.name, leaf.value
        if key == ("server", "tomcat", "threads", "max"):
            settings["workers"] = int(value)
        elif key == ("shop", "resilience"):
            profile = str(value)
        elif key == ("shop", "db", "querytime"):
            settings["db-pool"]["query-time"] = _spring_duration(value)
        elif key == ("spring", "datasource", "hikari", "maximumpoolsize"):
            settings["db-pool"]["maximum-pool-size"] = int(value)
        elif key == ("spring", "datasource", "hikari", "connectiontimeout"):
            settings["db-pool"]["connection-timeout"] = _spring_duration(value)
        elif key[:5] == ("spring", "cloud", "openfeign", "client", "config") and len(key) == 7:
            which = {"connecttimeout": "connect-timeout", "readtimeout": "read-timeout"}
            if key[6] in which:
                settings["pg-client"][which[key[6]]] = _spring_duration(value)
        elif key[:4] == ("resilience4j", "retry", "instances", INSTANCE) and len(key) == 5:
            _put(retry, _RETRY_KEYS, key[4], value, ("retryexceptions", "ignoreexceptions"))
        elif key[:4] == ("resilience4j", "circuitbreaker", "instances", INSTANCE) and len(key) == 5:
            _put(breaker, _BREAKER_KEYS, key[4], value, ("recordexceptions", "ignoreexceptions"))
        elif (
            key[0] == "resilience4j" and len(key) > 1 and key[1] not in ("retry", "circuitbreaker")
        ):
            raise NotModelled(name, f"{'.'.join(key)}: the Spring shop's {key[1]} is not modelled")
    if profile not in SPRING_PROFILES:
        raise NotModelled(
            name,
            f"shop.resilience: {profile} is not modelled (modelled: {', '.join(SPRING_PROFILES)})",
        )
    blocks: dict[str, Any] = {"retry": retry}
    if profile == "retry-circuit-breaker":
        blocks["circuitbreaker"] = breaker
    try:
        build = ShopBuild.model_validate({**settings, "profile": profile, "resilience4j": blocks})
    except ValidationError as exc:
        raise NotModelled(name, f"its Resilience4j properties do not validate: {exc}") from None
    return build.model_dump(mode="json", by_alias=True, exclude={"replicas"})


def _put(
    block: dict[str, Any],
    keys: Mapping[str, str],
    name: str,
    value: object,
    exceptions: tuple[str, ...],
) -> None:
    """One Resilience4j property into ``block``; the exception lists are the shop's own
    (the Spring shop's are the same policy, in Java's class names)."""
    if name in exceptions:
        return
    key = keys.get(name)
    if key is None:
        return
    block[key] = _spring_duration(value) if key in _DURATION_KEYS else value
