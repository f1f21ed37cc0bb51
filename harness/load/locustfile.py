"""Locust file of the open-model scheduler; runs only inside the Locust process.

Locust's ``wait_time`` makes a closed model (a user never overlaps its own
tasks), which hides a slow server by sending less. Here one scheduler user
starts one greenlet per planned request at its planned time, whether or not
earlier requests have returned. Each sample keeps its *intended* start, so
latency = end - intended start (no coordinated omission, as wrk2); a request
that could not start on time is still sent and its lateness recorded.

The plan comes from the JSON file named by ``HARNESS_LOAD_PLAN``.
"""

from __future__ import annotations

import csv
import heapq
import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
from gevent.pool import Group
from locust import User, events, task
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment

from harness.load.plan import SAMPLE_COLUMNS, EndpointPlan, LoadPlan

_POLL_S = 0.01
_GO_WAIT_S = 120.0


def _stream(
    start_at: float, name: str, rate: float, count: int
) -> Iterator[tuple[float, str, int]]:
    for i in range(count):
        yield start_at + i / rate, name, i


def _arrivals(plan: LoadPlan, start_at: float) -> Iterator[tuple[float, str, int]]:
    """Planned (time, endpoint, index) of every request, in time order across endpoints."""
    return heapq.merge(
        *(
            _stream(start_at, name, ep.rate, plan.planned_count(name))
            for name, ep in plan.endpoints.items()
        )
    )


def _atomic_json(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    Path(tmp).write_text(json.dumps(data))
    os.replace(tmp, path)


class Recorder:
    """Collects samples and counters; flushes samples to CSV so a killed run keeps them."""

    def __init__(self, plan: LoadPlan) -> None:
        self.plan = plan
        self.file = open(plan.samples_path, "w", newline="")  # noqa: SIM115 - closed in close()
        self.writer = csv.writer(self.file)
        self.writer.writerow(SAMPLE_COLUMNS)
        self.pending: list[tuple[Any, ...]] = []
        self.sent: Counter[str] = Counter()
        self.done: Counter[str] = Counter()
        self.max_lateness_s = 0.0
        self.active: dict[tuple[str, int], tuple[float, float]] = {}
        self.state = "starting"
        self.start_at: float | None = None

    def record(self, row: tuple[Any, ...]) -> None:
        self.pending.append(row)

    def abandon_active(self) -> None:
        """Record requests still unanswered when the drain bound ran out: never drop one."""
        for (name, index), (intended, actual) in self.active.items():
            self.record((name, index, f"{intended:.6f}", f"{actual:.6f}", "", 0, "Unfinished", ""))
        self.active.clear()

    def flush(self) -> None:
        if self.pending:
            self.writer.writerows(self.pending)
            self.pending.clear()
        self.file.flush()

    def progress(self) -> None:
        planned = {n: self.plan.planned_count(n) for n in self.plan.endpoints}
        _atomic_json(
            self.plan.progress_path,
            {
                "t": time.time(),
                "state": self.state,
                "start_at": self.start_at,
                "planned": planned,
                "sent": dict(self.sent),
                "done": dict(self.done),
                "max_lateness_s": self.max_lateness_s,
            },
        )

    def close(self) -> None:
        if not self.file.closed:
            self.flush()
            self.file.close()
        self.progress()


class OpenModelUser(User):
    """The single scheduler: runs the whole plan once, drains, then stops Locust."""

    fixed_count = 1

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.plan = LoadPlan.read(os.environ["HARNESS_LOAD_PLAN"])
        self.recorder = Recorder(self.plan)
        _RECORDERS.append(self.recorder)
        self.sessions = {
            name: FastHttpSession(
                self.plan.base_url,
                request_event=environment.events.request,
                user=self,
                concurrency=100_000,
                network_timeout=ep.timeout_s,
                connection_timeout=ep.timeout_s,
            )
            for name, ep in self.plan.endpoints.items()
        }
        self.rngs = {
            name: random.Random(f"{self.plan.seed}:{name}") for name in self.plan.endpoints
        }

    def _send(self, name: str, ep: EndpointPlan, index: int, intended: float) -> None:
        rng = self.rngs[name]
        values = {k: rng.randint(low, high) for k, (low, high) in ep.params.items()}
        path = ep.path.format(**values)
        headers: dict[str, str] = {}
        if ep.idempotency_key:
            # Derived from the seed and the index: every build sends the same keys, so the
            # gateway's seeded faults give every build the same fate for the same payment.
            headers["Idempotency-Key"] = str(
                uuid.uuid5(uuid.NAMESPACE_URL, f"{self.plan.seed}/{name}/{index}")
            )
        actual = time.time()
        lateness = actual - intended
        if lateness > self.recorder.max_lateness_s:
            self.recorder.max_lateness_s = lateness
        self.recorder.sent[name] += 1
        self.recorder.active[(name, index)] = (intended, actual)
        response: Any = self.sessions[name].request(
            ep.method, path, name=name, json=ep.body, headers=headers
        )
        end = time.time()
        status = int(response.status_code or 0)
        if status == 0:
            error = type(response.error).__name__ if response.error is not None else "NoResponse"
        else:
            error = f"HTTP{status}" if status >= 400 else ""
        outcome = (response.headers or {}).get("X-Outcome", "") if status else ""
        self.recorder.done[name] += 1
        del self.recorder.active[(name, index)]
        self.recorder.record(
            (name, index, f"{intended:.6f}", f"{actual:.6f}", f"{end:.6f}", status, error, outcome)
        )

    def _reporter(self) -> None:
        while True:
            self.recorder.flush()
            self.recorder.progress()
            gevent.sleep(1.0)

    def _wait_for_go(self) -> float:
        self.recorder.state = "ready"
        self.recorder.progress()
        deadline = time.time() + _GO_WAIT_S
        while time.time() < deadline:
            if os.path.exists(self.plan.go_path):
                return float(json.loads(Path(self.plan.go_path).read_text())["start_at"])
            gevent.sleep(_POLL_S)
        raise RuntimeError("the orchestrator never said go")

    @task
    def run_plan(self) -> None:
        start_at = self._wait_for_go()
        self.recorder.start_at = start_at
        self.recorder.state = "running"
        reporter = gevent.spawn(self._reporter)
        inflight = Group()
        for intended, name, index in _arrivals(self.plan, start_at):
            delay = intended - time.time()
            if delay > 0:
                gevent.sleep(delay)
            inflight.spawn(self._send, name, self.plan.endpoints[name], index, intended)
        self.recorder.state = "draining"
        inflight.join(timeout=self.plan.drain_s)
        inflight.kill(block=True, timeout=5)
        self.recorder.abandon_active()
        self.recorder.state = "finished"
        reporter.kill()
        self.recorder.close()
        runner = self.environment.runner
        if runner is not None:
            gevent.spawn(runner.quit)
        gevent.sleep(60)


_RECORDERS: list[Recorder] = []


def _keep_samples(environment: Environment, **_: Any) -> None:
    """However Locust stops (plan done, run-time bound, SIGTERM), keep what was measured."""
    for recorder in _RECORDERS:
        if recorder.state != "finished":
            recorder.state = "interrupted"
            recorder.abandon_active()
        recorder.close()
    environment.process_exit_code = 0


events.quitting.add_listener(_keep_samples)  # type: ignore[no-untyped-call]
