"""Presets: how one kind of target names the canonical series, and a build's own ``map:``.

A preset names, for each canonical series (``harness.core.catalogue.SERIES``),
the concrete series it is read from. ``resolve_preset`` applies a build's
``metrics: {preset, map, breaker}``: ``map`` overrides or adds selectors, and
``breaker`` picks one breaker by its ``name`` label when a service has several.
Reading the samples through a preset is ``harness.analysis.series.map_canonical``.

The presets:

- ``shop``: the reference target (``targets/shop``), Resilience4j-style names.
- ``spring-boot``: Micrometer with resilience4j-micrometer and Tomcat, as
  ``/actuator/prometheus`` exposes them. Busy and max workers need Tomcat's
  MBean registry (``server.tomcat.mbeanregistry.enabled=true``): without it
  Spring Boot exposes no ``tomcat_threads_*`` series and they are not measured.
  A service on Reactor Netty (WebFlux) or Node has no pool at all: the reason then
  says so from the series it exposes (``analysis.servers``), whatever the preset.
  Gateway calls: Feign's client timers, else the breaker's timer, else Spring's
  ``http_client_requests`` (``Fallback``: whichever the service has). Retries are
  Resilience4j's Retry counters, registered only for a Retry the service has
  (``Preset.registered``).
- ``opossum``: opossum-prometheus (``circuit{name,event}`` counters, no state
  gauge: the state is derived from the ``open``/``halfOpen``/``close`` events).
  Busy and max workers and retries are ``targets/node-gateway``'s own series
  (``http_requests_in_flight``, ``http_max_concurrency``, ``vendor_retries_total``);
  another Node service says where its workers are with ``map:``. The event loop's lag
  is prom-client's ``nodejs_eventloop_lag_p99_seconds``.
- ``none``: nothing; only what ``map`` gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from harness.core.catalogue import CANONICAL_SERIES
from harness.core.errors import InputError
from harness.core.selectors import Selector, parse_selector
from harness.results.manifest import BuildRecord

BREAKER_STATES = {
    "closed": 0,
    "open": 1,
    "half_open": 2,
    "disabled": 3,
    "forced_open": 4,
    "metrics_only": 5,
}
"""Numeric codes of breaker states in the canonical ``breaker_state`` series: Resilience4j's
six (``metrics_only``: every call permitted, its outcomes still recorded)."""


@dataclass(frozen=True)
class Combination:
    """A counter read as a sum of selectors minus others (opossum: ``fire`` - ``reject``)."""

    plus: tuple[Selector, ...]
    minus: tuple[Selector, ...] = ()

    def __str__(self) -> str:
        text = " + ".join(str(s) for s in self.plus)
        return text + "".join(f" - {s}" for s in self.minus)


@dataclass(frozen=True)
class Fallback:
    """The first of several sources that a service exposes, best first.

    Spring services count their gateway calls in different places (Feign's own client
    timer, the breaker's timer, Spring's ``http_client_requests``) and have some of them
    only: the figure is read from the first whose series appears in the scrapes.
    ``per_breaker`` marks the choices ``metrics.breaker`` narrows (the breaker's own
    series); the others carry no breaker label.
    """

    choices: tuple[Selector | Combination, ...]
    per_breaker: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if not self.per_breaker:
            object.__setattr__(self, "per_breaker", (False,) * len(self.choices))

    def __str__(self) -> str:
        return ", else ".join(str(c) for c in self.choices)


Source = Selector | Combination | Fallback
"""Where a canonical counter is read from."""


@dataclass(frozen=True)
class StateEvents:
    """A breaker whose state is told only by counters of its transitions (opossum).

    ``label`` carries the event; the state after a scrape is the one the events
    counted since the previous scrape lead to, taken in the breaker's own order
    (closed -open-> open -halfOpen-> half_open -close-> closed, half_open -open-> open).
    """

    label: str = "event"
    open: str = "open"
    half_open: str = "halfOpen"
    close: str = "close"


@dataclass(frozen=True)
class Preset:
    """How one kind of target names the canonical series."""

    name: str
    selectors: Mapping[str, Source] = field(default_factory=dict)
    """Canonical series (``core.catalogue.SERIES``) -> what it is read from. A counter may
    be a ``Combination``. ``breaker_state``, without ``state_events``: a gauge with a
    ``state`` label, 1 for the current state (Resilience4j); with them: the counter of
    the breaker's events (opossum)."""
    state_events: StateEvents | None = None
    lazy_labels: frozenset[str] = frozenset()
    """Labels whose values appear only once counted (opossum's ``event``): while the
    series exists with the selector's other labels, a missing value reads 0."""
    breaker_label: str = "name"
    breaker_series: frozenset[str] = frozenset({"blocked_calls", "breaker_state"})
    """The canonical series that belong to the breaker, narrowed by ``breaker``."""
    breaker: str | None = None
    """The one breaker to read (its ``breaker_label`` value); None: every breaker."""
    overrides: Mapping[str, str] = field(default_factory=dict)
    """The build's ``map`` as written (for the record: ``describe``)."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """Why the preset names nothing for a canonical series, told when it is not measured."""
    registered: frozenset[str] = frozenset()
    """Canonical series a service exposes only when it has what they count: Resilience4j's
    Micrometer binder registers a Retry's counters per Retry instance, so a ``retries``
    series seen says the service has a Retry (``analysis.idle``). A series always exposed
    (the shop's, node-gateway's ``vendor_retries_total`` at 0 retries) says nothing."""

    def source(self, name: str) -> Source | None:
        """The selector (or difference) a canonical series is read from."""
        if name not in CANONICAL_SERIES:
            raise KeyError(name)
        return self.selectors.get(name)

    def gauge(self, name: str) -> Selector | None:
        """The selector of a gauge (a ``Combination`` is for counters only)."""
        source = self.source(name)
        return source if isinstance(source, Selector) else None

    @property
    def breaker_state(self) -> Selector | None:
        return self.gauge("breaker_state")

    def describe(self) -> dict[str, Any]:
        """What a manifest records so the analysis can ``resolve_preset`` it again."""
        return {"preset": self.name, "metrics_map": dict(self.overrides), "breaker": self.breaker}


_HIKARI = {
    "db_active": Selector("hikaricp_connections_active"),
    "db_pending": Selector("hikaricp_connections_pending"),
    "db_max": Selector("hikaricp_connections_max"),
    "db_timeouts": Selector("hikaricp_connections_timeout_total"),
}
"""HikariCP's pool series, as Micrometer names them (summed over pools: the ``pool`` label)."""
_R4J_BLOCKED = Selector("resilience4j_circuitbreaker_not_permitted_calls_total")
_R4J_FAILED = Selector("resilience4j_circuitbreaker_calls_seconds_count", {"kind": "failed"})
"""The calls the breaker recorded as failed (Resilience4j's calls timer; the shop's too)."""
_R4J_STATE = Selector("resilience4j_circuitbreaker_state")

