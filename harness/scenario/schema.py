"""Scenario files: YAML validated once into typed models, every problem reported at once.

A scenario says what load to send (``traffic``), how the payment gateway
misbehaves over time (``pg.phases``) and which builds of the service to run
under both (``builds``). Keys use Resilience4j's kebab-case property names so
a seed's ``application.yml`` block reads the same here.

Time line: ``warmup`` runs first with a healthy gateway and is excluded from
the statistics; the measured window of ``duration`` follows, and phase
``start`` times count from its beginning.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, Protocol, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from harness.core.durations import Duration
from harness.core.errors import Problem, ScenarioError


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Model(BaseModel):
    """Strict base: unknown keys are errors, keys are kebab-case in YAML."""

    model_config = ConfigDict(extra="forbid", alias_generator=_kebab, populate_by_name=True)


StrictModel = _Model
"""The strict, kebab-case base for other YAML files of the harness (proxy schedules)."""


# ---------------------------------------------------------------- traffic


class Endpoint(_Model):
    """One stream of requests at a constant arrival rate (open model)."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    path: str = Field(pattern=r"^/")
    rate: float = Field(gt=0, le=10_000, description="requests per second")
    timeout: Duration = Field(10.0, gt=0, description="client gives up after this")
    params: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="path parameters drawn uniformly from [low, high]"
    )
    body: dict[str, Any] | None = None
    idempotency_key: bool = Field(False, description="send a fresh Idempotency-Key header")
    calls_gateway: bool = Field(
        False, description="this endpoint calls the gateway (used for amplification)"
    )

    @model_validator(mode="after")
    def _params_cover_path(self) -> Endpoint:
        names = set(re.findall(r"{(\w+)}", self.path))
        missing = names - set(self.params)
        if missing:
            raise ValueError(
                f"path {self.path!r} uses {sorted(missing)} but params gives no range for it"
            )
        for name, (low, high) in self.params.items():
            if low > high:
                raise ValueError(f"params.{name}: low {low} is greater than high {high}")
        return self


# ---------------------------------------------------------------- faults

HANG_LIMIT_S = 600.0
"""A hung call is released after this long even if the caller never gives up (bounded work).

Every delay a fault asks for is capped by it too, so no wait in the gateway is unbounded.
"""

FAULT_TYPES = (
    "healthy",
    "latency",
    "timeout",
    "error",
    "reject",
    "reset",
    "refuse",
    "malformed",
    "slow-body",
)
"""Every ``type`` a fault may have, in the order docs/faults.md presents them."""

_DELAY_PARAMS = ("delay", "min", "max", "mean", "stddev", "median", "sigma")
_NEEDS = {
    "fixed": ("delay",),
    "uniform": ("min", "max"),
    "normal": ("mean", "stddev"),
    "lognormal": ("median", "sigma"),
}

Body = str | dict[str, Any]
"""A response body a fault sends: a string as it is (text/plain), a mapping as JSON."""


class Match(_Model):
    """Which calls a partial fault affects: every condition given must hold.

    ``path`` is the request path itself or a prefix of it ending at a ``/``
    boundary (``/v1/payments`` covers ``/v1/payments/approve``). ``header``
    names are case-insensitive, values exact: ``{X-Tenant: a}`` hurts one
    tenant and spares the others.
    """

    path: str | None = Field(None, pattern=r"^/")
    header: dict[str, str] = Field(default_factory=dict)

    @field_validator("header", mode="before")
    @classmethod
    def _numbers_are_text(cls, value: Any) -> Any:
        # `X-Version: 2` in YAML is an int; a header is always text.
        if isinstance(value, dict):
            return {
                k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
                for k, v in value.items()
            }
        return value

    @model_validator(mode="after")
    def _says_something(self) -> Match:
        if self.path is None and not self.header:
            raise ValueError("match needs path and/or header (to affect every call, drop match)")
        return self


class _FaultBase(_Model):
    """What every fault may say: how often it hits, and which calls it may hit."""

    probability: float = Field(
        1.0, ge=0, le=1, description="share of the matching calls it hits, decided per call by fate"
    )
    match: Match | None = None


