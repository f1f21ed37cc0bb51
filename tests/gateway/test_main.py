"""The gateway's one command line: ``python -m harness.pg`` and ``harness pg`` parse alike.

In-process checks of the parser and the exit codes; the processes themselves
are started in test_integration_pg.py.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.gateway.main import STANDALONE_PORT, main, parser
from tests.conftest import pg_scenario


def test_the_orchestrator_and_a_person_get_different_defaults() -> None:
    process = parser().parse_args(["--scenario", "s.yaml"])
    assert (process.port, process.t0, process.fd, process.timer) == (0, None, None, "timerfd")
    alone = parser("harness pg", standalone=True).parse_args(["--scenario", "s.yaml"])
    assert alone.port == STANDALONE_PORT == 8089
    assert abs(alone.t0 - time.time()) < 5  # the schedule's clock starts now
    given = parser().parse_args(["--scenario", "s.yaml", "--t0", "12.5", "--port", "7"])
    assert (given.t0, given.port) == (12.5, 7)


def _exit_code(argv: list[str]) -> int | str | None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    return caught.value.code


def test_bad_input_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = pg_scenario(tmp_path, "{type: healthy}")
    assert _exit_code(["--scenario", str(scenario), "--host", "0.0.0.0"]) == 2
    assert "only binds loopback" in capsys.readouterr().err
    bad = pg_scenario(tmp_path, "{type: error, status: 404}", "bad")
    assert _exit_code(["--scenario", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"error {bad}:8:" in err and "pg.phases.0.fault.status" in err
    assert "problem(s) found" in err
    assert _exit_code(["--port", "0"]) == 2  # --scenario is required
    assert "--scenario" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "said"),
    [(["--port", "70000"], "--port: 70000 is out of range: a port is 0 to 65535"),
     (["--port", "-1"], "--port: -1 is out of range"),
     (["--control-port", "70000"], "--control-port: 70000 is out of range"),
     (["--fd", "-5"], "--fd: -5 is not a file descriptor"),
     (["--fd", "99999"], "--fd 99999: not an open socket"),
     (["--control-fd", "99999"], "--control-fd 99999: not an open socket")],
)  # fmt: skip
def test_a_bad_port_or_fd_exits_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], said: str
) -> None:
    scenario = pg_scenario(tmp_path, "{type: healthy}")
    assert _exit_code(["--scenario", str(scenario), *option]) == 2
    assert said in capsys.readouterr().err


def test_harness_pg_with_port_70000_exits_2(tmp_path: Path) -> None:
    from harness.cli import app

    scenario = pg_scenario(tmp_path, "{type: healthy}")
    result = CliRunner().invoke(app, ["pg", "--scenario", str(scenario), "--port", "70000"])
    assert result.exit_code == 2, result.output
    assert "70000 is out of range" in result.output
    assert not isinstance(result.exception, OverflowError)


def test_a_port_in_use_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = pg_scenario(tmp_path, "{type: healthy}")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        assert _exit_code(["--scenario", str(scenario), "--port", port]) == 3
    assert "cannot bind 127.0.0.1" in capsys.readouterr().err


def test_harness_pg_and_proxy_forward_to_the_process_parsers() -> None:
    from harness.cli import app

    runner = CliRunner()
    pg = runner.invoke(app, ["pg", "--help"])
    assert pg.exit_code == 0
    assert "usage: harness pg" in pg.output and "--control-port" in pg.output
    assert "default 8089" in pg.output
    proxy = runner.invoke(app, ["proxy", "--help"])
    assert proxy.exit_code == 0
    assert "usage: harness proxy" in proxy.output and "--upstream" in proxy.output
    missing = runner.invoke(app, ["proxy"])
    assert missing.exit_code == 2


def test_a_ledger_onto_an_existing_file_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 22, item 22: ``--ledger`` truncated an existing file without a word."""
    scenario = pg_scenario(tmp_path, "{type: healthy}")
    ledger = tmp_path / "calls.csv"
    ledger.write_text("arrival,key\n1.0,k1\n")
    assert _exit_code(["--scenario", str(scenario), "--ledger", str(ledger), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"--ledger {ledger}: exists" in err and "--overwrite-ledger" in err
    assert ledger.read_text() == "arrival,key\n1.0,k1\n"


def test_overwrite_ledger_starts_it_afresh_and_a_device_is_written_into(tmp_path: Path) -> None:
    from harness.gateway.ledger import LEDGER_COLUMNS, Ledger

    ledger = tmp_path / "calls.csv"
    ledger.write_text("old rows\n")
    with pytest.raises(FileExistsError):
        Ledger(ledger)
    Ledger(ledger, overwrite=True).close()
    assert ledger.read_text() == ",".join(LEDGER_COLUMNS) + "\n"
    assert parser().parse_args(["--scenario", "s", "--overwrite-ledger"]).overwrite_ledger
    Ledger("/dev/null").close()  # not a file of rows to lose: written into, as asked
