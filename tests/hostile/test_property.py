"""Property test of the scenario reader (issue 12): whatever the text, ``load_scenario_text``
returns or raises ``ScenarioError`` (nothing else) and never hangs (30 s), and what it
accepts, a run's start-up accepts: the load plan, the locust command, every path formatted
as the load generator formats it, each build's target config as the shop reads it, the
gateway's decision in every phase.

Scenarios are generated from the schema (valid ones, which must be accepted), then mutated
as data (keys dropped, types swapped, extreme numbers, unicode, huge strings) and as text.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from harness.core.errors import Problem, ScenarioError
from harness.gateway.decide import decide_at
from harness.load.plan import LoadPlan
from harness.run.kinds.shop.target import ShopTarget
from harness.run.loadgen import locust_argv, plan_for
from harness.run.targets import TargetContext
from harness.scenario.loader import load_scenario_text
from harness.scenario.names import RESERVED_BUILD_NAMES, reserved_endpoint_names
from harness.scenario.schema import Scenario
from targets.shop.config import ShopConfig

LIMIT_S = 30.0  # a hang, not a speed target (these machines are noisy; speed: benchmarks/)
COMMON = settings(
    deadline=None,  # the bound (a hang) is asserted per example instead
    database=None,  # nothing written to the working tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---------------------------------------------------------------- valid scenarios

# Not a word of the gate grammar (pg, breaker..., baseline): such a name is refused.
names = st.from_regex(r"[a-z][a-z0-9_-]{0,11}", fullmatch=True).filter(
    lambda n: n not in reserved_endpoint_names() and n not in RESERVED_BUILD_NAMES
)
param_names = st.from_regex(r"[a-z_][a-z0-9_]{0,7}", fullmatch=True)


def duration(seconds: float) -> st.SearchStrategy[Any]:
    """A duration of about ``seconds`` in one of the spellings people use."""
    whole = max(1, int(seconds))
    return st.sampled_from(
        [seconds, whole, f"{whole}s", f"{whole * 1000}ms", f"{seconds:.3f}"]
        + ([f"{whole // 60}m"] if whole % 60 == 0 else [])
    )


@st.composite
def endpoint(draw: st.DrawFn) -> dict[str, Any]:
    params = draw(
        st.dictionaries(
            param_names,
            st.tuples(st.integers(-(2**62), 2**62), st.integers(0, 1000)).map(
                lambda t: [t[0], t[0] + t[1]]
            ),
            max_size=2,
        )
    )
    segments = draw(st.lists(st.from_regex(r"[a-z0-9._~-]{1,8}", fullmatch=True), max_size=3))
    path = "/" + "/".join(segments + [f"{{{p}}}" for p in params])
    ep: dict[str, Any] = {
        "path": path,
        "rate": draw(st.floats(1, 200)),  # x duration >= 3 s: at least one request
        "params": params,
        "method": draw(st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"])),
    }
    if draw(st.booleans()):
        ep["timeout"] = draw(duration(draw(st.floats(0.01, 600))))
    if draw(st.booleans()):
        ep["body"] = draw(
            st.dictionaries(
                st.text(max_size=5),
                st.one_of(st.integers(-(10**9), 10**9), st.text(max_size=10), st.booleans()),
                max_size=3,
            )
        )
    ep["idempotency-key"] = draw(st.booleans())
    ep["calls-gateway"] = draw(st.booleans())
    return ep


delays = st.floats(0, 30)
FAULTS = st.one_of(
    st.just({"type": "healthy"}),
    st.builds(lambda d: {"type": "latency", "delay": d}, delays),
    st.builds(
        lambda a, b: {"type": "latency", "distribution": "uniform", "min": a, "max": a + b},
        delays,
        delays,
    ),
    st.builds(
        lambda m, s: {"type": "latency", "distribution": "lognormal", "median": m, "sigma": s},
        st.floats(0.001, 10),
        st.floats(0.01, 10),
    ),
    st.builds(
        lambda m, s: {"type": "latency", "distribution": "normal", "mean": m, "stddev": s},
        delays,
        delays,
    ),
    st.builds(lambda a: {"type": "timeout", "after": a}, st.one_of(st.none(), delays)).map(
        lambda f: {k: v for k, v in f.items() if v is not None}
    ),
    st.builds(
        lambda s, p: {"type": "error", "status": s, "probability": p},
        st.one_of(
            st.integers(500, 599),
            st.dictionaries(st.integers(500, 599), st.floats(0.001, 1e6), min_size=1, max_size=3),
        ),
        st.floats(0, 1),
    ),
    st.builds(lambda s: {"type": "reject", "status": s}, st.integers(400, 499)),
    st.builds(
        lambda w: {"type": "reset", "when": w}, st.sampled_from(["before-body", "after-body"])
    ),
    st.just({"type": "refuse"}),
    st.builds(
        lambda k: {"type": "malformed", "kind": k},
        st.sampled_from(["empty", "garbage", "truncated"]),
    ),
    st.builds(
        lambda d, c: {"type": "slow-body", "duration": d, "chunks": c},
        st.floats(0.01, 600),
        st.integers(1, 10_000),
    ),
)


@st.composite
def phases(draw: st.DrawFn, total_s: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = 0.0
    for i in range(draw(st.integers(0, 4))):
        gap = draw(st.floats(0, total_s / 8))
        length = draw(st.floats(0.1, total_s / 4))
        if cursor + gap + length > total_s:
            break
        phase: dict[str, Any] = {
            "name": f"{draw(names)}{i}",
            "start": round(cursor + gap, 3),
            "duration": round(length, 3),
            "fault": draw(FAULTS),
        }
        if draw(st.booleans()) and length >= 0.3:
            every = draw(st.floats(0.01, length))
            phase["repeat"] = {"every": every, "for": every / 2}
        out.append(phase)
        cursor = phase["start"] + phase["duration"]
    return out


@st.composite
def build(draw: st.DrawFn) -> dict[str, Any]:
    profile = draw(st.sampled_from(["retry-only", "retry-circuit-breaker"]))
    b: dict[str, Any] = {"profile": profile, "workers": draw(st.integers(1, 2000))}
    b["pg-client"] = {
        "connect-timeout": draw(duration(draw(st.floats(0.01, 600)))),
        "read-timeout": draw(duration(draw(st.floats(0.01, 600)))),
    }
    wait = draw(st.floats(0, 5))
    retry = {
        "max-attempts": draw(st.integers(1, 20)),
        "wait-duration": wait,
        "enable-exponential-backoff": draw(st.booleans()),
        "exponential-max-wait-duration": wait + draw(st.floats(0, 60)),
        "enable-randomized-wait": draw(st.booleans()),
        "randomized-wait-factor": draw(st.floats(0, 0.99)),
    }
    b["resilience4j"] = {"retry": retry}
    if profile == "retry-circuit-breaker" and draw(st.booleans()):
        b["resilience4j"]["circuitbreaker"] = {
            "sliding-window-type": draw(st.sampled_from(["COUNT_BASED", "TIME_BASED"])),
            "sliding-window-size": draw(st.integers(1, 100_000)),
            "minimum-number-of-calls": draw(st.integers(1, 100_000)),
            "failure-rate-threshold": draw(st.floats(0.1, 100)),
            "wait-duration-in-open-state": draw(duration(draw(st.floats(0.01, 3600)))),
            "permitted-number-of-calls-in-half-open-state": draw(st.integers(1, 100_000)),
        }
    return b


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    total = draw(st.integers(3, 3600))  # at least 3 scrapes of the default 1 s interval
    traffic = {
        n: draw(endpoint()) for n in draw(st.lists(names, min_size=1, max_size=3, unique=True))
    }
    builds = {n: draw(build()) for n in draw(st.lists(names, min_size=1, max_size=3, unique=True))}
    schedule = draw(phases(total))
    figures = [f"{ep}.p95" for ep in traffic] + ["pg.calls", "busy_workers.max", "max_workers"]
    gates = [
        f"{draw(st.sampled_from(sorted(builds)))}.{draw(st.sampled_from(figures))} "
        f"{draw(st.sampled_from(['<', '<=', '>', '>=', '==', '!=']))} {draw(st.integers(0, 1000))}"
        for _ in range(draw(st.integers(0, 3)))
    ]
    return {
        "name": draw(
            st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,30}", fullmatch=True).filter(_a_string)
        ),
        "seed": draw(st.integers(0, 2**63 - 1)),
        "warmup": draw(duration(draw(st.floats(0, 3600)))),
        "duration": total,
        "traffic": traffic,
        "pg": {"phases": schedule},
        "builds": builds,
        "gates": gates,
    }


# ---------------------------------------------------------------- mutations

EXTREMES: list[Any] = [
    float("inf"),
    float("-inf"),
    float("nan"),
    1e308,
    -1e308,
    5e-324,
    0,
    -1,
    2**63,
    2**64,
    10**99,
    -(10**99),
    "",
    " ",
    "x" * 20_000,
    "9" * 400 + "h",
    "\r\n",
    "\x00",
    "\x1b[2J",
    "\u202e\u2028",
    "../..",
    "{}",
    "{0}",
    "/{x}",
    "이름",
    "😀" * 50,
    None,
    True,
    [],
    {},
    [[[[[]]]]],
    {"a": {"b": {"c": {}}}},
]


def _slots(data: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key) in the document, to pick one to mutate."""
    if isinstance(data, dict):
        for k, v in data.items():
            out.append((data, k))
            _slots(v, out)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out.append((data, i))
            _slots(v, out)
    return out


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(draw(scenarios()))
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(data, [])
        container, key = draw(st.sampled_from(slots))
        op = draw(st.sampled_from(["drop", "extreme", "swap", "add", "wrap"]))
        if op == "drop":
            del container[key]
        elif op == "extreme":
            container[key] = draw(st.sampled_from(EXTREMES))
        elif op == "swap":
            container[key] = draw(
                st.one_of(st.text(max_size=30), st.floats(), st.integers(), st.booleans())
            )
        elif op == "add" and isinstance(container, dict):
            container[draw(st.text(min_size=1, max_size=20))] = draw(st.sampled_from(EXTREMES))
        elif op == "wrap":
            container[key] = [container[key]]
    return data