class _DelayParams(_Model):
    """Parameters of one delay distribution (``fixed``, ``uniform``, ``normal``, ``lognormal``)."""

    delay: Duration | None = Field(None, le=HANG_LIMIT_S, description="fixed")
    min: Duration | None = Field(None, le=HANG_LIMIT_S, description="uniform")
    max: Duration | None = Field(None, le=HANG_LIMIT_S, description="uniform")
    mean: Duration | None = Field(None, le=HANG_LIMIT_S, description="normal")
    stddev: Duration | None = Field(None, description="normal")
    median: Duration | None = Field(None, gt=0, le=HANG_LIMIT_S, description="lognormal")
    sigma: float | None = Field(None, gt=0, description="lognormal, of log(delay)")

    def _check_params(self, distribution: str) -> None:
        needs = _NEEDS[distribution]
        missing = [n for n in needs if getattr(self, n) is None]
        if missing:
            raise ValueError(f"distribution {distribution} needs {', '.join(missing)}")
        extra = [n for n in _DELAY_PARAMS if n not in needs and getattr(self, n) is not None]
        if extra:
            raise ValueError(
                f"distribution {distribution} takes {', '.join(needs)}, not {', '.join(extra)}"
            )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g}s is greater than max {self.max:g}s")


class HealthyFault(_FaultBase):
    """The gateway answers 200 at once."""

    type: Literal["healthy"]


class LatencyComponent(_DelayParams):
    """One part of a ``mix``: chosen with probability ``weight`` / sum of weights."""

    weight: float = Field(gt=0)
    distribution: Literal["fixed", "uniform", "normal", "lognormal"]

    @model_validator(mode="after")
    def _parameters_match(self) -> LatencyComponent:
        self._check_params(self.distribution)
        return self


class LatencyFault(_FaultBase, _DelayParams):
    """The gateway answers 200 after a delay drawn from a distribution (delays of several add up).

    ``mix`` expresses a long tail (98% about 50 ms, 2% 2–3 s); ``ramp-to``
    grows a fixed delay linearly over the phase.
    """

    type: Literal["latency"]
    distribution: Literal["fixed", "uniform", "normal", "lognormal", "mix"] = "fixed"
    mix: list[LatencyComponent] | None = Field(None, min_length=1)
    ramp_to: Duration | None = Field(
        None, le=HANG_LIMIT_S, description="fixed delay at the phase's end (linear from delay)"
    )

    @model_validator(mode="after")
    def _parameters_match(self) -> LatencyFault:
        if self.distribution == "mix":
            if self.mix is None:
                raise ValueError(
                    "distribution mix needs mix: a list of {weight, distribution, ...parameters}"
                )
            given = [n for n in _DELAY_PARAMS if getattr(self, n) is not None]
            if given:
                raise ValueError(
                    f"distribution mix takes its parameters inside each mix entry, "
                    f"not {', '.join(given)}"
                )
        else:
            if self.mix is not None:
                raise ValueError(f"mix is only for distribution mix, not {self.distribution}")
            self._check_params(self.distribution)
        if self.ramp_to is not None and self.distribution != "fixed":
            raise ValueError(
                f"ramp-to needs distribution fixed (the delay grows linearly from delay to "
                f"ramp-to over the phase), not {self.distribution}"
            )
        return self


class TimeoutFault(_FaultBase):
    """The gateway hangs: no answer until the caller gives up, or a 200 after ``after``."""

    type: Literal["timeout"]
    after: Duration | None = Field(None, le=HANG_LIMIT_S)


