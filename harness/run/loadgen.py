"""The load generator as the orchestrator drives it: its plan, its commands, its progress file.

Locust runs in its own processes and is never imported here (it patches the
whole process with gevent): the orchestrator writes ``plan.json``, starts
``locust -f locustfile.py``, waits for ``progress.json`` to say ``ready``,
writes ``go.json`` with the start time, and reads the progress file until it
says ``finished``.

With more than one worker, the process it starts is a Locust master
(``master_argv``) and the workers are Locust workers (``worker_argv``), on
this machine or others (``harness worker``); the master writes the same
progress file, with each worker's counters in it (``harness.load.master``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness.load
from harness.core.errors import InputError
from harness.core.net import LOOPBACK, is_loopback
from harness.load.plan import LoadPlan, endpoint_plans
from harness.run.processes import guarded, signal_group
from harness.scenario.schema import Scenario

READY_TIMEOUT_S = 90.0
"""How long Locust may take to start and read its plan."""
EXTERNAL_READY_TIMEOUT_S = 600.0
"""How long a master waits for workers started by hand (``harness worker``) to join."""
MASTER_PORT = 5557
"""Locust's own default master port: where ``harness worker`` looks unless told otherwise."""
LOAD_WORKER = "load-w"
"""Name prefix of a build's local Locust workers (``load-w0``, ...; logs ``load-w0.log``)."""

LOCUSTFILE = Path(harness.load.__file__).with_name("locustfile.py")
"""Run by Locust in its own process; never imported here (Locust patches with gevent)."""


MAX_WORKERS = 256
"""Locust workers one run may take (``--workers``)."""


@dataclass(frozen=True)
class LoadWorkers:
    """How a build's load is generated: one Locust process, or a master and its workers.

    ``count`` 1 without ``external`` is a single Locust process (no master).
    Otherwise a master binds ``bind_host:port`` (a free loopback port unless
    given) and expects ``count`` workers: started here as processes of the build,
    or, with ``external``, by the user (``harness worker --master HOST:PORT``).
    """

    count: int = 1
    external: bool = False
    bind_host: str = LOOPBACK
    port: int | None = None

    @property
    def distributed(self) -> bool:
        return self.count > 1 or self.external

    @property
    def connect_host(self) -> str:
        """Where workers on this machine reach the master."""
        return LOOPBACK if self.bind_host in ("0.0.0.0", "::", "*") else self.bind_host

    @classmethod
    def parse(
        cls,
        count: int,
        *,
        external: bool = False,
        master_bind: str | None = None,
        scenario: Scenario,
        allow_remote: bool = False,
    ) -> LoadWorkers:
        """The command line's ``--workers``, ``--external-workers`` and ``--master-bind``.

        Raises ``InputError``: a bad count or address, or a master bound off loopback
        without both the scenario's ``allow-remote: true`` and ``--allow-remote``.
        """
        if not 1 <= count <= MAX_WORKERS:
            raise InputError(f"--workers {count}: between 1 and {MAX_WORKERS}")
        if master_bind is None:
            return cls(count, external, LOOPBACK, MASTER_PORT if external else None)
        if count == 1 and not external:
            raise InputError(
                "--master-bind applies to a distributed load: add --workers N (N > 1) "
                "or --external-workers"
            )
        host, sep, port_text = master_bind.strip().rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
            raise InputError(
                f"--master-bind {master_bind!r}: expected HOST:PORT, e.g. 0.0.0.0:5557"
            )
        if not is_loopback(host):
            if not scenario.allow_remote:
                raise InputError(
                    f"--master-bind {master_bind}: not loopback, so workers on other machines "
                    "could join; the scenario must say allow-remote: true (and harness run be "
                    "given --allow-remote)"
                )
            if not allow_remote:
                raise InputError(
                    f"--master-bind {master_bind}: not loopback; the scenario allows it "
                    "(allow-remote: true), and the command line must too: add --allow-remote"
                )
        return cls(count, external, host, int(port_text) or None)


