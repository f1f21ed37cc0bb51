"""Clients that retry (issue 21, item 2): the schedule of a retry, which outcomes retry, the
scenario's ``retry:`` refusals, and attempts read back as requests."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.endpoints import endpoint_stats
from harness.analysis.offered import load_per_s
from harness.core.errors import ScenarioError
from harness.load.plan import DROPPED, LoadPlan, attempt_index, failure_of, retry_rng
from harness.load.wire import ConnectionClosed, NoAnswer, retry_after_s
from harness.results.attempts import ATTEMPTS, requests_of, with_attempts
from harness.results.io import SAMPLE_DTYPES, samples_from_csv
from harness.run.loadgen import plan_for
from harness.scenario.client_retry import ClientRetry
from harness.scenario.loader import load_scenario_text
from tests.scenario.problems import problems_of

RETRY = ClientRetry(max_attempts=4, backoff=0.2, max_backoff=0.5)


# ---------------------------------------------------------------- the backoff


def test_without_jitter_the_wait_grows_by_the_multiplier_up_to_the_cap() -> None:
    plan = ClientRetry(max_attempts=5, backoff=0.2, max_backoff=0.5, jitter="none")
    rng = random.Random(1)
    assert [plan.wait_s(n, rng) for n in (1, 2, 3, 4)] == [0.2, 0.4, 0.5, 0.5]


@pytest.mark.parametrize(
    ("jitter", "low_share"), [("full", 0.0), ("equal", 0.5)], ids=["full", "equal"]
)
def test_jitter_stays_in_its_bounds_and_spreads_over_them(jitter: str, low_share: float) -> None:
    plan = ClientRetry(max_attempts=5, backoff=0.2, max_backoff=0.5, jitter=jitter)
    rng = random.Random(3)
    for retry, cap in ((1, 0.2), (2, 0.4), (3, 0.5), (6, 0.5)):
        waits = [plan.wait_s(retry, rng) for _ in range(2000)]
        assert min(waits) >= cap * low_share and max(waits) <= cap
        # Spread over the range, not stuck at one end: both quarters of it are reached.
        span = cap * (1 - low_share)
        assert min(waits) < cap * low_share + span / 4 and max(waits) > cap - span / 4


def test_retry_after_replaces_the_backoff_when_honoured_and_only_then() -> None:
    rng = random.Random(0)
    honour = ClientRetry(
        max_attempts=3, backoff=0.2, max_backoff=0.5, jitter="none", retry_after="honour"
    )
    ignore = ClientRetry(
        max_attempts=3, backoff=0.2, max_backoff=0.5, jitter="none", retry_after="ignore"
    )
    assert honour.wait_s(1, rng, 2.0) == 2.0  # uncapped by max-backoff: the server said so
    assert honour.wait_s(1, rng, None) == 0.2
    assert ignore.wait_s(1, rng, 2.0) == 0.2


def test_the_jitter_of_a_request_is_the_same_in_every_build_and_split() -> None:
    a = [RETRY.wait_s(n, retry_rng(7, "pay", 12)) for n in (1, 2)]
    b = [RETRY.wait_s(n, retry_rng(7, "pay", 12)) for n in (1, 2)]
    assert a == b
    assert a != [RETRY.wait_s(n, retry_rng(7, "pay", 13)) for n in (1, 2)]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(b"2", 2.0), (b" 120 ", 120.0), (b"Wed, 02 Dec 2026 03:00:10 GMT", 10.0), (b"", None),
     (b"soon", None), (b"Wed, 02 Dec 2026 02:59:00 GMT", 0.0)],
)  # fmt: skip
def test_retry_after_reads_seconds_or_an_http_date(value: bytes, seconds: float | None) -> None:
    now = pd.Timestamp("2026-12-02T03:00:00Z").timestamp()
    assert retry_after_s(value, now) == seconds


# ---------------------------------------------------------------- which outcomes retry


def test_the_default_outcomes_are_timeout_5xx_and_connection() -> None:
    plan = ClientRetry(max_attempts=3, backoff=0.1, max_backoff=1.0)
    assert plan.retries(500) and plan.retries(503) and plan.retries(599)
    assert not plan.retries(429) and not plan.retries(404) and not plan.retries(200)
    assert plan.retries(0, "timeout") and plan.retries(0, "connection")
    assert not plan.retries(0, "")  # a broken answer: never retried


@pytest.mark.parametrize(
    ("on", "retried"),
    [(("429",), {429}), (("503",), {503}), (("5xx",), {500, 502, 503, 504}),
     (("429", "503"), {429, 503}), (("timeout",), set())],
)  # fmt: skip
def test_each_outcome_name_retries_its_statuses_only(
    on: tuple[str, ...], retried: set[int]
) -> None:
    plan = ClientRetry(max_attempts=3, backoff=0.1, max_backoff=1.0, on=on)
    assert {s for s in (200, 400, 404, 429, 500, 502, 503, 504) if plan.retries(s)} == retried
    assert plan.retries(0, "timeout") == ("timeout" in on)
    assert not plan.retries(0, "connection")


def test_exceptions_are_classed_as_the_outcomes_name_them() -> None:
    assert failure_of(TimeoutError("no answer in 1 s")) == "timeout"
    for exc in (ConnectionRefusedError(), ConnectionResetError(), NoAnswer(), ConnectionClosed()):
        assert failure_of(exc) == "connection"
    assert failure_of(ValueError("not HTTP")) == ""


def test_every_attempt_has_its_own_index_whatever_the_worker() -> None:
    planned = 50
    seen = {attempt_index(r, a, planned) for r in range(planned) for a in range(1, 11)}
    assert len(seen) == planned * 10
    assert attempt_index(7, 1, planned) == 7


# ---------------------------------------------------------------- the scenario

SCENARIO = """\
name: t
duration: 10s
traffic:
  pay:
    method: POST
    path: /pay
    rate: 5
    timeout: 1s
    retry: {max-attempts: 3, backoff: 100ms, on: [timeout, 503, 429], retry-after: ignore}
