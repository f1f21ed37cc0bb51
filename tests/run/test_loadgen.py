"""How the load is spread: ``--workers``, ``--external-workers``, ``--master-bind`` and
``harness worker --master``, and the loopback rule for each."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import InputError
from harness.run.loadgen import MASTER_PORT, LoadWorkers, master_argv, parse_master, plan_for
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario

SCENARIO = """\
name: s
duration: 10s
traffic:
  x: {{path: /x, rate: 5}}
builds:
  b: {{profile: retry-only}}
{extra}"""


def _scenario(allow_remote: bool = False) -> Scenario:
    extra = "allow-remote: true\n" if allow_remote else ""
    return load_scenario_text(SCENARIO.format(extra=extra)).scenario


def test_one_worker_is_a_single_locust_process() -> None:
    spread = LoadWorkers.parse(1, scenario=_scenario())
    assert not spread.distributed and spread.port is None


def test_local_workers_get_a_free_loopback_port_and_external_ones_locusts_own() -> None:
    assert LoadWorkers.parse(4, scenario=_scenario()) == LoadWorkers(4, False, "127.0.0.1", None)
    external = LoadWorkers.parse(3, external=True, scenario=_scenario())
    assert external.distributed and external.port == MASTER_PORT
    bound = LoadWorkers.parse(2, master_bind="127.0.0.1:6000", scenario=_scenario())
    assert (bound.bind_host, bound.port, bound.connect_host) == ("127.0.0.1", 6000, "127.0.0.1")


@pytest.mark.parametrize(
    ("kwargs", "allow", "fragment"),
    [
        ({"master_bind": "0.0.0.0:5557"}, False, "allow-remote: true"),
        ({"master_bind": "10.1.2.3:5557", "allow_remote": False}, True, "add --allow-remote"),
        ({"master_bind": "nonsense"}, False, "expected HOST:PORT"),
        ({"master_bind": "127.0.0.1:99999"}, False, "expected HOST:PORT"),
    ],
)
def test_a_master_off_loopback_needs_the_scenarios_and_the_command_lines_word(
    kwargs: dict[str, object], allow: bool, fragment: str
) -> None:
    with pytest.raises(InputError, match=fragment):
        LoadWorkers.parse(2, scenario=_scenario(allow), **kwargs)  # type: ignore[arg-type]


def test_a_master_off_loopback_when_both_allow_it() -> None:
    spread = LoadWorkers.parse(
        2, master_bind="0.0.0.0:5557", scenario=_scenario(True), allow_remote=True
    )
    assert spread.bind_host == "0.0.0.0" and spread.connect_host == "127.0.0.1"


def test_bad_worker_counts_and_a_bind_without_workers_are_refused() -> None:
    with pytest.raises(InputError, match="between 1 and 256"):
        LoadWorkers.parse(0, scenario=_scenario())
    with pytest.raises(InputError, match="--master-bind applies"):
        LoadWorkers.parse(1, master_bind="127.0.0.1:5557", scenario=_scenario())


def test_harness_worker_joins_loopback_masters_unless_allowed() -> None:
    assert parse_master("127.0.0.1:6000", False) == ("127.0.0.1", 6000)
    assert parse_master("localhost", False) == ("localhost", MASTER_PORT)
    with pytest.raises(InputError, match="--allow-remote"):
        parse_master("10.0.0.7:5557", False)
    assert parse_master("10.0.0.7:5557", True) == ("10.0.0.7", 5557)
    with pytest.raises(InputError, match="expected HOST:PORT"):
        parse_master("h:0", True)


def test_the_master_expects_one_scheduler_user_per_worker(tmp_path: Path) -> None:
    plan = plan_for(_scenario(), "http://127.0.0.1:1", tmp_path, workers=3)
    argv = master_argv(plan, "127.0.0.1", 6000, 90)
    assert argv[argv.index("--expect-workers") + 1] == "3"
    assert argv[argv.index("-u") + 1] == "3" and "--master" in argv
