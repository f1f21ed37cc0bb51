"""The scenario's typed models: traffic, builds, settings and the scenario itself.

A scenario says what load to send (``traffic``), how the payment gateway
misbehaves over time (``pg.phases``) and which builds of the service to run
under both (``builds``). Keys use Resilience4j's kebab-case property names so
a seed's ``application.yml`` block reads the same here.

Time line: ``warmup`` runs first with a healthy gateway and is excluded from
the statistics; the measured window of ``duration`` follows, and phase
``start`` times count from its beginning. The fault models are in
``harness.scenario.faults``, each build kind's settings in
``harness.scenario.builds``; reading a file is ``harness.scenario.loader``.
Every number is finite and bounded by what one machine can run
(``harness.scenario.bounds``), and names and paths are checked once here.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness.core.durations import Duration, format_duration
from harness.core.rates import RateProfile, peak_of_sum
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import (
    MAX_BUILDS,
    MAX_DURATION_S,
    MAX_ENDPOINT_RATE,
    MAX_ENDPOINTS,
    MAX_GATE_NAME_CHARS,
    MAX_GATES,
    MAX_IN_FLIGHT,
    MAX_PLANNED_REQUESTS,
    MAX_SEED,
    MAX_STAGES,
    MAX_TEXT_CHARS,
    MAX_TIMEOUT_S,
    MAX_TOTAL_RATE,
    MAX_WARMUP_S,
    MIN_EXPECTED_REQUESTS,
    MIN_SCRAPES,
    SafeName,
    check_json,
    check_name,
    check_path,
    check_printable,
)
from harness.scenario.builds import Build
from harness.scenario.client_retry import ClientRetry
from harness.scenario.dependencies import (
    MAX_DEPENDENCIES,
    PG,
    PLACEHOLDER_PARTS,
    Dependency,
    Played,
    check_dependency_name,
    overlap_problems,
    route_problems,
    timeline,
    toxic_problems,
)
from harness.scenario.faults import PgSchedule, Phase
from harness.scenario.outcomes import Outcomes, PresetName
from harness.scenario.placeholders import DEPENDENCY_PLACEHOLDER, placeholders_in
from harness.scenario.recovery import RecoverySettings, recovery_problems
from harness.scenario.requests import Method, RequestShape, shape_problems
from harness.scenario.sweep import Sweep

# ---------------------------------------------------------------- traffic


class Stage(StrictModel):
    """One stage of a ramping rate (k6's ramping-arrival-rate): linear to ``target`` over
    ``duration``, from the previous stage's target (the first from ``start-rate``)."""

    duration: Duration = Field(gt=0, le=MAX_DURATION_S)
    target: float = Field(ge=0, le=MAX_ENDPOINT_RATE, description="requests per second at its end")


class Endpoint(RequestShape):
    """One stream of requests (open model): a constant ``rate`` or ramping ``stages``.

    Stages count from the start of the measured window, like phases; the
    warmup runs at ``start-rate``, and after the last stage the rate stays at
    its target until the window ends. ``arrivals`` spaces the requests evenly
    (``uniform``) or as a Poisson process of that rate, seeded by the scenario's
    seed and the endpoint's name (every build gets the same arrival times).
    What each request carries beyond its path (headers, query, templates, a mix of
    requests, a data file) is ``RequestShape``'s (``harness.scenario.requests``).
    """

    method: Method = "GET"
    path: str | None = Field(None, description="the path (or requests: a weighted mix)")
    rate: float | None = Field(
        None, gt=0, le=MAX_ENDPOINT_RATE, description="requests per second (or give stages)"
    )
    stages: list[Stage] | None = Field(
        None,
        min_length=1,
        max_length=MAX_STAGES,
        description="a ramping rate instead of rate: linear ramps from the start of the window",
    )
    start_rate: float | None = Field(
        None, ge=0, le=MAX_ENDPOINT_RATE, description="stages: the rate during warmup (default 0)"
    )
    arrivals: Literal["uniform", "poisson"] = Field(
        "uniform", description="evenly spaced, or a Poisson process (seeded)"
    )
    timeout: Duration = Field(
        10.0, gt=0, le=MAX_TIMEOUT_S, description="client gives up after this"
    )
    params: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="path parameters drawn uniformly from [low, high]"
    )
    body: dict[str, Any] | None = None
    idempotency_key: bool = Field(False, description="send a fresh Idempotency-Key header")
    calls_gateway: bool = Field(
        False, description="this endpoint calls the gateway (used for amplification)"
    )
    max_in_flight: int | None = Field(
        None,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="at most this many requests of the endpoint open at once; an arrival "
        "that finds them all open is dropped, not sent, and counted (k6's maxVUs)",
    )
    retry: ClientRetry | None = Field(
        None, description="the client retries failed requests (needs the endpoint's timeout)"
    )
    outcomes: Outcomes | PresetName | None = Field(
        None,
        description="what counts as refused, fallback, degraded or cached in its answers "
        "(status, headers, JSONPath on the body); a preset's name alone, e.g. x-outcome",
    )

    @field_validator("body")
    @classmethod
    def _body_is_json(cls, body: dict[str, Any] | None) -> dict[str, Any] | None:
        return check_json(body, "body")

    @model_validator(mode="after")
    def _params_cover_path(self) -> Endpoint:
        # The load generator formats the path with str.format: every placeholder must be bound.
        if self.path is not None:
            check_path(self.path, self.params)
        return self

    def shape_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Path or mix, headers and templates checked against the params (paths under the
        endpoint); the data file's columns are checked where the file is read."""
        return shape_problems(
            self, path=self.path, params=self.params, body=self.body,
            idempotency_key=self.idempotency_key, columns=None,
        )  # fmt: skip

    def request_label(self) -> str:
        """What the endpoint sends, for reports: ``POST /api/pay``, or its mix's requests."""
        if self.requests is None:
            return f"{self.method} {self.path}"
        return ", ".join(f"{v.method or self.method} {v.path}" for v in self.requests)

    @model_validator(mode="after")
    def _one_shape(self) -> Endpoint:
        if self.rate is not None and self.stages is not None:
            raise ValueError(
                "rate and stages both given: give rate (a constant rate) or stages (a ramping "
                "rate), not both"
            )
        if self.rate is None and self.stages is None:
            raise ValueError("give rate (requests per second) or stages (a ramping rate)")
        if self.start_rate is not None and self.stages is None:
            raise ValueError("start-rate applies to stages only; with rate, the rate is constant")
        if self.stages is not None and not (
            self.start_rate or any(stage.target > 0 for stage in self.stages)
        ):
            raise ValueError("every stage's target is 0 (and start-rate too): nothing is sent")
        return self

    @property
    def stages_s(self) -> float:
        """How long the stages last (0 for a constant rate)."""
        return sum(stage.duration for stage in self.stages or ())

    def rate_profile(self, warmup_s: float, duration_s: float) -> RateProfile:
        """Requests per second in measured-window time, from ``-warmup_s`` to ``duration_s``."""
        if self.stages is None:
            assert self.rate is not None  # _one_shape
            return RateProfile.constant(self.rate, -warmup_s, duration_s)
        start = self.start_rate or 0.0
        knots = [(-warmup_s, start)] if warmup_s > 0 else []
        knots.append((0.0, start))
        t = 0.0
        for stage in self.stages:
            t += stage.duration
            knots.append((t, stage.target))
        if t < duration_s:  # the last target holds until the window ends
            knots.append((duration_s, self.stages[-1].target))
        return RateProfile(tuple(knots))

    def shape(self) -> str:
        """The traffic in a few words, for reports: ``35/s`` or ``stages 0 -> 200/s, poisson``."""
        if self.stages is None:
            text = f"{self.rate:g}/s"
        else:
            targets = [self.start_rate or 0.0, *(s.target for s in self.stages)]
            text = "stages " + " -> ".join(f"{r:g}" for r in targets) + "/s"
        return text if self.arrivals == "uniform" else f"{text}, poisson"