class ErrorFault(_FaultBase):
    """The gateway answers a 5xx: one ``status``, or a weighted mix such as ``{500: 1, 503: 3}``."""

    type: Literal["error"]
    status: int | dict[int, float] = 500
    body: Body | None = Field(None, description="default {error: gateway failure, fault: error}")
    retry_after: Duration | None = Field(
        None, le=24 * 3600, description="sent as a Retry-After header in whole seconds"
    )

    @field_validator("status", mode="before")
    @classmethod
    def _code_or_weights(cls, status: Any) -> Any:
        # One message instead of one per member of the union.
        if isinstance(status, bool) or not isinstance(status, int | dict):
            raise ValueError("status is a code such as 503, or weights such as {500: 1, 503: 3}")
        return status

    @field_validator("status")
    @classmethod
    def _server_errors(cls, status: int | dict[int, float]) -> int | dict[int, float]:
        codes = [status] if isinstance(status, int) else list(status)
        if not codes:
            raise ValueError("status mix is empty; give a code such as 503 or {500: 1, 503: 3}")
        bad = [c for c in codes if not 500 <= c <= 599]
        if bad:
            raise ValueError(
                f"status {', '.join(map(str, bad))} is not a 5xx (500-599); "
                f"a business 4xx is type reject"
            )
        if isinstance(status, dict):
            weightless = [f"{c}: {w:g}" for c, w in status.items() if not w > 0]
            if weightless:
                raise ValueError(f"status weights must be positive, got {', '.join(weightless)}")
        return status


class RejectFault(_FaultBase):
    """A business refusal (4xx): a client must not retry it and a breaker must not count it."""

    type: Literal["reject"]
    status: int = Field(402, ge=400, le=499)
    body: Body | None = Field(None, description='default {"error": "INSUFFICIENT_BALANCE"}')
    retry_after: Duration | None = Field(None, le=24 * 3600)


class ResetFault(_FaultBase):
    """The gateway resets the TCP connection (RST), before or after reading the request body."""

    type: Literal["reset"]
    when: Literal["before-body", "after-body"] = "before-body"


class RefuseFault(_FaultBase):
    """The gateway stops listening for the phase (connection refused) and comes back after it."""

    type: Literal["refuse"]

    @model_validator(mode="after")
    def _whole_listener(self) -> RefuseFault:
        if self.probability != 1.0 or self.match is not None:
            raise ValueError(
                "refuse takes the whole listener down, so probability and match do not apply "
                "(for a share of calls, use type reset)"
            )
        return self


class MalformedFault(_FaultBase):
    """An answer HTTP cannot parse: nothing at all, random bytes, or a body cut short."""

    type: Literal["malformed"]
    kind: Literal["empty", "garbage", "truncated"]


class SlowBodyFault(_FaultBase):
    """Status and headers at once, then the body dribbled in ``chunks`` pieces over ``duration``."""

    type: Literal["slow-body"]
    duration: Duration = Field(gt=0, le=HANG_LIMIT_S)
    chunks: int = Field(10, ge=1, le=10_000)


Fault = Annotated[
    HealthyFault
    | LatencyFault
    | TimeoutFault
    | ErrorFault
    | RejectFault
    | ResetFault
    | RefuseFault
    | MalformedFault
    | SlowBodyFault,
    Field(discriminator="type"),
]


def _check_combination(faults: list[Fault]) -> None:
    """Rules for several faults at once (a phase's ``faults:`` or a live override)."""
    if len(faults) > 1 and any(f.type == "refuse" for f in faults):
        raise ValueError(
            "refuse takes the whole listener down and cannot be combined with other faults"
        )


def headline_fault(faults: list[Fault]) -> Fault:
    """The fault that names a combination in one word: the first that is not ``healthy``."""
    return next((f for f in faults if f.type != "healthy"), faults[0])


class Repeat(_Model):
    """Blips: inside its phase the fault is on only for the first ``for`` of every ``every``."""

    every: Duration = Field(gt=0)
    for_: Duration = Field(gt=0, alias="for")

    @model_validator(mode="after")
    def _on_shorter_than_period(self) -> Repeat:
        if self.for_ >= self.every:
            raise ValueError(
                f"for ({self.for_:g}s) must be shorter than every ({self.every:g}s); "
                f"for a fault on the whole phase, drop repeat"
            )
        return self


def _healthy() -> Fault:
    return HealthyFault(type="healthy")


