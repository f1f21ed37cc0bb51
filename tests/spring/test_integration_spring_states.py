"""Integration: the breaker states that traffic does not drive, on a live spring-shop.

Resilience4j's actuator (``POST /actuator/circuitbreakers/{name}``) changes a breaker's
state: ``CLOSE``, ``FORCE_OPEN`` and ``DISABLE`` are all it offers. Each is read back from the
live ``/actuator/prometheus`` through the ``spring-boot`` preset. Closed, open and half-open
under an outage are in ``test_integration_spring_shop.py``; ``metrics_only`` is reached only
from the service's own code (``transitionToMetricsOnlyState()``), so it is checked on a
capture (``tests/analysis/test_presets.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.analysis.presets import PRESETS
from harness.analysis.series import breaker_state_now, parse_text
from harness.run.kinds.service import free_ports
from tests.spring.conftest import needs_java

pytestmark = [pytest.mark.integration, needs_java]


@pytest.fixture(scope="module")
def actuator(spring_jar: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The management URL of a spring-shop with its circuitbreakers endpoint exposed."""
    port, management, pg = free_ports(3)
    log = tmp_path_factory.mktemp("states") / "jvm.log"
    with log.open("w") as out:
        jvm = subprocess.Popen(
            [
                str(shutil.which("java")),
                "-jar",
                str(spring_jar),
                f"--server.port={port}",
                f"--management.server.port={management}",
                f"--pg.base-url=http://127.0.0.1:{pg}",
                "--server.address=127.0.0.1",
                "--management.server.address=127.0.0.1",
                "--management.endpoints.web.exposure.include=health,prometheus,circuitbreakers",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{management}/actuator"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert jvm.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(jvm.pid, signal.SIGKILL)
        jvm.wait(timeout=30)


def _state(url: str) -> str | None:
    text = httpx.get(f"{url}/prometheus", timeout=5).text
    return breaker_state_now(PRESETS["spring-boot"], parse_text(text, time.time(), "target"))


@pytest.mark.parametrize(
    ("update", "state"),
    [("FORCE_OPEN", "forced_open"), ("DISABLE", "disabled"), ("CLOSE", "closed")],
)
def test_each_state_the_actuator_drives_reads_as_its_own(
    actuator: str, update: str, state: str
) -> None:
    answer = httpx.post(
        f"{actuator}/circuitbreakers/pgClient", json={"updateState": update}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    assert _state(actuator) == state
