"""The Locust master of a distributed load: hands out the plan, writes what the workers send.

Runs inside the Locust master process only (``--master``); Locust's own
runner carries the messages (``runner.send_message`` / ``register_message``),
so the workers may be local processes or other machines:

==================  ===============  ==================================================
from -> to          message          data
==================  ===============  ==================================================
worker -> master    harness_hello    ``protocol``, ``host``, ``pid``
master -> worker    harness_plan     ``plan`` (``LoadPlan``), ``worker`` (k), ``workers``;
                                     or ``error``
worker -> master    harness_report   ``worker``, ``rows`` (``samples.csv`` lines
                                     since the last report), ``state``, ``sent`` (attempts,
                                     retries included), ``retried``, ``done``,
                                     ``max_lateness_s``, ``error``; every 0.5 s
master -> workers   harness_go       ``start_at`` (Unix time of the load's start)
master -> workers   harness_stop     (nothing): the run is being stopped; each worker
                                     records what is in flight and sends its last report
==================  ===============  ==================================================

Workers are numbered in the order they say hello; worker k sends the
requests whose index is k modulo the number of workers. Their rows go to
``samples.<k>.csv`` as they arrive (so what a worker sent before it died is
kept), and ``progress.json`` holds the sum and each worker's own counters.
The orchestrator reads it as it reads a single Locust process's. A worker
that stops reporting (its process died, it quit, its machine went away)
fails the run: state ``failed``, the reason in ``error``, exit code 3.

However the master stops (the orchestrator's SIGTERM on Ctrl-C, a failure), it
first asks every worker still sending to stop and waits up to ``LAST_REPORT_S``
for each one's last report (its rows, and its requests still in flight, recorded
unfinished) before it closes the files: a worker stopped at the same moment as
its master must not lose what it had not yet reported.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import gevent
from locust.env import Environment
from locust.rpc.protocol import Message

from harness.load.plan import PROTOCOL, SAMPLE_COLUMNS, LoadPlan
from harness.load.recorder import atomic_json

LOST_AFTER_S = 10.0
"""A worker silent this long (it reports every 0.5 s) has died or hangs: the run fails."""
LAST_REPORT_S = 3.0
"""How long a stopping master waits for its workers' last reports (the orchestrator gives
its children 5 s after SIGTERM)."""
FINAL_STATES = ("finished", "interrupted", "failed")
"""A worker in one of these has sent its last report."""
_POLL_S = 0.01
_TICK_S = 0.5


@dataclass
class WorkerState:
    """What the master knows of one worker: who it is, where its rows go, its last counters."""

    index: int
    client_id: str
    host: str
    file: IO[str]
    last_report: float = field(default_factory=time.monotonic)
    counters: dict[str, Any] = field(default_factory=lambda: {"state": "joined"})

    @property
    def state(self) -> str:
        return str(self.counters.get("state", "joined"))

    def summary(self) -> dict[str, Any]:
        c = self.counters
        return {
            "host": self.host,
            "client_id": self.client_id,
            "state": self.state,
            "planned": c.get("planned", {}),
            "sent": c.get("sent", {}),
            "retried": c.get("retried", {}),
            "done": c.get("done", {}),
            "dropped": c.get("dropped", {}),
            "max_lateness_s": c.get("max_lateness_s", 0.0),
            "silent_s": round(time.monotonic() - self.last_report, 3),
            "error": c.get("error"),
        }


class Coordinator:
    """The master's side of the protocol above; ``run`` is its greenlet."""

    def __init__(self, environment: Environment, plan: LoadPlan) -> None:
        self.environment = environment
        self.plan = plan
        self.workers: dict[int, WorkerState] = {}
        self.by_client: dict[str, int] = {}
        self.state = "starting"
        self.start_at: float | None = None
        self.error: str | None = None
        runner = environment.runner
        assert runner is not None
        self.runner = runner
        runner.register_message("harness_hello", self.on_hello)
        runner.register_message("harness_report", self.on_report)

    # ------------------------------------------------------------ messages

    def on_hello(self, environment: Environment, msg: Message, **_: Any) -> None:
        client, data = msg.node_id, msg.data or {}
        if data.get("protocol") != PROTOCOL:
            reason = (
                f"a load worker on {data.get('host', '?')} speaks protocol "
                f"{data.get('protocol')!r}, this master {PROTOCOL}: run the same harness version"
            )
            self.runner.send_message("harness_plan", {"error": reason}, client_id=client)
            self.fail(reason)
            return
        if client in self.by_client:
            index = self.by_client[client]
        elif len(self.workers) >= self.plan.workers:
            self.runner.send_message(
                "harness_plan",
                {"error": f"this run takes {self.plan.workers} workers, and has them all"},
                client_id=client,
            )
            return
        else:
            index = len(self.workers)
            try:
                self.workers[index] = self._join(index, client, str(data.get("host", "?")))
            except OSError as exc:
                self.fail(f"cannot write {exc.filename}: {exc.strerror}")
                return
            self.by_client[client] = index
        reply = {"plan": self.plan.to_json(), "worker": index, "workers": self.plan.workers}
        self.runner.send_message("harness_plan", reply, client_id=client)

    def _join(self, index: int, client: str, host: str) -> WorkerState:
        path = self.plan.worker_samples_path(index)
        file = open(path, "w", newline="")  # noqa: SIM115 - closed in close()
        csv.writer(file).writerow(SAMPLE_COLUMNS)
        file.flush()
        return WorkerState(index, client, host, file)

    def on_report(self, environment: Environment, msg: Message, **_: Any) -> None:
        data = msg.data or {}
        worker = self.workers.get(int(data.get("worker", -1)))
        if worker is None or worker.client_id != msg.node_id:
            return  # not one of ours (a worker turned away)
        rows = data.pop("rows", [])  # samples.csv lines (harness.load.recorder.sample_row)
        worker.last_report = time.monotonic()
        worker.counters = data
        if rows and not worker.file.closed:
            try:
                worker.file.write("".join(rows))
                worker.file.flush()
            except OSError as exc:
                self.fail(
                    f"cannot write {exc.filename or self.plan.worker_samples_path(worker.index)}: "
                    f"{exc.strerror}"
                )
                return
        if data.get("error") and self.error is None:
            self.fail(f"load worker {worker.index} ({worker.host}): {data['error']}")

    # ------------------------------------------------------------ the run

    def run(self) -> None:
        """Wait for every worker to be ready, pass on the go, watch, and quit when all are done."""
        try:
            while not self._all("ready", "running", "draining", "finished"):
                self._tick()
            self.state = "ready"
            self.progress()
            self.start_at = self._wait_for_go()
            self.runner.send_message("harness_go", {"start_at": self.start_at})
            self.state = "running"
            while not self._all("finished"):
                self._tick()
                if all(w.state in ("draining", "finished") for w in self.workers.values()):
                    self.state = "draining"
        except _Failed:
            return
        self.state = "finished"
        self.close()
        gevent.spawn(self.runner.quit)

    def _tick(self) -> None:
        if self.error is not None:
            raise _Failed
        self._check_alive()
        try:
            self.progress()
        except OSError as exc:
            self.fail(f"cannot write {exc.filename}: {exc.strerror}")
            raise _Failed from None
        gevent.sleep(_TICK_S)

    def _all(self, *states: str) -> bool:
        return len(self.workers) == self.plan.workers and all(
            w.state in states for w in self.workers.values()
        )

    def _wait_for_go(self) -> float:
        while not os.path.exists(self.plan.go_path):
            if self.error is not None:
                raise _Failed
            self._check_alive()
            gevent.sleep(_POLL_S)
        return float(json.loads(Path(self.plan.go_path).read_text())["start_at"])

    def _check_alive(self) -> None:
        """Fail the run if a worker that has not finished has gone quiet or left."""
        now = time.monotonic()
        clients = getattr(self.runner, "clients", {})
        for w in self.workers.values():
            if w.state == "finished":
                continue
            if w.state in ("interrupted", "failed"):
                # Stopped on its own (SIGTERM): the run cannot complete without its share.
                self.fail(f"load worker {w.index} ({w.host}) stopped in state {w.state!r}")
                raise _Failed
            # Locust marks a worker "missing" after 3 s without a heartbeat, and takes it back
            # when they resume: a busy worker is given LOST_AFTER_S before the run fails.
            if w.client_id not in clients:
                why = "left the run (its process stopped or lost the connection)"
            elif now - w.last_report > LOST_AFTER_S:
                why = f"sent nothing for {now - w.last_report:.0f} s"
            else:
                continue
            self.fail(
                f"load worker {w.index} ({w.host}) {why} in state {w.state!r}; "
                f"its samples up to its last report are kept in "
                f"{Path(self.plan.worker_samples_path(w.index)).name}"
            )
            raise _Failed

    # ------------------------------------------------------------ ending

    def fail(self, reason: str) -> None:
        """Stop the run: the reason goes to ``progress.json``, Locust exits with code 3."""
        if self.error is not None:
            return
        self.error = reason
        self.state = "failed"
        print(f"load: {reason}", flush=True)
        gevent.spawn(self._quit_after_last_reports)

    def _quit_after_last_reports(self) -> None:
        # Locust's quit stops the master listening: the workers' last reports come first.
        self.collect_last_reports()
        self.close()
        self.runner.quit()

    def interrupted(self) -> None:
        """Locust is quitting (SIGTERM, a failure, the plan done): keep every worker's last rows."""
        if self.state not in ("finished", "failed"):
            self.state = "interrupted"
        self.collect_last_reports()
        self.close()

    def collect_last_reports(self) -> None:
        """Ask the workers still sending to stop; wait (bounded) for each one's last report."""
        sending = [w for w in self.workers.values() if w.state not in FINAL_STATES]
        for w in sending:
            with contextlib.suppress(Exception):  # a worker already gone: nothing to ask
                self.runner.send_message("harness_stop", None, client_id=w.client_id)
        deadline = time.monotonic() + LAST_REPORT_S
        while time.monotonic() < deadline and any(w.state not in FINAL_STATES for w in sending):
            gevent.sleep(_POLL_S)

    def close(self) -> None:
        for w in self.workers.values():
            with contextlib.suppress(OSError):
                w.file.close()
        with contextlib.suppress(OSError):
            self.progress()
        self.environment.process_exit_code = 3 if self.error is not None else 0

    def progress(self) -> None:
        summaries = {str(k): w.summary() for k, w in sorted(self.workers.items())}
        total: dict[str, dict[str, int]] = {"sent": {}, "retried": {}, "done": {}, "dropped": {}}
        for s in summaries.values():
            for key in ("sent", "retried", "done", "dropped"):
                for name, n in s[key].items():
                    total[key][name] = total[key].get(name, 0) + int(n)
        atomic_json(
            self.plan.progress_path,
            {
                "t": time.time(),
                "state": self.state,
                "start_at": self.start_at,
                "planned": {n: self.plan.planned_count(n) for n in self.plan.endpoints},
                **total,
                "max_lateness_s": max(
                    (float(s["max_lateness_s"]) for s in summaries.values()), default=0.0
                ),
                "error": self.error,
                "workers_expected": self.plan.workers,
                "workers": summaries,
            },
        )


class _Failed(Exception):
    """The run has failed (``Coordinator.error`` says why): stop the coordinator's greenlet."""