class Phase(_Model):
    """A named window of the measured time line with its faults in force.

    Give ``fault`` (one) or ``faults`` (a list, combined in order). Either way
    ``faults`` holds the whole list and ``fault`` the headline one (the first
    non-healthy), so code that names a phase by ``fault.type`` keeps working.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    start: Duration
    duration: Duration = Field(gt=0)
    fault: Fault = Field(default_factory=_healthy, description="one fault")
    faults: list[Fault] = Field(
        default_factory=list, min_length=1, description="several faults, combined in order"
    )
    repeat: Repeat | None = None

    @model_validator(mode="after")
    def _fault_or_faults(self) -> Phase:
        given = self.model_fields_set
        if "fault" in given and "faults" in given:
            raise ValueError("give either fault (one) or faults (a list), not both")
        if "faults" in given:
            _check_combination(self.faults)
            self.fault = headline_fault(self.faults)
        elif "fault" in given:
            self.faults = [self.fault]
        else:
            raise ValueError("a phase needs fault (one fault) or faults (a list of faults)")
        return self

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def label(self) -> str:
        """The phase's faults in one short name, e.g. ``timeout`` or ``latency+error``."""
        return "+".join(f.type for f in self.faults)


class FaultOverride(_Model):
    """A live override (``PUT /__admin/fault`` or the ``X-Harness-Fault`` header).

    The same fault models as a scenario, minus what needs a phase (``ramp-to``).
    """

    faults: list[Fault] = Field(min_length=1)

    @model_validator(mode="after")
    def _valid_without_a_phase(self) -> FaultOverride:
        _check_combination(self.faults)
        if any(isinstance(f, LatencyFault) and f.ramp_to is not None for f in self.faults):
            raise ValueError("ramp-to needs a phase to ramp over; give a fixed delay instead")
        return self


class _Timed(Protocol):
    name: str
    start: float

    @property
    def end(self) -> float: ...


T = TypeVar("T", bound=_Timed)


def ordered_phases(phases: list[T]) -> list[T]:
    """Phases sorted by start; raise ``ValueError`` if two overlap or share a name."""
    ordered = sorted(phases, key=lambda p: p.start)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b.start < a.end:
            raise ValueError(f"phase {b.name!r} starts before phase {a.name!r} ends")
    names = [p.name for p in phases]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"phase names must be unique, repeated: {dupes}")
    return ordered


class Gateway(_Model):
    """The payment gateway the harness plays: its fault schedule."""

    phases: list[Phase] = Field(default_factory=list)

    @field_validator("phases")
    @classmethod
    def _no_overlap(cls, phases: list[Phase]) -> list[Phase]:
        return ordered_phases(phases)


# ---------------------------------------------------------------- builds


class PgClient(_Model):
    """The target's HTTP client towards the gateway."""

    connect_timeout: Duration = Field(1.0, gt=0)
    read_timeout: Duration = Field(3.0, gt=0)


class RetrySettings(_Model):
    """Resilience4j ``resilience4j.retry.instances.<name>`` properties."""

    max_attempts: int = Field(3, ge=1, le=20)
    wait_duration: Duration = 0.5
    enable_exponential_backoff: bool = False
    exponential_backoff_multiplier: float = Field(2.0, ge=1)
    exponential_max_wait_duration: Duration | None = None
    enable_randomized_wait: bool = False
    randomized_wait_factor: float = Field(0.5, ge=0, lt=1)


class CircuitBreakerSettings(_Model):
    """Resilience4j ``resilience4j.circuitbreaker.instances.<name>`` properties."""

    sliding_window_type: Literal["COUNT_BASED", "TIME_BASED"] = "COUNT_BASED"
    sliding_window_size: int = Field(100, ge=1)
    minimum_number_of_calls: int = Field(100, ge=1)
    failure_rate_threshold: float = Field(50.0, gt=0, le=100)
    slow_call_rate_threshold: float = Field(100.0, gt=0, le=100)
    slow_call_duration_threshold: Duration = Field(60.0, gt=0)
    wait_duration_in_open_state: Duration = Field(60.0, gt=0)
    permitted_number_of_calls_in_half_open_state: int = Field(10, ge=1)
    automatic_transition_from_open_to_half_open_enabled: bool = False
    max_wait_duration_in_half_open_state: Duration = 0.0


