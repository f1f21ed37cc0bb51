"""The load plan: what the Locust process must send, as JSON both sides can read.

Kept free of Locust and gevent imports so the orchestrator can build it. The
plan is deterministic: every arrival's time, its path parameters and its
Idempotency-Key follow from the seed, the endpoint's name and the request's
index, so every build (and every way of splitting the plan over workers)
sends the same requests at the same moments.

Arrival times come from the endpoint's rate profile (``harness.core.rates``),
in seconds from the load's start (the warmup's start):

- ``uniform``: the i-th request where the integral of the rate reaches ``i``
  (``i / rate`` for a constant rate, the root of a quadratic on a ramp);
- ``poisson``: a non-homogeneous Poisson process by time rescaling: unit-rate
  exponential gaps, summed, mapped through the inverse of the integrated rate.

Split over ``workers``, worker ``k`` sends the requests whose index is
``k`` modulo ``workers``: interleaved, so each keeps the plan's own spacing and
every request is sent by exactly one of them.
"""

from __future__ import annotations

import functools
import heapq
import random
import uuid
from collections.abc import Iterator
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from harness.core.handoff import Handoff
from harness.core.rates import RateProfile
from harness.scenario.client_retry import ClientRetry
from harness.scenario.outcomes import Outcomes
from harness.scenario.requests import RequestShape, read_data

if TYPE_CHECKING:  # the load generator reads plans (a retry model in them), never a scenario
    from harness.scenario.schema import Scenario

PROTOCOL = 7
"""Version of what the load generator is handed: ``plan.json`` (its ``schema`` says it) and the
messages between a Locust master and its workers (``harness.load.master``), which carry the
same plan. One number for both: a plan a worker gets by message is the file's payload."""

SAMPLE_COLUMNS = (
    "endpoint",
    "index",
    "intended_start",
    "actual_start",
    "end",
    "status",
    "error",
    "outcome",
    "attempt",
    "request",
    "class",
)
"""Columns of ``samples.csv``: one row per attempt; times are Unix seconds. ``attempt`` is 1
for a request's first attempt; ``request`` is the ``index`` of its first attempt. ``outcome``
is the answer's own name for itself (its ``outcomes.label`` header; empty without one),
``class`` what the answer was by the endpoint's outcomes (``harness.scenario.outcomes``:
``success``, ``refused``, ``fallback``...; empty for a dropped arrival)."""
CLASS = "class"
DROPPED = "Dropped"
"""The ``error`` of a row whose request was never sent: its endpoint's ``max_in_flight``
requests were all open when it was due (k6's dropped iteration). Its ``end`` is empty."""

Arrivals = Literal["uniform", "poisson"]


def failure_of(exc: BaseException) -> str:
    """What kind of failure an attempt's exception is, as ``retry.on`` names it: ``timeout``
    (no answer within the endpoint's timeout), ``connection`` (refused, reset, closed before
    the whole answer: ``harness.load.wire``), or ``""`` (a broken answer: never retried)."""
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "connection" if isinstance(exc, OSError) else ""


def retry_rng(seed: int, name: str, request: int) -> random.Random:
    """The jitter of one request's retries: the same in every build and worker split."""
    return random.Random(f"{seed}:{name}:{request}:retry")


def attempt_index(request: int, attempt: int, planned: int) -> int:
    """The ``index`` of a request's ``attempt``-th attempt: the request's own for the first,
    then ``request + (attempt - 1) x planned`` (``planned``: the endpoint's requests, all
    workers), so every attempt's index is unique without the workers agreeing on anything."""
    return request + (attempt - 1) * planned


@dataclass(frozen=True)
class EndpointPlan:
    """One endpoint's stream, each request with its own client timeout.

    ``rate`` requests per second over the whole load, unless ``knots`` give a
    piecewise-linear rate ``(seconds from the load's start, rate)``; then
    ``rate`` is its peak, for people reading the plan. ``count`` is fixed for
    Poisson arrivals (how many the seeded process puts in the load).
    """

    method: str
    path: str
    rate: float
    timeout_s: float
    params: dict[str, tuple[int, int]] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    idempotency_key: bool = False
    knots: tuple[tuple[float, float], ...] = ()
    arrivals: Arrivals = "uniform"
    count: int | None = None
    max_in_flight: int | None = None
    """At most this many requests open at once, all workers together (k6's maxVUs)."""
    retry: ClientRetry | None = None
    """The client retries failed requests (the scenario's own model, asked ``retries`` and
    ``wait_s``); None: each request is sent once."""
    shape: RequestShape | None = None
    """Headers, query, templates, a mix of requests, a data file (the scenario's own model,
    ``harness.load.requests`` builds each request from it); None: none of them (then
    ``path`` and ``body`` are the request; with a mix, ``path`` is empty)."""
    columns: tuple[str, ...] = ()
    """The data file's columns (``shape.data``), read by the orchestrator."""
    rows: tuple[tuple[str, ...], ...] = ()
    """The data file's rows, carried in the plan so a worker on another machine has them."""
    outcomes: Outcomes | None = None
    """How its answers are classed, resolved (the scenario's own model: every class spelt
    out); None: the ``default`` preset's."""

    def in_flight_limit(self, worker: int, workers: int) -> int | None:
        """Worker ``worker``'s share of ``max_in_flight``, split as the requests are: the
        remainder to the first workers, and never less than one each."""
        if self.max_in_flight is None:
            return None
        share, extra = divmod(self.max_in_flight, workers)
        return max(1, share + (1 if worker < extra else 0))

    def profile(self, total_s: float) -> RateProfile:
        """Requests per second over ``[0, total_s]``, the load's own time."""
        if self.knots:
            return RateProfile(self.knots)
        return RateProfile.constant(self.rate, 0.0, total_s)