def plan_for(
    scenario: Scenario,
    base_url: str,
    build_dir: Path,
    workers: int = 1,
    scenario_dir: Path | None = None,
) -> LoadPlan:
    """The scenario's traffic against ``base_url``, with the build's files for samples;
    ``scenario_dir``: where the endpoints' data files are read (``InputError`` if one
    cannot be)."""
    try:
        endpoints = endpoint_plans(scenario, scenario_dir)
    except ValueError as exc:
        raise InputError(f"traffic: {exc}") from None
    return LoadPlan(
        base_url=base_url,
        seed=scenario.seed,
        warmup_s=scenario.warmup,
        duration_s=scenario.duration,
        drain_s=scenario.drain_s,
        endpoints=endpoints,
        samples_path=str(build_dir / "samples.csv"),
        progress_path=str(build_dir / "progress.json"),
        go_path=str(build_dir / "go.json"),
        workers=workers,
    )


def _bound_s(plan: LoadPlan, ready_s: float) -> int:
    return int(plan.total_s + plan.drain_s + ready_s + 30)


def _locust(*args: str) -> list[str]:
    """``python -m locust`` with the harness's locustfile and quiet logs, plus ``args``."""
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *args, "--loglevel", "WARNING"]


def _headless(plan: LoadPlan, users: int, bound_s: int) -> tuple[str, ...]:
    """Headless, ``users`` scheduler users at once; the run-time is only a bound if we hang."""
    n = str(users)
    return (
        "--headless", "-u", n, "-r", n, "--run-time", f"{bound_s}s", "--host", plan.base_url,
        "--only-summary", "--exit-code-on-error", "0",
    )  # fmt: skip


def locust_argv(plan: LoadPlan) -> list[str]:
    """Headless Locust with one scheduler user; its run-time is only a bound if we hang."""
    return _locust(*_headless(plan, 1, _bound_s(plan, READY_TIMEOUT_S)))


def master_argv(plan: LoadPlan, bind_host: str, port: int, ready_s: float) -> list[str]:
    """A headless Locust master expecting ``plan.workers`` workers, one scheduler user each."""
    return _locust(
        "--master",
        "--master-bind-host", bind_host,
        "--master-bind-port", str(port),
        "--expect-workers", str(plan.workers),
        "--expect-workers-max-wait", str(int(ready_s)),
        *_headless(plan, plan.workers, _bound_s(plan, ready_s)),
    )  # fmt: skip


def worker_argv(master_host: str, master_port: int) -> list[str]:
    """A Locust worker with the harness's locustfile; the master sends it the plan."""
    return _locust("--worker", "--master-host", master_host, "--master-port", str(master_port))


def free_port(host: str = LOOPBACK) -> int:
    """A port nobody listens on now (Locust binds its master port itself, a moment later)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def read_progress(path: Path) -> dict[str, Any]:
    """The locustfile's latest progress (state, sent counts); empty while there is none."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def parse_master(text: str, allow_remote: bool) -> tuple[str, int]:
    """``harness worker --master HOST:PORT``: where the master is; loopback unless allowed."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep:
        host, port_text = text.strip(), str(MASTER_PORT)
    if not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InputError(f"--master {text!r}: expected HOST:PORT, e.g. 127.0.0.1:{MASTER_PORT}")
    if not is_loopback(host) and not allow_remote:
        raise InputError(
            f"--master {text}: not on this machine; a worker sends the load the master hands "
            "it, so joining another machine's run needs --allow-remote"
        )
    return host, int(port_text)


class WorkerSession:
    """One Locust worker process serving one build of a master's run (``harness worker``).

    It runs under the orphan guard, so it does not outlive the ``harness worker``
    that started it, even one killed with ``kill -9``.
    """

    def __init__(self, host: str, port: int, allow_remote: bool) -> None:
        watch_end, self.lifeline = os.pipe()
        env = {**os.environ, **({"HARNESS_ALLOW_REMOTE": "1"} if allow_remote else {})}
        try:
            self.popen = subprocess.Popen(
                guarded(worker_argv(host, port), watch_end),
                stdin=subprocess.DEVNULL,
                pass_fds=(watch_end,),
                env=env,
            )
        except BaseException:
            os.close(self.lifeline)
            raise
        finally:
            os.close(watch_end)

    def wait(self) -> int:
        """The worker's exit code (0: the master quit it at the end of its build)."""
        try:
            return self.popen.wait()
        finally:
            self.stop()

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the worker's group (its last samples go to the master), SIGKILL after grace."""
        if self.popen.poll() is None:
            signal_group(self.popen, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                signal_group(self.popen, signal.SIGKILL)
                self.popen.wait()
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1