_APPROVE = {"uri": "/v1/payments/approve"}
"""The gateway's approve route (``harness.gateway.decide.APPROVE_PATH``): a service's
other clients, whose calls are not the gateway's, are left out of its client timers."""
_SPRING_PG_CALLS = Fallback(
    (
        # Feign's MicrometerCapability (a MicrometerCapability bean; Spring Cloud OpenFeign
        # adds it to every client): one sample per request sent, each retried attempt too,
        # answered ones in feign.Client and timed-out or broken ones in feign.Client.exception.
        Combination(
            (
                Selector("feign_Client_seconds_count", _APPROVE),
                Selector("feign_Client_exception_seconds_count", _APPROVE),
            )
        ),
        # The breaker's Timer, one _count per kind (successful, failed, ignored): every
        # call it let through (each attempt when the Retry is outside it, Resilience4j's
        # default order). Not-permitted calls are counted apart (blocked_calls).
        Selector("resilience4j_circuitbreaker_calls_seconds_count"),
        # Spring's client observation (RestClient, RestTemplate, WebClient: uri; OpenFeign's
        # MicrometerObservationCapability, feign-micrometer on the classpath: http_url).
        # OpenFeign's misses the requests that timed out (OpenFeign/feign#2566, feign 13.6).
        Selector("http_client_requests_seconds_count", _APPROVE),
        Selector("http_client_requests_seconds_count", {"http_url": _APPROVE["uri"]}),
    ),
    per_breaker=(False, True, False, False),
)
"""Calls that reached the gateway, from the best counter a Spring service has."""