@dataclass(frozen=True)
class LoadPlan:
    """Everything the locustfile needs; ``go_path`` is written by the orchestrator to start.

    ``workers`` Locust workers share the plan (1: a single Locust process).
    """

    base_url: str
    seed: int
    warmup_s: float
    duration_s: float
    drain_s: float
    endpoints: dict[str, EndpointPlan]
    samples_path: str
    progress_path: str
    go_path: str
    workers: int = 1

    @property
    def total_s(self) -> float:
        return self.warmup_s + self.duration_s

    def planned_count(self, name: str) -> int:
        """Requests the plan sends for one endpoint, all workers together."""
        ep = self.endpoints[name]
        if ep.count is not None:
            return ep.count
        return int(ep.profile(self.total_s).total + 1e-9)

    def worker_samples_path(self, worker: int) -> str:
        """Where the master writes worker ``worker``'s samples: ``samples.<worker>.csv``."""
        path = Path(self.samples_path)
        return str(path.with_name(f"{path.stem}.{worker}{path.suffix}"))

    def to_json(self) -> dict[str, Any]:
        return asdict(self, dict_factory=_json_fields)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoadPlan:
        data = dict(data)
        endpoints = {
            name: EndpointPlan(
                **{
                    **ep,
                    "params": {k: tuple(v) for k, v in ep.get("params", {}).items()},
                    "knots": tuple(tuple(k) for k in ep.get("knots", ())),
                    "retry": None
                    if ep.get("retry") is None
                    else ClientRetry.model_validate(ep["retry"]),
                    "shape": None
                    if ep.get("shape") is None
                    else RequestShape.model_validate(ep["shape"]),
                    "outcomes": None
                    if ep.get("outcomes") is None
                    else Outcomes.model_validate(ep["outcomes"]),
                    "columns": tuple(ep.get("columns", ())),
                    "rows": tuple(tuple(r) for r in ep.get("rows", ())),
                }
            )
            for name, ep in data.pop("endpoints").items()
        }
        return cls(endpoints=endpoints, **data)

    def handoff(self) -> str:
        """``plan.json``'s text: the plan under ``LOAD_PLAN``'s schema."""
        return LOAD_PLAN.text(self.to_json())

    def write(self, path: Path) -> None:
        path.write_text(self.handoff())

    @classmethod
    def read(cls, path: str | Path) -> LoadPlan:
        """The plan in ``plan.json``; ``HandoffError`` when another harness version wrote it."""
        return cls.from_json(LOAD_PLAN.read(path))