class Resilience4j(_Model):
    """The resilience settings of one build, as a ``resilience4j:`` block would give them."""

    retry: RetrySettings = Field(default_factory=RetrySettings)
    circuitbreaker: CircuitBreakerSettings | None = None


Profile = Literal["retry-only", "retry-circuit-breaker"]


class Build(_Model):
    """One variant of the service under test."""

    target: Literal["shop"] = Field("shop", description="the reference target in targets/shop")
    profile: Profile
    workers: int = Field(200, ge=1, le=2000, description="request threads (Tomcat max-threads)")
    pg_client: PgClient = Field(default_factory=PgClient)
    resilience4j: Resilience4j = Field(default_factory=Resilience4j)

    @model_validator(mode="after")
    def _profile_matches_settings(self) -> Build:
        cb = self.resilience4j.circuitbreaker
        if self.profile == "retry-only" and cb is not None:
            raise ValueError(
                "profile retry-only has no circuit breaker; remove resilience4j.circuitbreaker "
                "or use profile retry-circuit-breaker"
            )
        if self.profile == "retry-circuit-breaker" and cb is None:
            self.resilience4j.circuitbreaker = CircuitBreakerSettings()
        return self


class MetricsSettings(_Model):
    """How the harness watches the processes."""

    interval: Duration = Field(1.0, ge=0.1, le=60)


# ---------------------------------------------------------------- gates


class GateSpec(_Model):
    """A named gate; a bare string in ``gates:`` is a gate named by its own text."""

    name: str | None = None
    expr: str = Field(min_length=3)


# ---------------------------------------------------------------- scenario


class Scenario(_Model):
    """A whole experiment: load, faults and the builds to compare."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    seed: int = 0
    warmup: Duration = Field(5.0, ge=0)
    duration: Duration = Field(gt=0, le=24 * 3600)
    drain: Duration | None = Field(None, ge=0, description="max wait for in-flight requests")
    traffic: dict[str, Endpoint] = Field(min_length=1)
    pg: Gateway = Field(default_factory=Gateway)
    builds: dict[str, Build] = Field(min_length=1)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    gates: list[str | GateSpec] = Field(
        default_factory=list, description="comparisons that fail the run (exit 1); see gates.py"
    )

    def gate_specs(self) -> list[GateSpec]:
        return [GateSpec(expr=g) if isinstance(g, str) else g for g in self.gates]

    @field_validator("traffic", "builds")
    @classmethod
    def _names_are_safe(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
                raise ValueError(f"name {name!r} may only use letters, digits, '-' and '_'")
        return value

    @model_validator(mode="after")
    def _phases_fit(self) -> Scenario:
        for phase in self.pg.phases:
            if phase.end > self.duration + 1e-9:
                raise ValueError(
                    f"phase {phase.name!r} ends at {phase.end:g}s, after the run's duration "
                    f"{self.duration:g}s"
                )
        return self

    @property
    def drain_s(self) -> float:
        """Bound on waiting for in-flight requests once the schedule ends."""
        if self.drain is not None:
            return self.drain
        return max(e.timeout for e in self.traffic.values()) + 2.0

    def fault_window(self) -> tuple[float, float] | None:
        """Start and end (measured-time seconds) of the span covered by non-healthy phases."""
        faulty = [p for p in self.pg.phases if p.fault.type != "healthy"]
        if not faulty:
            return None
        return min(p.start for p in faulty), max(p.end for p in faulty)


class LoadedScenario(BaseModel):
    """A validated scenario together with the text it came from (for the run manifest)."""

    model_config = ConfigDict(frozen=True)

    path: str
    text: str
    scenario: Scenario

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


# ---------------------------------------------------------------- loading


_Path = tuple[str | int, ...]
_KEY = "\x00key"
"""Path suffix under which the index keeps a mapping key's own node (for unknown keys)."""


def _problem_at(file: str, node: yaml.Node, field: str, message: str) -> Problem:
    return Problem(file, node.start_mark.line + 1, node.start_mark.column + 1, field, message)