class MetricsSettings(StrictModel):
    """How the harness watches the processes."""

    interval: Duration = Field(1.0, ge=0.1, le=60)
    timeout: Duration | None = Field(
        None,
        gt=0,
        le=60,
        description="a scrape not answered within this fails (default: the interval; "
        "at most the interval, as Prometheus's scrape_timeout)",
    )

    @field_validator("timeout")
    @classmethod
    def _timeout_within_interval(cls, timeout: float | None, info: ValidationInfo) -> float | None:
        # One thread scrapes every source in turn: a longer wait would delay the next scrape.
        interval = info.data.get("interval")
        if timeout is not None and interval is not None and timeout > interval:
            raise ValueError(
                f"{format_duration(timeout)} is longer than the interval "
                f"{format_duration(interval)}: at most the interval"
            )
        return timeout

    def scrape_timeout(self) -> float:
        """How long a scrape may wait for its answer, in seconds."""
        return self.timeout if self.timeout is not None else self.interval


# ---------------------------------------------------------------- gates


class GateSpec(StrictModel):
    """A named gate; a bare string in ``gates:`` is a gate named by its own text."""

    name: str | None = Field(None, max_length=MAX_GATE_NAME_CHARS)
    expr: str = Field(min_length=3)
    seed: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_GATE_NAME_CHARS,
        description='the seed article\'s own figure for the claim, as text (e.g. "7.21 s"); '
        "shown beside ours in the report's Seed claims",
    )
    abort: bool = Field(
        False,
        description="stop the build's load once the gate fails, checked after each phase ends "
        "(k6's abortOnFail); every figure it names must be cut to a phase: [phase]",
    )

    @field_validator("name")
    @classmethod
    def _name_prints(cls, name: str | None) -> str | None:
        # Shown in tables and written into JUnit XML, where a control character is invalid.
        return None if name is None else check_printable(name, "a gate's name")

    @field_validator("seed", mode="before")
    @classmethod
    def _seed_is_text(cls, seed: object) -> object:
        # Text, not a number: "7.21 s" or "about 80%" is what the seed wrote; YAML would
        # turn an unquoted 0.8 into a float and lose the way it was written.
        if seed is not None and not isinstance(seed, str):
            raise ValueError(
                f"seed is the seed's own figure as text, not {type(seed).__name__} {seed!r}: "
                f'quote it, e.g. seed: "{seed}"'
            )
        return seed if seed is None else check_printable(seed, "a gate's seed")