YAML12_NOT_A_STRING = re.compile(
    r"[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?"
    r"|null|Null|NULL|true|True|TRUE|false|False|FALSE"
)
"""Plain scalars the scenario reader (YAML 1.2's core schema) takes for a number, a
boolean or null, where ``yaml.safe_dump`` (YAML 1.1) writes them unquoted: ``0E0``."""


def _a_string(plain: str) -> bool:
    return YAML12_NOT_A_STRING.fullmatch(plain) is None


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=1_000_000)


YAML_BITS = [
    "&a ",
    "*a",
    "<<: ",
    "{",
    "}",
    "[",
    "]",
    ": ",
    "- ",
    "\t",
    "!!",
    "? ",
    "'",
    '"',
    "#",
    "\n",
    "---\n",
    "\\x00",
    "\ufeff",
]


@st.composite
def text_mutated(draw: st.DrawFn) -> str:
    text = _dump(draw(scenarios()))
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 10))
        bit = draw(st.one_of(st.sampled_from(YAML_BITS), st.text(max_size=5)))
        text = text[:at] + bit + text[at + cut :]
    return text


# ---------------------------------------------------------------- the property


def _no_constant(name: str) -> Any:
    raise AssertionError(f"{name} in JSON meant for another process")


def _starts(scenario: Scenario) -> None:
    """What a run's start-up does with an accepted scenario, short of starting processes."""
    with tempfile.TemporaryDirectory() as tmp:
        bdir = Path(tmp)
        plan = plan_for(scenario, "http://127.0.0.1:9", bdir)
        plan.write(bdir / "plan.json")
        json.loads((bdir / "plan.json").read_text(), parse_constant=_no_constant)
        assert LoadPlan.read(bdir / "plan.json") == plan
        assert int(locust_argv(plan)[locust_argv(plan).index("--run-time") + 1][:-1]) > 0
        for ep in plan.endpoints.values():
            for pick in (0, 1):
                path = ep.path.format(**{k: bounds[pick] for k, bounds in ep.params.items()})
                assert path.startswith("/") and not any(c.isspace() for c in path)
            json.dumps(ep.body, allow_nan=False)
        for build in scenario.builds.values():
            ctx = TargetContext(build_dir=bdir, pg_url="http://127.0.0.1:9", run_id="property")
            launch = ShopTarget(build).prepare(ctx)  # type: ignore[arg-type]
            try:
                text = (bdir / "target.json").read_text()
                json.loads(text, parse_constant=_no_constant)
                ShopConfig.from_file(bdir / "target.json")
            finally:
                for fd in launch.pass_fds:
                    os.close(fd)
    for phase in scenario.pg.phases:
        decide_at(scenario.pg.phases, phase.start, scenario.seed, "key-1", 1)
        decide_at(scenario.pg.phases, phase.start, scenario.seed, "key-2", 3)