def _index_nodes(
    node: yaml.Node, path: _Path, index: dict[_Path, yaml.Node], problems: list[Problem], file: str
) -> None:
    """Map each key path to its YAML node, so errors can name a line; flag duplicate keys."""
    index[path] = node
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key == "<<":
                continue
            if key in seen:
                problems.append(
                    _problem_at(
                        file,
                        key_node,
                        ".".join(str(p) for p in (*path, key)),
                        "duplicate key (YAML would silently keep only the last one)",
                    )
                )
            seen.add(key)
            index[(*path, key, _KEY)] = key_node
            _index_nodes(value_node, (*path, key), index, problems, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_nodes(item, (*path, i), index, problems, file)


def _locate(loc: tuple[str | int, ...], index: dict[_Path, yaml.Node]) -> tuple[_Path, yaml.Node]:
    """Follow a pydantic error location through the YAML; skip union tags absent from the file."""
    path: _Path = ()
    for part in loc:
        if (*path, part) in index:
            path = (*path, part)
    return path, index.get(path, index[()])


def _describe(error: ErrorDetails) -> str:
    msg = str(error["msg"])
    if error["type"] == "extra_forbidden":
        return "unknown key (check the spelling; see docs/scenario.md)"
    if error["type"] == "missing":
        return "required key is missing"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    given = error.get("input")
    if not isinstance(given, dict | list) and given is not None and repr(given) not in msg:
        msg += f" (got {given!r})"
    return msg


M = TypeVar("M", bound=BaseModel)


@dataclass
class Validated(Generic[M]):
    """A model validated from YAML, with the file's node index and problems found beside it."""

    model: M
    index: dict[_Path, yaml.Node]
    problems: list[Problem]


def validate_yaml(
    model: type[M], text: str, file: str, *, expected: str, reference: str = "docs/scenario.md"
) -> Validated[M]:
    """Parse YAML into ``model``; raise ``ScenarioError`` listing every problem with its line.

    Shared by scenarios and proxy schedules. Duplicate keys are returned as
    ``problems`` (not raised) so callers can add checks of their own first.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        raise ScenarioError(
            [Problem(file, line, col, "", f"not valid YAML: {exc.problem}")]
        ) from None
    if root is None or not isinstance(data, dict):
        raise ScenarioError([Problem(file, 1, 1, "", f"expected {expected}")])

    problems: list[Problem] = []
    index: dict[_Path, yaml.Node] = {}
    _index_nodes(root, (), index, problems, file)
    try:
        validated = model.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            path, node = _locate(loc, index)
            if error["type"] == "extra_forbidden":
                node = index.get((*path, _KEY), node)
            missing_key = error["type"] == "missing"
            field = ".".join(str(p) for p in (path + loc[-1:] if missing_key else path))
            message = _describe(error).replace("docs/scenario.md", reference)
            problems.append(_problem_at(file, node, field, message))
        raise ScenarioError(problems) from None
    return Validated(validated, index, problems)


def load_scenario_text(text: str, file: str = "<scenario>") -> LoadedScenario:
    """Validate scenario YAML text; raise ``ScenarioError`` listing every problem found."""
    done = validate_yaml(Scenario, text, file, expected="a mapping of scenario keys")
    problems = done.problems + _gate_problems(done.model, done.index, file)
    if problems:
        raise ScenarioError(problems)
    return LoadedScenario(path=file, text=text, scenario=done.model)


def _gate_problems(scenario: Scenario, index: dict[_Path, yaml.Node], file: str) -> list[Problem]:
    """Parse every gate and check the builds, phases and figures it names."""
    from harness.gates.evaluate import GateSyntaxError, check_gate, parse_gate

    problems = []
    for i, spec in enumerate(scenario.gate_specs()):
        try:
            messages = check_gate(parse_gate(spec.expr, spec.name), scenario)
        except GateSyntaxError as exc:
            messages = [str(exc)]
        node = index.get(("gates", i, "expr"), index.get(("gates", i), index[()]))
        problems += [_problem_at(file, node, f"gates.{i}", m) for m in messages]
    return problems


def load_scenario(path: str | Path) -> LoadedScenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(
            [Problem(str(p), None, None, "", f"cannot read: {exc.strerror}")]
        ) from None
    return load_scenario_text(text, str(p))
