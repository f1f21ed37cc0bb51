"""Locust file of the open-model scheduler; runs only inside Locust processes.

Locust's ``wait_time`` makes a closed model (a user never overlaps its own
tasks), which hides a slow server by sending less. Here one scheduler user
starts one greenlet per planned request at its planned time, whether or not
earlier requests have returned. Each sample keeps its *intended* start, so
latency = end - intended start (no coordinated omission, as wrk2); a request
that could not start on time is still sent and its lateness recorded.

An endpoint with ``retry`` retries a failed attempt in the request's own
greenlet after its backoff (never holding up the schedule of first
attempts): each retry is an attempt with its own row, index and intended
start (its backoff's expiry), linked to the request by ``request``; none is
due after the load's end plus the drain.

Three roles, told by Locust's runner:

- a single process (``LocalRunner``): the plan comes from the JSON file named
  by ``HARNESS_LOAD_PLAN``; it writes ``samples.csv`` and ``progress.json`` and
  starts when ``go.json`` appears;
- a master (``--master``): sends no request; ``harness.load.master`` hands the
  plan to the workers, passes on the go and writes what they report;
- a worker (``--worker``): one scheduler user, which asks the master for the
  plan and its share (every N-th request), and reports its samples to it.
"""

from __future__ import annotations

import gc
import json
import os
import random
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import gevent
from gevent import getcurrent
from gevent.event import AsyncResult, Event
from locust import User, events, task
from locust.env import Environment
from locust.rpc.protocol import Message
from locust.runners import MasterRunner, WorkerRunner

from harness.core.handoff import HandoffError
from harness.core.net import is_loopback
from harness.load.master import Coordinator
from harness.load.plan import (
    PROTOCOL,
    LoadPlan,
    attempt_index,
    failure_of,
    retry_rng,
    schedule,
)
from harness.load.recorder import FileRecorder, Recorder, WorkerRecorder, sample_row
from harness.load.requests import Built, Requests
from harness.load.wire import Endpoint

_POLL_S = 0.01
_GO_WAIT_S = 120.0
_PLAN_WAIT_S = 60.0
_WORKER_GO_WAIT_S = 3600.0
"""A worker waits this long for the go: the master's orchestrator may wait for other workers."""
_WORKER_REPORT_S = 0.5
_FOREVER_S = 10**9


class _Node:
    """This process's part in the run: its recorder, and on a worker the master's answers."""

    def __init__(self) -> None:
        self.recorder: Recorder | None = None
        self.coordinator: Coordinator | None = None
        self.plan = AsyncResult()
        self.go = AsyncResult()
        self.claimed = False
        """A scheduler user is running here; Locust may start another on a worker when it
        rebalances after one leaves, and that one must not send the plan twice."""


_NODE = _Node()