def _check(text: str) -> bool:
    """True if accepted; fails the test on anything but success or ``ScenarioError``."""
    started = time.monotonic()
    try:
        loaded = load_scenario_text(text, "p.yaml")
    except ScenarioError as exc:
        assert exc.problems and all(isinstance(p, Problem) for p in exc.problems)
        assert all(str(p).startswith("p.yaml") for p in exc.problems)
        accepted = False
    else:
        accepted = True
    assert time.monotonic() - started < LIMIT_S
    if accepted:
        _starts(loaded.scenario)
    return accepted


@settings(COMMON, max_examples=100)
@given(scenarios())
def test_valid_scenarios_are_accepted_and_start(data: dict[str, Any]) -> None:
    assert _check(_dump(data))


def _known(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A small valid scenario with one value replaced: the cases issue 12 found by hand."""
    data: dict[str, Any] = {
        "name": "known",
        "duration": 60,
        "traffic": {"p": {"path": "/api/products/{id}", "params": {"id": [1, 9]}, "rate": 5}},
        "pg": {
            "phases": [
                {"name": "outage", "start": 10, "duration": 20, "fault": {"type": "timeout"}}
            ]
        },
        "builds": {"b": {"profile": "retry-only"}},
    }
    target = data
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(target, dict) else target[key]
    target[path[-1]] = value
    return data


@settings(COMMON, max_examples=300)
@example(_known(("warmup",), float("inf")))
@example(_known(("drain",), float("nan")))
@example(_known(("traffic", "p", "timeout"), float("inf")))
@example(_known(("traffic", "p", "path"), "/api/products/{}"))
@example(_known(("traffic", "p", "path"), "/api/products/{id}\r\nX: 1"))
@example(_known(("pg", "phases", 0, "start"), float("nan")))
@example(_known(("builds", "b", "pg-client"), {"read-timeout": float("inf")}))
@example(_known(("builds", "b", "workers"), 10**30))
@given(mutated())
def test_mutated_scenarios_never_crash(data: dict[str, Any]) -> None:
    event("accepted" if _check(_dump(data)) else "refused")


@settings(COMMON, max_examples=200)
@given(text_mutated())
def test_mutated_text_never_crashes(text: str) -> None:
    event("accepted" if _check(text) else "refused")


@settings(COMMON, max_examples=100)
@given(st.text(max_size=300))
def test_any_text_never_crashes(text: str) -> None:
    _check(text)
