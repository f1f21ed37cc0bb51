"""Start-up settings of the shop, read from one JSON file the harness writes per build.

The file is the build's block of the scenario as the harness validated it
(kebab-case Resilience4j property names, durations already in seconds) plus
where to listen and which gateway to call, under the hand-off's ``schema``::

    {"schema": "harness.shop-config/1",
     "profile": "retry-circuit-breaker", "workers": 200,
     "pg-client": {"connect-timeout": 1.0, "read-timeout": 3.0},
     "resilience4j": {"retry": {"max-attempts": 2, "wait-duration": 0.1, ...},
                      "circuitbreaker": {"type": "resilience4j",
                                         "sliding-window-size": 10, ...,
                                         "fallback": {"kind": "value", ...}},
                      "bulkhead": {"max-concurrent-calls": 10, "max-wait-duration": 0.0},
                      "thread-pool-bulkhead": null, "timelimiter": null,
                      "fallback": null},
     "resilience": ["retry", "circuit-breaker", "bulkhead"],
     "db-pool": {"maximum-pool-size": 8, "connection-timeout": 30.0, "query-time": 0.06},
     "pg-url": "http://127.0.0.1:41234", "listen-fd": 5, "metrics-fd": 6,
     "db-path": "results/.../shop.sqlite"}

This module is the only place that turns those names into the shop's own
config objects: ``wait-duration`` becomes ``wait_duration_s`` by one rule (kebab
to snake case, plus ``_s`` where the field holds seconds), not a list per
field. Three keys are not settings of a layer and are taken out first: a
block's ``fallback`` (the fallback attached to that layer, in
``ShopConfig.fallbacks``), the breaker's ``type`` (which config its settings
build: the other type's keys, written with their defaults, are dropped), and
the top-level ``fallback`` (the outermost one). ``resilience`` is the
composition, outermost first; without it, Resilience4j's default order over
the configured layers (``ShopConfig.layers``). The shop is a service of its own
and never imports the harness.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from targets.shop.dbpool import DbPoolConfig
from targets.shop.resilience import (
    BulkheadConfig,
    CircuitBreakerConfig,
    FallbackConfig,
    NaiveCircuitBreakerConfig,
    RetryBudgetConfig,
    RetryConfig,
    ThreadPoolBulkheadConfig,
    TimeLimiterConfig,
    resolve_order,
)
from targets.shop.resilience.decorators import (
    BULKHEAD,
    CIRCUIT_BREAKER,
    RETRY,
    THREAD_POOL_BULKHEAD,
    TIME_LIMITER,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

SCHEMA = "harness.shop-config/1"
"""The ``schema`` of the settings file this shop reads: the harness's hand-off
(``harness.core.handoff``; ``SHOP_CONFIG`` in ``harness.run.kinds.shop.target`` says the
same, and a test checks it). The version goes up when a key's meaning changes."""

Profile = Literal["retry-only", "retry-circuit-breaker"]

OUTERMOST = "outermost"
"""Where the top-level ``fallback`` sits: around the whole composition."""

BLOCKS = {
    "retry": RETRY,
    "circuitbreaker": CIRCUIT_BREAKER,
    "timelimiter": TIME_LIMITER,
    "bulkhead": BULKHEAD,
    "thread-pool-bulkhead": THREAD_POOL_BULKHEAD,
}
"""``resilience4j:`` block (Spring's property prefix) -> layer name in ``resilience``
(the name of Resilience4j's ``*-aspect-order`` property)."""

BreakerConfig = CircuitBreakerConfig | NaiveCircuitBreakerConfig