class OpenModelUser(User):
    """The scheduler: sends this process's share of the plan once, drains, then waits."""

    @task
    def run_plan(self) -> None:
        runner = self.environment.runner
        if _NODE.claimed:  # Locust runs a task again when it returns or raises: never twice
            gevent.sleep(_FOREVER_S)
            return
        _NODE.claimed = True
        try:
            if isinstance(runner, WorkerRunner):
                self._run_as_worker(runner)
            else:
                self._run_alone()
        except HandoffError as exc:  # a plan.json of another harness version: say which
            _refuse(self.environment, exc)
            return
        except Exception as exc:  # a bug, not a slow server: stop the run and say why
            if _NODE.recorder is not None:
                _NODE.recorder.fail(f"the scheduler failed: {type(exc).__name__}: {exc}")
            if runner is not None and not isinstance(runner, WorkerRunner):
                gevent.spawn(runner.quit)
            raise
        if runner is not None and not isinstance(runner, WorkerRunner):
            gevent.spawn(runner.quit)
        gevent.sleep(_FOREVER_S)  # a worker's master says when to quit

    def _run_alone(self) -> None:
        plan = LoadPlan.read(os.environ["HARNESS_LOAD_PLAN"])
        recorder = _NODE.recorder = FileRecorder(plan)
        self._open_sessions(plan)
        recorder.state = "ready"
        recorder.announce()
        start_at = _wait_for_go(plan)
        self._execute(plan, recorder, start_at, reporter_s=1.0)
        recorder.close()

    def _run_as_worker(self, runner: WorkerRunner) -> None:
        # Registered before the hello, so the answer cannot arrive before its handler.
        runner.register_message("harness_plan", _on_plan)
        runner.register_message("harness_go", _on_go)
        runner.register_message("harness_stop", _on_stop)
        runner.send_message(
            "harness_hello",
            {"protocol": PROTOCOL, "host": socket.gethostname(), "pid": os.getpid()},
        )
        try:
            reply: dict[str, Any] = _NODE.plan.get(timeout=_PLAN_WAIT_S)
        except gevent.Timeout:
            print("load worker: the master never sent the plan", flush=True)
            return
        if "error" in reply:
            print(f"load worker: turned away: {reply['error']}", flush=True)
            return
        plan = LoadPlan.from_json(reply["plan"])
        recorder = _NODE.recorder = WorkerRecorder(
            plan, int(reply["worker"]), lambda data: runner.send_message("harness_report", data)
        )
        host = urlsplit(plan.base_url).hostname
        if not is_loopback(host) and os.environ.get("HARNESS_ALLOW_REMOTE") != "1":
            recorder.fail(
                f"refused to send to {plan.base_url}: not on this machine; start this worker "
                "with harness worker --allow-remote"
            )
            return
        self._open_sessions(plan)
        recorder.state = "ready"
        reporter = gevent.spawn(self._report, recorder, _WORKER_REPORT_S)
        try:
            start_at = float(_NODE.go.get(timeout=_WORKER_GO_WAIT_S))
        except gevent.Timeout:
            recorder.fail("the master never said go")
            return
        finally:
            reporter.kill()
        self._execute(plan, recorder, start_at, reporter_s=_WORKER_REPORT_S)
        recorder.close()

    def _open_sessions(self, plan: LoadPlan) -> None:
        # Secrets ({env: NAME}) are read here, from this process's own environment.
        self.requests = {
            name: Requests(plan.seed, name, ep, os.environ) for name, ep in plan.endpoints.items()
        }
        self.endpoints = {
            name: [
                Endpoint(
                    plan.base_url,
                    kind.method,
                    ep.timeout_s,
                    kind.body,
                    outcomes=ep.outcomes,
                    headers=kind.fixed_headers,
                    varying=kind.varying,
                    body_varies=kind.body_render is not None,
                )
                for kind in self.requests[name].kinds
            ]
            for name, ep in plan.endpoints.items()
        }
        # What Locust and the harness hold from now on stays: out of the cyclic collector's
        # sight, so a full collection during the load walks only what the load creates.
        gc.collect()
        gc.freeze()

    def _execute(
        self, plan: LoadPlan, recorder: Recorder, start_at: float, reporter_s: float
    ) -> None:
        """Send this process's share of the plan from ``start_at``, then drain."""
        recorder.start_at = start_at
        recorder.state = "running"
        reporter = gevent.spawn(self._report, recorder, reporter_s)
        requests = self.requests
        inflight: set[Any] = set()
        drained = Event()
        sending = True
        worker, workers = recorder.worker, plan.workers
        limits = {name: ep.in_flight_limit(worker, workers) for name, ep in plan.endpoints.items()}
        open_now: Counter[str] = Counter()  # requests sent and not yet answered, per endpoint

        retrying = {name: ep.retry for name, ep in plan.endpoints.items()}
        planned = {name: plan.planned_count(name) for name in plan.endpoints}
        last_due = start_at + plan.total_s + plan.drain_s  # no retry is due after this

        def send(name: str, index: int, intended: float, built: Built) -> None:
            """One request: its first attempt, then (``retry``) each retry after its backoff,
            as an attempt of its own (own index, intended start at the backoff's expiry)."""
            endpoint = self.endpoints[name][built.variant]
            request, attempt, is_open = index, 1, True
            rng: random.Random | None = None
            try:
                while True:
                    status, failure, retry_after, end = _send(
                        recorder, endpoint, name, index, intended, built, attempt, request
                    )
                    open_now[name] -= 1
                    is_open = False
                    retry = retrying[name]
                    if (
                        retry is None
                        or attempt >= retry.max_attempts
                        or not retry.retries(status, failure)
                    ):
                        return
                    if rng is None:
                        rng = retry_rng(plan.seed, name, request)
                    intended = end + retry.wait_s(attempt, rng, retry_after)
                    if intended > last_due:
                        return
                    attempt += 1
                    index = attempt_index(request, attempt, planned[name])
                    delay = intended - time.time()
                    if delay > 0:
                        gevent.sleep(delay)
                    limit = limits[name]
                    if limit is not None and open_now[name] >= limit:
                        recorder.drop(name, index, intended, time.time(), attempt, request)
                        return
                    open_now[name] += 1
                    is_open = True
            finally:
                if is_open:
                    open_now[name] -= 1
                inflight.discard(getcurrent())
                if not inflight and not sending:
                    drained.set()

        for intended, name, index in schedule(plan, start_at, worker, workers):
            delay = intended - time.time()
            if delay > 0:
                gevent.sleep(delay)
            limit = limits[name]
            if limit is not None and open_now[name] >= limit:
                recorder.drop(name, index, intended, time.time())
                continue
            open_now[name] += 1
            built = requests[name].build(index)
            # A raw greenlet: no links, no Group (Group.spawn was 1.9% of the busy samples).
            inflight.add(gevent.spawn_raw(send, name, index, intended, built))
        recorder.state = "draining"
        sending = False
        if inflight:
            drained.wait(timeout=plan.drain_s)
        for g in list(inflight):
            gevent.kill(g)
        if inflight:
            drained.wait(timeout=5)
        recorder.abandon_active()
        recorder.state = "finished"
        reporter.kill()

    def _report(self, recorder: Recorder, every_s: float) -> None:
        while True:
            gevent.sleep(every_s)
            try:
                recorder.flush()
            except OSError as exc:
                recorder.write_failed(exc)
                runner = self.environment.runner
                if runner is not None:
                    gevent.spawn(runner.quit)
                return
            except Exception as exc:  # a worker's link to its master: Locust reconnects
                print(f"load worker: report not sent: {exc}", flush=True)