PRESETS: dict[str, Preset] = {
    "shop": Preset(
        name="shop",
        selectors={
            "busy_workers": Selector("shop_workers_busy"),
            "max_workers": Selector("shop_workers_max"),
            "blocked_calls": _R4J_BLOCKED,
            "pg_calls": Selector("shop_pg_calls_total"),
            "retries": Selector("shop_pg_retries_total"),
            "breaker_failures": _R4J_FAILED,
            "breaker_state": _R4J_STATE,
            **_HIKARI,
        },
    ),
    "spring-boot": Preset(
        name="spring-boot",
        selectors={
            "busy_workers": Selector("tomcat_threads_busy_threads"),
            "max_workers": Selector("tomcat_threads_config_max_threads"),
            "blocked_calls": _R4J_BLOCKED,
            "pg_calls": _SPRING_PG_CALLS,
            # Resilience4j counts calls, not attempts: the calls retried at least once.
            "retries": Combination(
                (
                    Selector("resilience4j_retry_calls_total", {"kind": "successful_with_retry"}),
                    Selector("resilience4j_retry_calls_total", {"kind": "failed_with_retry"}),
                )
            ),
            "breaker_failures": _R4J_FAILED,
            "breaker_state": _R4J_STATE,
            **_HIKARI,
        },
        breaker_series=frozenset(
            {"blocked_calls", "breaker_state", "pg_calls", "breaker_failures"}
        ),
        registered=frozenset({"retries"}),
        notes={
            "busy_workers": "Spring Boot exposes tomcat_threads_* only with "
            "server.tomcat.mbeanregistry.enabled=true",
            "max_workers": "Spring Boot exposes tomcat_threads_* only with "
            "server.tomcat.mbeanregistry.enabled=true",
        },
    ),
    "opossum": Preset(
        name="opossum",
        selectors={
            # targets/node-gateway's own gauges (summed over its pools): other Node services
            # name their workers differently and say so with map.
            "busy_workers": Selector("http_requests_in_flight"),
            "max_workers": Selector("http_max_concurrency"),
            "blocked_calls": Selector("circuit", {"event": "reject"}),
            # `fire` counts every call, refused ones too: the calls the breaker let through
            # are fire - reject (node-gateway's own count is vendor_calls_total).
            "pg_calls": Combination(
                (Selector("circuit", {"event": "fire"}),),
                (Selector("circuit", {"event": "reject"}),),
            ),
            "retries": Selector("vendor_retries_total"),
            "breaker_state": Selector("circuit"),
            # prom-client's default metrics: the loop's delay p99 since the scrape before.
            "event_loop_lag": Selector("nodejs_eventloop_lag_p99_seconds"),
        },
        state_events=StateEvents(),
        lazy_labels=frozenset({"event"}),
        breaker_series=frozenset({"blocked_calls", "breaker_state", "pg_calls"}),
        notes={
            "busy_workers": "the opossum preset reads node-gateway's http_requests_in_flight; "
            "map busy_workers to your service's in-flight gauge",
            "max_workers": "the opossum preset reads node-gateway's http_max_concurrency; "
            "map max_workers to your service's concurrency limit",
        },
    ),
    "none": Preset(name="none"),
}


def preset_named(name: str | None) -> Preset:
    """The preset a build recorded in the manifest; runs that recorded none used ``shop``."""
    try:
        return PRESETS[name or "shop"]
    except KeyError:
        raise InputError(f"unknown metrics preset {name!r}; known: {sorted(PRESETS)}") from None


def resolve_preset(
    name: str, overrides: Mapping[str, str] | None = None, breaker: str | None = None
) -> Preset:
    """A build's preset: ``name`` with its ``map`` overrides and its ``breaker`` applied.

    ``overrides`` maps canonical series to selectors (``name{label="v"}``); each
    replaces the preset's (a ``breaker_state`` selector is read the preset's way:
    a state gauge, or opossum's event counter). ``breaker`` adds
    ``name="<breaker>"`` to the preset's own breaker series
    (``Preset.breaker_series``); a selector ``map`` gives is used as written.
    Raises ``ValueError`` for an unknown preset, an unknown key or a malformed
    selector.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown metrics preset {name!r}; known: {', '.join(PRESETS)}")
    preset = PRESETS[name]
    changes: dict[str, Any] = {}
    for key, text in (overrides or {}).items():
        if key not in CANONICAL_SERIES:
            raise ValueError(
                f"metrics.map: unknown series {key!r}; known: {', '.join(CANONICAL_SERIES)}"
            )
        try:
            changes[key] = parse_selector(text)
        except ValueError as exc:
            raise ValueError(f"metrics.map.{key}: {exc}") from None
    if breaker is not None:
        if not breaker:
            raise ValueError("metrics.breaker: empty breaker name")
        for key in preset.breaker_series - set(changes):
            current = preset.source(key)
            if current is not None:
                changes[key] = _narrow(current, preset.breaker_label, breaker)
    notes = {k: v for k, v in preset.notes.items() if k not in (overrides or {})}
    return replace(
        preset,
        selectors={**preset.selectors, **changes},
        breaker=breaker,
        overrides=dict(overrides or {}),
        notes=notes,
        # A series the build maps itself is read from its own counter: no longer the binder's.
        registered=preset.registered - set(overrides or {}),
    )


def _narrow(source: Source, label: str, value: str) -> Source:
    if isinstance(source, Fallback):
        return replace(
            source,
            choices=tuple(
                _narrow(c, label, value) if by_breaker else c  # type: ignore[misc]
                for c, by_breaker in zip(source.choices, source.per_breaker, strict=True)
            ),
        )
    if isinstance(source, Combination):
        return Combination(
            tuple(s.with_labels(**{label: value}) for s in source.plus),
            tuple(s.with_labels(**{label: value}) for s in source.minus),
        )
    return source.with_labels(**{label: value})


def preset_for(info: BuildRecord) -> Preset:
    """The preset of a build as its manifest entry records it (``Preset.describe``).

    ``preset``, ``metrics_map`` and ``breaker`` (``harness.results.manifest`` gives
    a record written before them the shop's). A manifest naming an unknown preset
    or a bad selector is an ``InputError``.
    """
    try:
        return resolve_preset(info["preset"], info["metrics_map"], info["breaker"])
    except ValueError as exc:
        raise InputError(f"the manifest's metrics settings: {exc}") from None
