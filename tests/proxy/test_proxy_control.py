"""The proxy as a scenario's TCP dependency: its control listener (``GET /health``,
``GET /metrics``, ``POST /__admin/start``, the run's one phase clock) and ``--scenario``
(the upstream, the toxics and the seed read from the scenario)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from harness.core.errors import InputError
from harness.proxy.main import main, scenario_schedule
from harness.proxy.toxics import load_schedule_text
from tests.proxy.streams import client, port_of, proxied, round_trip, run

SCHEDULE = (
    "phases: [{name: slow, start: 0.3, duration: 60, toxics: [{type: latency, latency: 150ms}]}]\n"
)


async def _http(port: int, request: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def _post(body: bytes) -> bytes:
    return b"POST /__admin/start HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def test_the_schedule_waits_for_its_start_then_counts_from_the_t0_given() -> None:
    async def body() -> None:
        schedule = load_schedule_text(SCHEDULE)
        async with proxied(schedule=schedule, await_start=True) as proxy:
            control = await proxy.serve_metrics(0)
            assert await _http(control, b"GET /health HTTP/1.1\r\n\r\n") == (
                200,
                b'{"status": "UP"}',
            )
            await asyncio.sleep(0.5)  # past the phase's start, but no clock yet
            assert proxy.phase is None and proxy.t0 is None
            async with client(port_of(proxy)) as conn:
                assert await round_trip(conn) < 0.14
            t0 = time.time() - 0.3  # the phase is in force at once
            status, said = await _http(control, _post(json.dumps({"t0": t0}).encode()))
            assert status == 200 and json.loads(said) == {"t0": t0}
            await asyncio.sleep(0.05)
            assert proxy.phase == "slow" and proxy.t0 == t0
            async with client(port_of(proxy)) as conn:
                assert await round_trip(conn) >= 0.14
            _, metrics = await _http(control, b"GET /metrics HTTP/1.1\r\n\r\n")
            assert b"proxy_toxics_in_force 1" in metrics
            assert b'proxy_phase{phase="slow"} 1' in metrics

    run(body)


@pytest.mark.parametrize(
    "body", [b"not json", b'{"t0": "soon"}', b'{"t0": true}', b'{"t0": NaN}', b'{"t0": 1e999}']
)
def test_a_bad_start_is_answered_400_and_changes_nothing(body: bytes) -> None:
    async def check() -> None:
        async with proxied(schedule=load_schedule_text(SCHEDULE), await_start=True) as proxy:
            control = await proxy.serve_metrics(0)
            status, said = await _http(control, _post(body))
            assert status == 400 and b"t0" in said
            assert proxy.t0 is None and proxy.await_start

    run(check)


def test_an_unknown_control_path_is_404() -> None:
    async def check() -> None:
        async with proxied() as proxy:
            control = await proxy.serve_metrics(0)
            status, said = await _http(control, b"GET /__admin/fault HTTP/1.1\r\n\r\n")
            assert status == 404 and b"POST /__admin/start" in said

    run(check)


SCENARIO = """\
name: t
seed: 9
duration: 10s
traffic: {q: {path: /q, rate: 5}}
dependencies:
  db:
    tcp: 127.0.0.1:5432
    phases:
      - {name: db-cut, start: 2s, duration: 3s, toxics: [{type: reset-peer, timeout: 100ms}]}
  visits:
    forward: http://127.0.0.1:9000
builds:
  app: {command: [x, "{port}"], env: {DB: "{dep.db.address}", V: "{dep.visits.url}"}}
"""


def test_scenario_gives_the_upstream_toxics_and_seed(tmp_path: Path) -> None:
    file = tmp_path / "s.yaml"
    file.write_text(SCENARIO)
    upstream, schedule, seed = scenario_schedule(str(file), "db")
    assert (upstream, seed) == ("127.0.0.1:5432", 9)
    (phase,) = schedule.phases
    assert (phase.name, phase.start, phase.end) == ("db-cut", 2.0, 5.0)
    assert phase.toxics[0].type == "reset-peer"
    for name in ("visits", "nope", None):
        with pytest.raises(InputError, match="name a TCP dependency of .*tcp: db"):
            scenario_schedule(str(file), name)


def test_main_refuses_scenario_with_upstream_and_neither(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "s.yaml"
    file.write_text(SCENARIO)
    for argv, said in (
        (["--scenario", str(file), "--dependency", "db", "--upstream", "127.0.0.1:1"], "drop"),
        ([], "give --upstream HOST:PORT (or --scenario and --dependency)"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert said in capsys.readouterr().err