@dataclass(frozen=True)
class ShopConfig:
    """Everything the shop needs to start; profiles pick the resilience composition."""

    pg_url: str
    profile: Profile = "retry-only"
    workers: int = 200
    connect_timeout_s: float = 1.0
    read_timeout_s: float = 3.0
    retry: RetryConfig = field(default_factory=RetryConfig)
    retry_ignores: tuple[str, ...] | None = None
    """The refusals the Retry does not retry, by Resilience4j's names
    (``retry.ignore-exceptions``); None: the shop's default, both."""
    retry_budget: RetryBudgetConfig | None = None
    """``retry.budget``: caps the Retry's retries (gRPC's throttling or Finagle's budget)."""
    circuitbreaker: BreakerConfig | None = None
    bulkhead: BulkheadConfig | None = None
    thread_pool_bulkhead: ThreadPoolBulkheadConfig | None = None
    timelimiter: TimeLimiterConfig | None = None
    fallbacks: Mapping[str, FallbackConfig] = field(default_factory=dict)
    """Fallbacks by the layer they are attached to; ``OUTERMOST``: around everything."""
    resilience: tuple[str, ...] | None = None
    """The composition as given, outermost first; None: Resilience4j's default order."""
    db_pool: DbPoolConfig | None = None
    """The pool every statement checks a connection out of; None: no pool, no waiting."""
    db_path: str = ":memory:"
    products: int = 1000
    listen_fd: int | None = None
    metrics_fd: int | None = None
    host: str = "127.0.0.1"
    port: int = 8080

    def __post_init__(self) -> None:
        if self.profile not in ("retry-only", "retry-circuit-breaker"):
            raise ValueError(f"unknown profile {self.profile!r}")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.profile == "retry-circuit-breaker" and self.circuitbreaker is None:
            object.__setattr__(self, "circuitbreaker", CircuitBreakerConfig())
        if self.resilience is not None:
            object.__setattr__(self, "resilience", tuple(self.resilience))
        layers = self.layers  # checks the composition
        for layer in self.fallbacks:
            if layer != OUTERMOST and layer not in layers:
                raise ValueError(f"a fallback on {layer!r}, which is not in the composition")

    @property
    def configured(self) -> frozenset[str]:
        """The layers this config has settings for (Retry always: it has defaults)."""
        found = {RETRY}
        if self.profile == "retry-circuit-breaker":
            found.add(CIRCUIT_BREAKER)
        for layer, settings in (
            (TIME_LIMITER, self.timelimiter),
            (BULKHEAD, self.bulkhead),
            (THREAD_POOL_BULKHEAD, self.thread_pool_bulkhead),
        ):
            if settings is not None:
                found.add(layer)
        return frozenset(found)

    @property
    def layers(self) -> tuple[str, ...]:
        """The composition, outermost first (``resilience``, or the default order)."""
        return resolve_order(self.resilience, self.configured)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShopConfig:
        """Read the settings as the harness writes them (see the module's docstring)."""
        data = dict(data)
        data.pop("target", None)  # which kind of target the harness started: this one
        blocks = dict(data.pop("resilience4j", None) or {})
        client = data.pop("pg-client", None) or {}  # its timeouts are the shop's own fields
        pool = data.pop("db-pool", None)
        unknown = sorted(set(blocks) - set(BLOCKS) - {"fallback"})
        if unknown:
            raise ValueError(f"resilience4j: unknown block {unknown[0]!r}")
        fallbacks: dict[str, FallbackConfig] = {}
        outermost = blocks.pop("fallback", None)
        if outermost is not None:
            fallbacks[OUTERMOST] = _build(FallbackConfig, outermost)
        settings: dict[str, dict[str, Any]] = {}
        for key, layer in BLOCKS.items():
            block = blocks.get(key)
            if block is None:
                continue
            block = dict(block)
            fallback = block.pop("fallback", None)
            if fallback is not None:
                fallbacks[layer] = _build(FallbackConfig, fallback)
            settings[key] = block
        optional = {
            "bulkhead": BulkheadConfig,
            "thread-pool-bulkhead": ThreadPoolBulkheadConfig,
            "timelimiter": TimeLimiterConfig,
        }
        cb = settings.get("circuitbreaker")
        retry = dict(settings.get("retry") or {})
        ignores = retry.pop("ignore-exceptions", None)
        budget = retry.pop("budget", None)
        return _build(
            cls,
            {**data, **client},
            retry=_build(RetryConfig, retry),
            retry_ignores=tuple(ignores) if ignores is not None else None,
            retry_budget=_build(RetryBudgetConfig, budget) if budget is not None else None,
            circuitbreaker=_breaker(cb) if cb is not None else None,
            fallbacks=fallbacks,
            db_pool=_build(DbPoolConfig, pool) if pool is not None else None,
            **{
                name.replace("-", "_"): _build(config, settings[name])
                for name, config in optional.items()
                if name in settings
            },
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ShopConfig:
        """Read the harness's ``target.json``; one of another version is refused (see
        ``SCHEMA``), so a shop started by another harness says so instead of misreading it."""
        data = json.loads(Path(path).read_text())
        found = data.pop("schema", None) if isinstance(data, dict) else None
        if found != SCHEMA:
            raise ValueError(
                f"{path}: schema {found!r}, and this shop reads {SCHEMA!r}: it was written "
                "by another version of the harness"
            )
        return cls.from_dict(data)


C = TypeVar("C", bound="DataclassInstance")


def _field_name(cls: type[DataclassInstance], key: str) -> str | None:
    """The field of ``cls`` a kebab-case property sets, or None."""
    names = {f.name for f in fields(cls)}
    name = key.replace("-", "_")
    if name not in names and f"{name}_s" in names:
        name += "_s"  # durations arrive in seconds
    return name if name in names else None


def _build(cls: type[C], properties: dict[str, Any], **extra: Any) -> C:
    """``cls`` from kebab-case properties; a name not among its fields is an error."""
    kwargs = dict(extra)
    for key, value in properties.items():
        name = _field_name(cls, key)
        if name is None:
            raise ValueError(f"{cls.__name__}: unknown setting {key!r}")
        kwargs[name] = value
    return cls(**kwargs)


def _breaker(properties: dict[str, Any]) -> BreakerConfig:
    """The breaker of the block's ``type``; the other type's settings are dropped, and a
    setting of neither is an error."""
    properties = dict(properties)
    kind = properties.pop("type", "resilience4j")
    kinds: dict[str, type[CircuitBreakerConfig] | type[NaiveCircuitBreakerConfig]] = {
        "resilience4j": CircuitBreakerConfig,
        "naive": NaiveCircuitBreakerConfig,
    }
    if kind not in kinds:
        raise ValueError(f"circuitbreaker: unknown type {kind!r}; types: resilience4j, naive")
    chosen = kinds[kind]
    mine = {k: v for k, v in properties.items() if _field_name(chosen, k) is not None}
    for key in properties.keys() - mine.keys():
        if not any(_field_name(other, key) for other in kinds.values()):
            raise ValueError(f"{chosen.__name__}: unknown setting {key!r}")
    return _build(chosen, mine)
