"""The load generator as the orchestrator drives it: its plan, its command, its progress file.

Locust runs in its own process and is never imported here (it patches the
whole process with gevent): the orchestrator writes ``plan.json``, starts
``locust -f locustfile.py``, waits for ``progress.json`` to say ``ready``,
writes ``go.json`` with the start time, and reads the progress file until it
says ``finished``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import harness.load
from harness.load.plan import EndpointPlan, LoadPlan
from harness.scenario.schema import Scenario

READY_TIMEOUT_S = 90.0
"""How long Locust may take to start and read its plan."""

LOCUSTFILE = Path(harness.load.__file__).with_name("locustfile.py")
"""Run by Locust in its own process; never imported here (Locust patches with gevent)."""


def plan_for(scenario: Scenario, base_url: str, build_dir: Path) -> LoadPlan:
    """The scenario's traffic against ``base_url``, with the build's files for samples."""
    return LoadPlan(
        base_url=base_url,
        seed=scenario.seed,
        warmup_s=scenario.warmup,
        duration_s=scenario.duration,
        drain_s=scenario.drain_s,
        endpoints={
            n: EndpointPlan(
                method=e.method,
                path=e.path,
                rate=e.rate,
                timeout_s=e.timeout,
                params=dict(e.params),
                body=e.body,
                idempotency_key=e.idempotency_key,
            )
            for n, e in scenario.traffic.items()
        },
        samples_path=str(build_dir / "samples.csv"),
        progress_path=str(build_dir / "progress.json"),
        go_path=str(build_dir / "go.json"),
    )


def locust_argv(plan: LoadPlan) -> list[str]:
    """Headless Locust with one scheduler user; its run-time is only a bound if we hang."""
    bound_s = plan.total_s + plan.drain_s + READY_TIMEOUT_S + 30
    return [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "-u",
        "1",
        "-r",
        "1",
        "--run-time",
        f"{int(bound_s)}s",
        "--host",
        plan.base_url,
        "--only-summary",
        "--exit-code-on-error",
        "0",
        "--loglevel",
        "WARNING",
    ]


def read_progress(path: Path) -> dict[str, Any]:
    """The locustfile's latest progress (state, sent counts); empty while there is none."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}
