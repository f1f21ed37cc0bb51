"""The gateway's finite capacity, decided purely: slots, the FIFO queue, brownouts, bad input.

No sockets and no clock: ``Slots`` and ``limit_at`` are told what happened
and answer; test_integration_capacity.py checks the gateway carries them out
on real sockets (waits against a queueing reference, abandoned work, refusals).
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from prometheus_client import CollectorRegistry

from harness.core.errors import ScenarioError
from harness.core.precise_timer import PreciseTimer
from harness.gateway.capacity import Place, Slots, limit_at, limit_of
from harness.gateway.decide import decide
from harness.gateway.ledger import CAPACITY_COLUMNS, LEDGER_COLUMNS, Ledger
from harness.gateway.overrides import OverrideError, parse_override
from harness.gateway.queueing import Capacity, Ticket
from harness.results.io import LEDGER_DTYPES, ledger_from_csv, with_ledger_defaults
from harness.scenario.capacity import MAX_QUEUE, GatewayCapacity
from harness.scenario.faults import BrownoutFault, FaultOverride, LatencyFault, Phase
from harness.scenario.loader import load_scenario_text
from tests.conftest import ROOT, capacity_scenario

CAPACITY = GatewayCapacity.model_validate({"concurrency": 10, "service": {"delay": "50ms"}})


def _places(n: int) -> list[Place]:
    return [Place() for _ in range(n)]


def test_serves_up_to_the_limit_then_queues_then_refuses() -> None:
    slots = Slots(limit=2, queue_limit=2)
    places = _places(5)
    assert [slots.arrive(p) for p in places] == ["serve", "serve", "queue", "queue", "full"]
    assert (slots.in_service, slots.queued) == (2, 2)
    assert [p.state for p in places] == ["serving", "serving", "queued", "queued", "new"]


def test_the_queue_is_first_in_first_out() -> None:
    slots = Slots(limit=1, queue_limit=10)
    first, *waiting = _places(6)
    slots.arrive(first)
    for place in waiting:
        assert slots.arrive(place) == "queue"
    order = []
    serving = first
    for _ in waiting:
        (serving,) = slots.done(serving)
        order.append(serving)
    assert order == waiting
    assert slots.done(serving) == [] and slots.in_service == 0


def test_a_newcomer_never_overtakes_the_queue() -> None:
    slots = Slots(limit=1, queue_limit=5)
    a, b, c = _places(3)
    slots.arrive(a)
    slots.arrive(b)
    slots.set_limit(1)
    assert slots.done(a) == [b]
    assert slots.arrive(c) == "queue"  # b holds the only slot


def test_queue_limit_zero_refuses_whenever_every_slot_is_busy() -> None:
    slots = Slots(limit=1, queue_limit=0)
    a, b = _places(2)
    assert slots.arrive(a) == "serve"
    assert slots.arrive(b) == "full"


def test_leaving_the_queue_frees_its_place_but_not_once_let_in() -> None:
    slots = Slots(limit=1, queue_limit=1)
    a, b, c = _places(3)
    slots.arrive(a)
    slots.arrive(b)
    assert slots.arrive(c) == "full"
    assert slots.leave(b) and b.state == "left"
    assert slots.arrive(c) == "queue"
    assert slots.done(a) == [c]
    assert not slots.leave(c)  # let in: it is served, a timeout now changes nothing
    assert slots.in_service == 1


def test_a_brownout_lets_calls_in_service_finish_and_lifting_it_admits_the_queue() -> None:
    slots = Slots(limit=4, queue_limit=100)
    serving = _places(4)
    for p in serving:
        slots.arrive(p)
    waiting = _places(5)
    for p in waiting:
        slots.arrive(p)
    assert slots.set_limit(1) == []  # nobody is stopped: 4 stay in service
    assert slots.done(serving[0]) == [] and slots.done(serving[1]) == []
    assert slots.done(serving[2]) == []  # 1 in service: the limit
    assert slots.in_service == 1
    assert slots.set_limit(4) == waiting[:3]  # lifted: the three oldest at once
    assert slots.in_service == 4 and slots.queued == 2


def test_ending_a_call_not_in_service_is_a_bug() -> None:
    slots = Slots(limit=1, queue_limit=1)
    with pytest.raises(ValueError, match="not serving"):
        slots.done(Place())
    with pytest.raises(ValueError):
        Slots(limit=0, queue_limit=1)


def _brownout(**data: Any) -> BrownoutFault:
    fault = FaultOverride.model_validate({"faults": [{"type": "brownout", **data}]}).faults[0]
    assert isinstance(fault, BrownoutFault)
    return fault


@pytest.mark.parametrize(
    ("spec", "slots"),
    [
        ({"capacity": "20%"}, 2),
        ({"capacity": "100%"}, 10),
        ({"capacity": "1%"}, 1),  # at least one slot
        ({"capacity": "25%"}, 3),  # 2.5 rounds half up
        ({"capacity": 0.5}, 5),
        ({"concurrency": 3}, 3),
    ],
)
def test_a_brownout_leaves_its_share_of_the_slots(spec: dict[str, Any], slots: int) -> None:
    assert _brownout(**spec).slots(10) == slots


def test_the_limit_in_force_follows_the_phases_and_an_override() -> None:
    phases = [
        Phase.model_validate(
            {
                "name": "dip",
                "start": 10,
                "duration": 20,
                "fault": {"type": "brownout", "capacity": "20%"},
            }
        ),
        Phase.model_validate(
            {
                "name": "blips",
                "start": 40,
                "duration": 20,
                "repeat": {"every": 10, "for": 2},
                "faults": [
                    {"type": "latency", "delay": "1ms"},
                    {"type": "brownout", "concurrency": 5},
                ],
            }
        ),
    ]
    assert limit_at(CAPACITY, phases, None) == 10  # before t0
    assert limit_at(CAPACITY, phases, 5) == 10
    assert limit_at(CAPACITY, phases, 10) == 2
    assert limit_at(CAPACITY, phases, 29.9) == 2
    assert limit_at(CAPACITY, phases, 30) == 10
    assert limit_at(CAPACITY, phases, 41) == 5  # the blip is on
    assert limit_at(CAPACITY, phases, 43) == 10  # off
    override = FaultOverride.model_validate({"faults": [{"type": "healthy"}]}).faults
    assert limit_at(CAPACITY, phases, 15, override) == 10  # an override replaces the schedule
    assert limit_of(CAPACITY, [_brownout(capacity="50%"), _brownout(concurrency=2)]) == 2


def test_a_brownout_decides_nothing_about_a_call() -> None:
    latency = LatencyFault(type="latency", delay=0.2)
    action = decide([_brownout(capacity="20%"), latency], 1, "k", 1)
    assert (action.kind, action.fault, action.delay_s) == ("respond", "latency", 0.2)
    assert decide([_brownout(capacity="20%")], 1, "k", 1).fault == "healthy"


GOOD = "  capacity: {concurrency: 4, service: {delay: 50ms}}"


def _scenario(capacity: str, fault: str) -> str:
    return capacity_scenario(
        capacity, f"    - {{name: dip, start: 0s, duration: 1m, fault: {fault}}}"
    )


@pytest.mark.parametrize(
    ("capacity", "fault", "line", "field", "message"),
    [
        (
            "  capacity: {concurrency: 0, service: {delay: 50ms}}",
            "{type: healthy}",
            7,
            "pg.capacity.concurrency",
            "greater than or equal to 1",
        ),
        (
            "  capacity: {concurrency: -3, service: {delay: 50ms}}",
            "{type: healthy}",
            7,
            "pg.capacity.concurrency",
            "greater than or equal to 1",
        ),
        (
            "  capacity: {concurrency: 2, queue-limit: -1, service: {delay: 50ms}}",
            "{type: healthy}",
            7,
            "pg.capacity.queue-limit",
            "greater than or equal to 0",
        ),
        (
            "  capacity: {concurrency: 2, full-status: 500, service: {delay: 50ms}}",
            "{type: healthy}",
            7,
            "pg.capacity.full-status",
            "503",
        ),
        ("  capacity: {concurrency: 2}", "{type: healthy}", 7, "pg.capacity.service", "required"),
        (
            "  capacity: {concurrency: 2, service: {distribution: uniform, min: 1s}}",
            "{type: healthy}",
            7,
            "pg.capacity.service",
            "needs max",
        ),
        ("", "{type: brownout, capacity: 20%}", 9, "pg.phases.0.fault.type", "give pg.capacity"),
        (
            GOOD,
            "{type: brownout, capacity: 0%}",
            9,
            "pg.phases.0.fault.capacity",
            "outside (0, 100%]",
        ),
        (
            GOOD,
            "{type: brownout, capacity: 120%}",
            9,
            "pg.phases.0.fault.capacity",
            "outside (0, 100%]",
        ),
        (
            GOOD,
            "{type: brownout, capacity: 20}",
            9,
            "pg.phases.0.fault.capacity",
            "outside (0, 100%]",
        ),
        (GOOD, "{type: brownout, capacity: lots}", 9, "pg.phases.0.fault.capacity", "percentage"),
        (GOOD, "{type: brownout}", 9, "pg.phases.0.fault", "capacity (a share"),
        (
            GOOD,
            "{type: brownout, capacity: 20%, concurrency: 1}",
            9,
            "pg.phases.0.fault",
            "not both",
        ),
        (
            GOOD,
            "{type: brownout, concurrency: 5}",
            9,
            "pg.phases.0.fault.concurrency",
            "more than pg.capacity.concurrency 4",
        ),
        (
            GOOD,
            "{type: brownout, capacity: 20%, probability: 0.5}",
            9,
            "pg.phases.0.fault",
            "probability and match do not apply",
        ),
    ],
)
def test_bad_capacity_input_names_the_file_line_and_field(
    capacity: str, fault: str, line: int, field: str, message: str
) -> None:
    text = _scenario(capacity or "# no capacity", fault)
    with pytest.raises(ScenarioError) as caught:
        load_scenario_text(text, "s.yaml")
    problems = [str(p) for p in caught.value.problems]
    assert any(
        p.startswith(f"s.yaml:{line}:") and f" {field}: " in p and message in p for p in problems
    ), problems


def test_harness_validate_exits_2_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(_scenario("# none", "{type: brownout, capacity: 20%}"))
    done = subprocess.run(
        [sys.executable, "-m", "harness", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2, done
    assert f"{path}:9:" in done.stderr + done.stdout and "Traceback" not in done.stderr


def test_capacity_defaults() -> None:
    assert CAPACITY.queue_limit == MAX_QUEUE
    assert CAPACITY.queue_timeout is None
    assert CAPACITY.full_status == 503
    assert not CAPACITY.cancel_on_disconnect
    mixed = GatewayCapacity.model_validate(
        {
            "concurrency": 1,
            "service": {
                "distribution": "mix",
                "mix": [{"weight": 1, "distribution": "fixed", "delay": "10ms"}],
            },
        }
    )
    assert mixed.service.mix is not None


def test_a_capacity_ledger_round_trips_and_an_old_one_reads_as_no_queue(tmp_path: Path) -> None:
    path = tmp_path / "pg-ledger.csv"
    ledger = Ledger(path, capacity=True)
    ledger.add(
        (
            1.0,
            "k1",
            1,
            "p",
            "healthy",
            200,
            "approved",
            0.3,
            False,
            "/v1/payments/approve",
            0.25,
            0.05,
            False,
            False,
        )
    )
    ledger.add(
        (
            2.0,
            "k2",
            1,
            "p",
            "healthy",
            0,
            "approved",
            0.3,
            True,
            "/v1/payments/approve",
            0.1,
            0.2,
            True,
            False,
        )
    )
    ledger.add(
        (
            3.0,
            "k3",
            1,
            "p",
            "queue-full",
            503,
            "none",
            0.0,
            False,
            "/v1/payments/approve",
            0.0,
            0.0,
            False,
            True,
        )
    )
    ledger.close()
    assert path.read_text().splitlines()[0].split(",") == [*LEDGER_COLUMNS, *CAPACITY_COLUMNS]
    frame = ledger_from_csv(path)
    assert frame.dtypes.astype(str).to_dict() == LEDGER_DTYPES
    assert frame["queue_s"].tolist() == [0.25, 0.1, 0.0]
    assert frame["abandoned"].tolist() == [False, True, False]
    assert frame["rejected"].tolist() == [False, False, True]

    plain = tmp_path / "plain.csv"
    old = Ledger(plain)
    old.add((1.0, "k1", 1, "p", "healthy", 200, "approved", 0.3, False, "/v1/payments/approve"))
    old.close()
    assert plain.read_text().splitlines()[0].split(",") == list(LEDGER_COLUMNS)  # as before
    frame = ledger_from_csv(plain)
    assert frame["queue_s"].tolist() == [0.0] and math.isnan(frame["service_s"].iloc[0])
    assert not frame["abandoned"].any() and not frame["rejected"].any()


def test_a_ledger_parquet_without_the_columns_gains_them() -> None:
    frame = pd.DataFrame({"arrival": [1.0], "key": ["k"], "client_gone": [True]})
    filled = with_ledger_defaults(frame)
    assert filled["path"].tolist() == ["/v1/payments/approve"]
    assert filled["queue_s"].tolist() == [0.0]
    assert filled["abandoned"].dtype == bool and not filled["abandoned"].any()
    assert with_ledger_defaults(filled) is filled  # nothing to add


def test_a_call_let_in_before_its_task_first_ran_is_served() -> None:
    # a needs no service time: its task ends on its first step and lets b in, before b's own
    # task has run once; b must still be woken (it waited forever when its wake-up was made
    # by its task, too late)
    async def main() -> list[Ticket]:
        settings = GatewayCapacity.model_validate(
            {"concurrency": 1, "queue-timeout": "5s", "service": {"delay": "0s"}}
        )
        capacity = Capacity(settings, PreciseTimer(), CollectorRegistry(), lambda: 1)
        tickets = [capacity.submit(0.0, time.monotonic()) for _ in range(3)]
        await asyncio.wait_for(asyncio.gather(*(t.task for t in tickets if t.task)), 2)
        return tickets

    tickets = asyncio.run(main())
    assert [t.state for t in tickets] == ["done"] * 3
    assert all(t.rejected is None for t in tickets)


def test_a_brownout_override_needs_capacity_and_never_rides_on_one_call() -> None:
    spec = '{"type": "brownout", "capacity": "50%"}'
    (fault,) = parse_override(spec, allow_refuse=False, allow_brownout=True)
    assert isinstance(fault, BrownoutFault) and fault.slots(10) == 5
    with pytest.raises(OverrideError, match="brownout lowers pg.capacity"):
        parse_override(spec, allow_refuse=False)  # X-Harness-Fault, or no pg.capacity