def _send(
    recorder: Recorder, endpoint: Endpoint, name: str, index: int, intended: float, built: Built,
    attempt: int = 1, request: int | None = None,
) -> tuple[int, str, float | None, float]:  # fmt: skip
    """Send one attempt and record it; latency counts from ``intended``.

    Returns what a retry needs: the status (0: no answer), the failure's kind
    (``failure_of``), the answer's Retry-After and when it ended.
    """
    actual = time.time()
    recorder.started(name, index, intended, actual, attempt, request)
    retry_after: float | None = None
    failure = ""
    try:
        status, outcome, retry_after, kind = endpoint.request(built.path, built.headers, built.body)
        error = f"HTTP{status}" if status >= 400 else ""
    except Exception as exc:  # refused, reset, timed out, a broken answer: the row says which
        status, outcome, error, failure = 0, "", type(exc).__name__, failure_of(exc)
        kind = "failure"
    end = time.time()
    recorder.finished(
        name,
        index,
        sample_row(
            name, index, intended, actual, end, status, error, outcome, attempt, request, kind
        ),
    )
    return status, failure, retry_after, end


def _wait_for_go(plan: LoadPlan) -> float:
    deadline = time.time() + _GO_WAIT_S
    while time.time() < deadline:
        if os.path.exists(plan.go_path):
            return float(json.loads(Path(plan.go_path).read_text())["start_at"])
        gevent.sleep(_POLL_S)
    raise RuntimeError("the orchestrator never said go")


def _refuse(environment: Environment, exc: HandoffError) -> None:
    """Stop on a hand-off this process cannot read: its reason in ``load.log``, exit 3."""
    print(f"load generator: {exc}", flush=True)
    environment.process_exit_code = 3
    if environment.runner is not None:
        gevent.spawn(environment.runner.quit)


def _on_plan(environment: Environment, msg: Message, **_: Any) -> None:
    _NODE.plan.set(msg.data)


def _on_go(environment: Environment, msg: Message, **_: Any) -> None:
    _NODE.go.set(msg.data["start_at"])


def _on_stop(environment: Environment, msg: Message, **_: Any) -> None:
    """The master is stopping the run: quit, which sends the last report (``_keep_samples``)."""
    if environment.runner is not None:
        gevent.spawn(environment.runner.quit)


def _on_init(environment: Environment, **_: Any) -> None:
    """Give the master its coordinator, once Locust's runner exists; keep the samples at exit.

    ``_keep_samples`` is added here, after the runner's own listeners: Locust fires
    ``quitting`` in reverse order, so a worker's last report goes before its "quit" message
    (after which the master no longer counts it as one of its workers).
    """
    environment.events.quitting.add_listener(_keep_samples)  # type: ignore[no-untyped-call]
    if isinstance(environment.runner, MasterRunner):
        try:
            plan = LoadPlan.read(os.environ["HARNESS_LOAD_PLAN"])
        except HandoffError as exc:
            _refuse(environment, exc)
            return
        _NODE.coordinator = Coordinator(environment, plan)
        gevent.spawn(_NODE.coordinator.run)


def _keep_samples(environment: Environment, **_: Any) -> None:
    """However Locust stops (plan done, run-time bound, SIGTERM), keep what was measured."""
    if _NODE.coordinator is not None:
        _NODE.coordinator.interrupted()
        return
    recorder = _NODE.recorder
    if recorder is None:
        return
    if recorder.state not in ("finished", "failed"):
        recorder.state = "interrupted"
        recorder.abandon_active()
    try:
        recorder.close()
    except Exception as exc:  # a worker whose master is gone: nothing left to tell
        print(f"load worker: last report not sent: {exc}", flush=True)
    environment.process_exit_code = 3 if recorder.error is not None else 0


events.init.add_listener(_on_init)  # type: ignore[no-untyped-call]