def _gate_tag(value: Any) -> str:
    """A gate is its text or a mapping: check it as one, so an error names only that shape."""
    return "<text>" if isinstance(value, str) else "<spec>"


GateItem = Annotated[
    # The text is a spec's ``expr``: the same bound, checked here, where the error is located.
    Annotated[str, Field(min_length=3), Tag("<text>")] | Annotated[GateSpec, Tag("<spec>")],
    Discriminator(_gate_tag),
]
"""One entry of ``gates:``: ``"a.b <= 1"`` or ``{name: ..., expr: ..., seed: ...}``."""


# ---------------------------------------------------------------- scenario


class Scenario(StrictModel):
    """A whole experiment: load, faults and the builds to compare."""

    name: SafeName = Field(description="names the results folder")
    description: str = Field("", max_length=MAX_TEXT_CHARS)
    seed: int = Field(0, ge=0, lt=MAX_SEED)
    warmup: Duration = Field(5.0, ge=0, le=MAX_WARMUP_S)
    duration: Duration = Field(gt=0, le=MAX_DURATION_S)
    drain: Duration | None = Field(
        None, ge=0, le=MAX_TIMEOUT_S, description="max wait for in-flight requests"
    )
    traffic: dict[str, Endpoint] = Field(min_length=1, max_length=MAX_ENDPOINTS)
    pg: PgSchedule = Field(default_factory=PgSchedule)
    dependencies: dict[str, Dependency] = Field(
        default_factory=dict,
        max_length=MAX_DEPENDENCIES,
        description="named dependencies the harness plays: stubs, or real upstreams forwarded "
        "with faults (harness/scenario/dependencies.py)",
    )
    builds: dict[str, Build] = Field(min_length=1, max_length=MAX_BUILDS)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    recovery: RecoverySettings | None = Field(None, description="the recovered/stuck verdict")
    allow_remote: bool = Field(
        False, description="url builds may be off loopback (harness run needs --allow-remote too)"
    )
    gates: list[GateItem] = Field(
        default_factory=list,
        max_length=MAX_GATES,
        description="comparisons that fail the run (exit 1); see harness/scenario/gates.py",
    )
    sweep: Sweep | None = Field(
        None, description="candidates over one build's settings for `harness tune` (docs/tune.md)"
    )

    def gate_specs(self) -> list[GateSpec]:
        return [GateSpec(expr=g) if isinstance(g, str) else g for g in self.gates]

    @field_validator("traffic", "builds")
    @classmethod
    def _names_are_safe(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            check_name(name, dots=False)
        return value

    @field_validator("dependencies")
    @classmethod
    def _dependency_names(cls, value: dict[str, Dependency]) -> dict[str, Dependency]:
        for name in value:
            check_dependency_name(name)
        return value

    @property
    def has_pg(self) -> bool:
        """Whether the run plays the payment gateway: a scenario that names its dependencies
        plays ``pg`` only if it gives ``pg:`` too."""
        return not self.dependencies or "pg" in self.model_fields_set

    def played(self) -> list[Played]:
        """Every dependency the run plays, ``pg`` first, then the named ones in file order."""
        named = [Played(n, d, d.api) for n, d in self.dependencies.items()]
        return ([Played(PG, self.pg, "pg")] if self.has_pg else []) + named

    @property
    def phases(self) -> list[Phase]:
        """The run's time line: every dependency's phases, by start (they never overlap)."""
        return timeline(self.played())

    def phase_dependency(self, phase: str) -> str | None:
        """The dependency a phase breaks (None: no such phase)."""
        return next((d.name for d in self.played() for p in d.phases if p.name == phase), None)

    def rate_profile(self, endpoint: str) -> RateProfile:
        """The endpoint's offered rate over the load, in measured-window time."""
        return self.traffic[endpoint].rate_profile(self.warmup, self.duration)

    def most_attempts(self) -> float:
        """Attempts one build may send, warmup included: every request, ``max-attempts``
        times where the client retries (``traffic.<ep>.retry``)."""
        return sum(
            self.rate_profile(name).total * (1 if ep.retry is None else ep.retry.max_attempts)
            for name, ep in self.traffic.items()
        )

    def offered_rps(self, endpoint: str, start_s: float, end_s: float) -> float:
        """The endpoint's mean offered rate over ``[start_s, end_s)`` of the measured window."""
        return self.rate_profile(endpoint).mean(start_s, end_s)

    def gateway_endpoints(self) -> list[str]:
        """The endpoints marked ``calls-gateway``, in the scenario's order (what amplification,
        the gateway-calls chart and the silent-gateway warning read)."""
        return [name for name, ep in self.traffic.items() if ep.calls_gateway]

    def cross_field_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Fields checked against each other (stages and phases against the duration, the
        load against one machine): (YAML path, message) of each, said at the field's own
        line by the loader. A phase's path is its index in ``pg.phases``, by start."""
        found = self._stage_problems() + self._measure_problems() + self._retry_problems()
        played = self.played()
        for dep in played:
            found += dep.schedule.brownout_problems(dep.at)
            for i, phase in enumerate(dep.phases):
                if phase.end > self.duration + 1e-9:
                    found.append(
                        (
                            (*dep.at, "phases", i, "duration"),
                            f"phase {phase.name!r} ends at {phase.end:g}s, after the run's "
                            f"duration {self.duration:g}s",
                        )
                    )
        found += overlap_problems(played)
        found += toxic_problems(played)
        for name, named in self.dependencies.items():
            found += route_problems(name, named)
        found += self._dependency_url_problems()
        found += self._cap_problems()
        found += recovery_problems(self.recovery, self.phases, self.duration)
        if not found:  # the load over a time line that holds together
            found += [(("traffic",), m) for m in self._load_problems()]
        found += [
            (("traffic", name, *at), message)
            for name, ep in self.traffic.items()
            for at, message in ep.shape_problems()
        ]
        return found

    def _dependency_url_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """``{dep.NAME.PART}`` naming no dependency, or a part its kind has not (a TCP
        dependency has no URL), and a dependency no build points at."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        named: set[str] = set()
        for build, spec in self.builds.items():
            for text in _texts(spec.model_dump()):
                for placeholder in placeholders_in(text):
                    if placeholder == "pg_url" and not self.has_pg:
                        found.append(
                            (
                                ("builds", build),
                                "{pg_url} is the payment gateway's URL, which this scenario "
                                "does not play (it names dependencies and gives no pg:); "
                                "use {dep.NAME.url}, or add pg:",
                            )
                        )
                    m = DEPENDENCY_PLACEHOLDER.match(placeholder)
                    if m is None:
                        continue
                    name, part = m.group(1), m.group(2)
                    named.add(name)
                    dep = self.dependencies.get(name)
                    if dep is None:
                        known = ", ".join(self.dependencies) or "none declared"
                        found.append(
                            (
                                ("builds", build),
                                f"{{{placeholder}}} names no dependency (dependencies: {known})",
                            )
                        )
                    elif part not in PLACEHOLDER_PARTS[dep.api]:
                        parts = ", ".join(f"{{dep.{name}.{p}}}" for p in PLACEHOLDER_PARTS[dep.api])
                        found.append(
                            (
                                ("builds", build),
                                f"{{{placeholder}}}: {name!r} is a TCP dependency (tcp:), which "
                                f"has no URL: give the build {parts} (e.g. in a JDBC or "
                                "redis:// URL of its own)",
                            )
                        )
        fixed = any(not b.cappable for b in self.builds.values())  # a url build: its own config
        if fixed:  # started by someone else, with its dependencies' URLs: they must not move
            found += [
                (
                    ("dependencies", name),
                    f"a url build needs dependencies.{name}.port: the harness does not start "
                    "that service, so it cannot tell it where this dependency is; set port: N "
                    "and point the service at http://127.0.0.1:N",
                )
                for name, dep in self.dependencies.items()
                if dep.port is None
            ]
        for name, dep in self.dependencies.items():
            if name not in named and not (fixed and dep.port is not None):
                where = "address" if dep.api == "tcp" else "URL"
                part = "address" if dep.api == "tcp" else "url"
                found.append(
                    (
                        ("dependencies", name),
                        f"no build points at dependency {name!r}: give a build its {where} as "
                        f'"{{dep.{name}.{part}}}" (in command, env or config), or drop it',
                    )
                )
        return found

    def _cap_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """A phase's target caps on builds the harness does not run (a ``url`` build)."""
        uncapped = [name for name, b in self.builds.items() if not b.cappable]
        return [
            (
                (*dep.at, "phases", i, "target"),
                f"phase {phase.name!r} caps the target ({phase.target.label}), but the "
                f"harness does not run build(s) {', '.join(uncapped)} (a url build is a "
                "service already running), so it cannot cap them; run it as a command, "
                "jar or docker build, or drop target: from the phase",
            )
            for dep in self.played()
            for i, phase in enumerate(dep.phases)
            if phase.target is not None and uncapped
        ]

    def _measure_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """A window too short to scrape, and endpoints that would send nothing in it."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        least = MIN_SCRAPES * self.metrics.interval
        if self.duration < least - 1e-9:
            found.append(
                (
                    ("duration",),
                    f"duration {format_duration(self.duration)} is shorter than {MIN_SCRAPES} "
                    f"scrapes ({format_duration(least)}: metrics.interval "
                    f"{format_duration(self.metrics.interval)}); nothing could be measured",
                )
            )
        for name, ep in self.traffic.items():
            if ep.stages_s > self.duration + 1e-9:
                continue  # said at the stages
            expected = self.offered_rps(name, 0.0, self.duration) * self.duration
            if expected < MIN_EXPECTED_REQUESTS:
                found.append(
                    (
                        ("traffic", name, "rate" if ep.stages is None else "stages"),
                        f"expects {expected:.3g} requests in the measured window (mean rate x "
                        f"duration {format_duration(self.duration)}); at least "
                        f"{MIN_EXPECTED_REQUESTS}: it would send nothing to measure",
                    )
                )
        return found

    def _load_problems(self) -> list[str]:
        """The load checked against what one machine can send."""
        profiles = [self.rate_profile(name) for name in self.traffic]
        total_rate = peak_of_sum(profiles)
        if total_rate > MAX_TOTAL_RATE:
            return [
                f"the endpoints' rates add up to {total_rate:g}/s; at most {MAX_TOTAL_RATE:g}/s"
            ]
        planned = sum(p.total for p in profiles)
        if planned > MAX_PLANNED_REQUESTS:
            return [
                f"each build would send {planned:,.0f} requests (rates x (warmup + duration)); "
                f"at most {MAX_PLANNED_REQUESTS:,}"
            ]
        return []

    def _retry_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """A client that retries must give up on each attempt: its endpoint's own timeout."""
        return [
            (
                ("traffic", name, "retry"),
                f"endpoint {name!r} retries and has no timeout: give its timeout (e.g. "
                "timeout: 2s), after which an attempt counts as failed and may be retried",
            )
            for name, ep in self.traffic.items()
            if ep.retry is not None and "timeout" not in ep.model_fields_set
        ]

    def _stage_problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """Stages checked against the measured window."""
        found: list[tuple[tuple[str | int, ...], str]] = []
        for name, ep in self.traffic.items():
            if ep.stages_s > self.duration + 1e-9:
                found.append(
                    (
                        ("traffic", name, "stages"),
                        f"the stages last {format_duration(ep.stages_s)}, longer than the "
                        f"measured window (duration {format_duration(self.duration)}); stages "
                        "count from its start, like phases",
                    )
                )
        return found

    @property
    def drain_s(self) -> float:
        """Bound on waiting for in-flight requests once the schedule ends."""
        if self.drain is not None:
            return self.drain
        return max(e.timeout for e in self.traffic.values()) + 2.0

    def fault_window(self) -> tuple[float, float] | None:
        """Start and end (measured-time seconds) of the span covered by non-healthy phases
        (a phase that caps the target, or a TCP dependency's toxics, is not healthy, whatever
        its gateway does: ``Phase.faulty``)."""
        faulty = [p for p in self.phases if p.faulty]
        if not faulty:
            return None
        return min(p.start for p in faulty), max(p.end for p in faulty)


def _texts(value: Any) -> list[str]:
    """Every text in a dumped model (where a build may use a placeholder)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (*_texts(k), *_texts(v))]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _texts(v)]
    return []


class LoadedScenario(BaseModel):
    """A validated scenario together with the text it came from (for the run manifest)."""

    model_config = ConfigDict(frozen=True)

    path: str
    text: str
    scenario: Scenario

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()