builds:
  b: {profile: retry-only}
"""


def test_retry_reaches_the_plan_and_its_json_round_trip() -> None:
    scenario = load_scenario_text(SCENARIO).scenario
    plan = plan_for(scenario, "http://127.0.0.1:1", __import__("pathlib").Path("/tmp"))
    retry = plan.endpoints["pay"].retry
    assert retry == ClientRetry(
        max_attempts=3,
        backoff=0.1,
        max_backoff=5.0,
        on=["timeout", "503", "429"],
        retry_after="ignore",
    )
    assert LoadPlan.from_json(plan.to_json()) == plan


EVERY_OPTION = ClientRetry(
    max_attempts=5,
    backoff=0.3,
    multiplier=3.0,
    max_backoff=2.0,
    jitter="equal",
    on=["503", "429"],
    retry_after="ignore",
)
"""Every option of ``traffic.<ep>.retry`` at a value other than its default (a new option is
given one here)."""


def test_every_retry_option_reaches_the_load_generator_through_plan_json(tmp_path: Path) -> None:
    """scenario -> ``plan_for`` -> ``plan.json`` -> ``LoadPlan.read``: the retry the load
    generator asks (``retries``, ``wait_s``) has every option the scenario gave."""
    defaults = ClientRetry()
    same = [n for n in ClientRetry.model_fields if getattr(EVERY_OPTION, n) == getattr(defaults, n)]
    assert not same, f"give {same} a value other than the default in EVERY_OPTION"
    given = json.dumps(EVERY_OPTION.model_dump(mode="json", by_alias=True))  # YAML flow
    scenario = load_scenario_text(SCENARIO.replace(SCENARIO.splitlines()[8], f"    retry: {given}"))
    plan = plan_for(scenario.scenario, "http://127.0.0.1:1", tmp_path)
    plan.write(tmp_path / "plan.json")
    back = LoadPlan.read(tmp_path / "plan.json").endpoints["pay"].retry
    assert isinstance(back, ClientRetry)
    for name in ClientRetry.model_fields:
        assert getattr(back, name) == getattr(EVERY_OPTION, name), name
    assert back == EVERY_OPTION


@pytest.mark.parametrize(
    ("change", "where", "fragment"),
    [
        (("    timeout: 1s\n", ""), "traffic.pay.retry", "has no timeout"),
        (("max-attempts: 3", "max-attempts: 0"), "traffic.pay.retry.max-attempts", ">= 1"),
        (("max-attempts: 3", "max-attempts: 11"), "traffic.pay.retry.max-attempts", "10"),
        (("backoff: 100ms", "backoff: -1s"), "traffic.pay.retry.backoff", ""),
        (("429]", "4xx]"), "traffic.pay.retry.on.2", "(got '4xx')"),
        (("retry-after: ignore", "jitter: half"), "traffic.pay.retry.jitter", "'equal'"),
        (("backoff: 100ms", "backoff: 6s"), "traffic.pay.retry", "below backoff 6s"),
    ],
)
def test_bad_retry_input_is_refused_at_its_line(
    change: tuple[str, str], where: str, fragment: str
) -> None:
    problems = problems_of(SCENARIO.replace(*change))
    assert any(f" {where}:" in p and fragment.strip(">= ") in p for p in problems), problems
    assert all(p.startswith("s.yaml:") and p.split(":")[1].isdigit() for p in problems), problems


def test_a_scenario_without_retry_has_no_retry_in_its_plan() -> None:
    scenario = load_scenario_text(SCENARIO.replace(SCENARIO.splitlines()[8] + "\n", "")).scenario
    assert scenario.traffic["pay"].retry is None
    with pytest.raises(ScenarioError):  # and the bound is said where it is given
        load_scenario_text(SCENARIO.replace("backoff: 100ms", "multiplier: 0.5"))


# ---------------------------------------------------------------- attempts read back


def _rows(rows: list[tuple]) -> pd.DataFrame:  # type: ignore[type-arg]
    cols = ["endpoint", "index", "intended_start", "actual_start", "end", "status", "error",
            "outcome", "attempt", "request"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols).astype(
        {**SAMPLE_DTYPES, "attempt": "int64", "request": "int64"}
    )


def test_a_request_runs_from_its_first_intended_start_to_its_final_answer() -> None:
    frame = _rows(
        [
            ("p", 0, 100.0, 100.0, 100.5, 503, "HTTP503", "", 1, 0),
            ("p", 1, 100.1, 100.1, 100.2, 200, "", "", 1, 1),
            ("p", 10, 100.7, 100.7, 101.2, 0, "TimeoutError", "", 2, 0),
            ("p", 20, 101.4, 101.4, 101.5, 200, "", "", 3, 0),
            ("p", 2, 100.2, 100.2, 100.3, 503, "HTTP503", "", 1, 2),
            ("p", 12, 100.4, 100.4, 100.4, 0, DROPPED, "", 2, 2),
        ]
    )
    requests = requests_of(frame)
    assert list(requests["request"]) == [0, 1, 2]
    first = requests.iloc[0]
    assert (first["intended_start"], first["end"], first["status"], first[ATTEMPTS]) == (
        100.0, 101.5, 200, 3,
    )  # fmt: skip
    # A retry that was never sent (max-in-flight full) is not the request's final answer.
    assert (requests.iloc[2]["status"], requests.iloc[2][ATTEMPTS]) == (503, 1)
    stats = endpoint_stats(requests, 100.0, 102.0, 1.5, retrying=True)
    assert stats["requests"] == 3 and stats["latency_s"]["max"] == 1.5
    assert stats["success_pct"] == pytest.approx(66.67)
    assert (stats["attempts"], stats["retried_pct"]) == (pytest.approx(5 / 3, abs=1e-3), 33.33)
    assert (stats["admitted_rps"], stats["retried_rps"]) == (2.5, 1.0)
    load = load_per_s(frame, 100.0, 2.0)
    assert load == {"offered": [3, 0], "admitted": [4, 1], "retried": [1, 1]}


def test_without_retries_the_requests_are_the_samples_themselves() -> None:
    frame = _rows([("p", 0, 1.0, 1.0, 1.1, 200, "", "", 1, 0)])
    assert requests_of(frame) is frame
    stats = endpoint_stats(frame, 0.0, 2.0, 0.5)
    assert "attempts" not in stats and "retried_pct" not in stats


def test_samples_written_before_the_columns_read_as_first_attempts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    old = tmp_path / "samples.csv"
    old.write_text(
        "endpoint,index,intended_start,actual_start,end,status,error,outcome\r\n"
        "p,3,1.0,1.0,1.5,200,,\r\np,4,1.2,1.2,,0,Unfinished,\r\n"
    )
    frame = samples_from_csv(old)
    assert list(frame["attempt"]) == [1, 1] and list(frame["request"]) == [3, 4]
    assert str(frame["attempt"].dtype) == "int64"
    bare = pd.DataFrame({"index": [5], "intended_start": [0.0]})
    assert list(with_attempts(bare)["request"]) == [5]


def test_the_live_achieved_rate_counts_requests_not_retries() -> None:
    from harness.run.watch import _firsts

    assert _firsts({"sent": {"p": 10}, "retried": {"p": 3}}, "p") == 7
    assert _firsts({"sent": {"p": 10}}, "p") == 10  # a generator without retries
    assert _firsts({}, "p") == 0


def test_the_disk_a_run_needs_counts_every_attempt_a_request_may_make() -> None:
    from harness.run.experiment import BYTES_PER_BUILD, BYTES_PER_REQUEST, estimated_bytes

    retrying = load_scenario_text(SCENARIO).scenario
    once = load_scenario_text(SCENARIO.replace(SCENARIO.splitlines()[8] + "\n", "")).scenario
    requests = 5 * (5 + 10)  # rate x (warmup + duration)
    assert estimated_bytes(once, 1) == requests * BYTES_PER_REQUEST + BYTES_PER_BUILD
    assert estimated_bytes(retrying, 1) == 3 * requests * BYTES_PER_REQUEST + BYTES_PER_BUILD