def _json_fields(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """A dataclass's fields as ``asdict`` gives them, a scenario model among them as its
    YAML keys would write it (``from_json`` validates it back)."""
    return {
        k: v.model_dump(mode="json", by_alias=True) if isinstance(v, BaseModel) else v
        for k, v in items
    }


LOAD_PLAN: Handoff[dict[str, Any]] = Handoff(
    "load-plan",
    PROTOCOL,
    required=tuple(
        f.name for f in fields(LoadPlan) if f.default is MISSING and f.default_factory is MISSING
    ),
)
"""``plan.json``, the load generator's hand-off (``harness.core.handoff``)."""


# ---------------------------------------------------------------- arrivals


def _unit_poisson(seed: int, name: str) -> Iterator[float]:
    """Arrival times of a rate-1 Poisson process: sums of exponential gaps, seeded.

    Python's ``random`` (Mersenne Twister, string seeds hashed by SHA-512) gives
    the same numbers on every machine and version, so workers elsewhere agree.
    """
    rng = random.Random(f"{seed}:{name}:arrivals")
    s = 0.0
    while True:
        s += rng.expovariate(1.0)
        yield s


@functools.lru_cache(maxsize=256)
def poisson_count(seed: int, name: str, total: float) -> int:
    """How many arrivals the seeded process puts before the integrated rate reaches ``total``."""
    for n, s in enumerate(_unit_poisson(seed, name)):
        if s >= total:
            return n
    raise AssertionError("unreachable")  # pragma: no cover


def arrival_offsets(
    plan: LoadPlan, name: str, worker: int = 0, workers: int = 1
) -> Iterator[tuple[float, int]]:
    """``(seconds from the load's start, index)`` of the endpoint's requests this worker sends."""
    ep = plan.endpoints[name]
    profile = ep.profile(plan.total_s)
    count = plan.planned_count(name)
    if ep.arrivals == "uniform":
        for i in range(worker, count, workers):
            yield profile.time_at(i), i
        return
    for i, x in enumerate(_unit_poisson(plan.seed, name)):
        if i >= count:
            return
        if i % workers == worker:
            yield profile.time_at(min(x, profile.total * (1 - 1e-15))), i


def schedule(
    plan: LoadPlan, start_at: float, worker: int = 0, workers: int = 1
) -> Iterator[tuple[float, str, int]]:
    """Planned (Unix time, endpoint, index) of this worker's requests, in time order."""

    def stream(name: str) -> Iterator[tuple[float, str, int]]:
        for offset, i in arrival_offsets(plan, name, worker, workers):
            yield start_at + offset, name, i

    return heapq.merge(*(stream(name) for name in plan.endpoints))


# ---------------------------------------------------------------- what each request carries


class Paths:
    """The path of each request of one endpoint, by index, drawn in index order.

    Path parameters come from one seeded stream per endpoint, one draw per
    request in index order, so a worker that sends only every N-th request
    still draws (and skips) the others': the same index gets the same path
    however the plan is split.
    """

    def __init__(self, seed: int, name: str, ep: EndpointPlan) -> None:
        self.template = ep.path
        self.params = list(ep.params.items())
        self.rng = random.Random(f"{seed}:{name}")
        self.next_index = 0

    def path(self, index: int) -> str:
        if not self.params:
            return self.template
        return self.template.format(**self.values(index))

    def values(self, index: int) -> dict[str, int]:
        """The path parameters of request ``index`` (also its templates' variables)."""
        if not self.params:
            return {}
        if index < self.next_index:
            raise ValueError(f"paths are drawn in index order: {index} after {self.next_index - 1}")
        values: dict[str, int] = {}
        while self.next_index <= index:
            values = {k: self.rng.randint(low, high) for k, (low, high) in self.params}
            self.next_index += 1
        return values


def idempotency_key(seed: int, name: str, index: int) -> str:
    """The request's Idempotency-Key: every build, and every worker, sends the same one, so the
    gateway's seeded faults give every build the same fate for the same payment."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{seed}/{name}/{index}"))


def endpoint_outcomes(scenario: Scenario, name: str) -> Outcomes:
    """How endpoint ``name``'s answers are read, resolved: its own ``outcomes:``, else the
    preset every build's kind declares for its service's answers (``answers``), else
    ``default``."""
    given = Outcomes.given(scenario.traffic[name].outcomes)
    if given is None:
        kinds = {type(b).answers for b in scenario.builds.values()}
        given = Outcomes(preset=kinds.pop() if len(kinds) == 1 else "default")
    return given.resolved()


def endpoint_plans(scenario: Scenario, scenario_dir: Path | None = None) -> dict[str, EndpointPlan]:
    """Each endpoint of the scenario's traffic as the load generator is handed it: one
    mapping for ``harness run`` (``plan_for``) and ``harness simulate``, so both send the
    same arrivals, paths, bodies, keys and client retries.

    ``scenario_dir``: where data files are read from (``ValueError`` if one cannot be);
    None: not read (the simulator needs no row: it picks a mix's request the same way).
    """
    endpoints = {}
    shape_keys = set(RequestShape.model_fields)
    for n, e in scenario.traffic.items():
        # Measured-window time to the load's own (0 at the warmup's start).
        profile = scenario.rate_profile(n).shifted(scenario.warmup)
        shape = RequestShape.model_validate(e.model_dump(include=shape_keys)) if e.shaped else None
        columns: tuple[str, ...] = ()
        rows: tuple[tuple[str, ...], ...] = ()
        if e.data is not None and scenario_dir is not None:
            columns, rows = read_data(e.data, scenario_dir)
        endpoints[n] = EndpointPlan(
            method=e.method,
            path=e.path or "",
            rate=e.rate if e.rate is not None else profile.peak,
            timeout_s=e.timeout,
            params=dict(e.params),
            body=e.body,
            idempotency_key=e.idempotency_key,
            knots=() if e.rate is not None else profile.knots,
            arrivals=e.arrivals,
            max_in_flight=e.max_in_flight,
            retry=e.retry,
            count=poisson_count(scenario.seed, n, profile.total)
            if e.arrivals == "poisson"
            else None,
            shape=shape,
            columns=columns,
            rows=rows,
            outcomes=endpoint_outcomes(scenario, n),
        )
    return endpoints
