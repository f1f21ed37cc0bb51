"""Each child's ``target.json``: written under its schema, read back through the same one, and
refused (its reason said, no traceback) by a child of another harness version."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.core.handoff import HandoffError
from harness.run.kinds.command.target import COMMAND_RECORD
from harness.run.kinds.docker import runner as docker_runner
from harness.run.kinds.docker.runner import DOCKER_SPEC, DockerSpec
from harness.run.kinds.registry import target_for
from harness.run.kinds.shop.target import SHOP_CONFIG, ShopTarget
from harness.run.targets import TargetContext
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Build
from targets.shop import __main__ as shop_main
from targets.shop.config import SCHEMA, ShopConfig

HEAD = "name: t\nduration: 10s\ntraffic:\n  x: {path: /x, rate: 1}\nbuilds:\n  b:\n"


def _build(text: str) -> Build:
    (build,) = load_scenario_text(HEAD + text).scenario.builds.values()
    return build


def _shop_config(tmp_path: Path) -> Path:
    build = _build("    profile: retry-only\n")
    launch = ShopTarget(build).prepare(TargetContext(tmp_path, "http://pg", "run-1"))  # type: ignore[arg-type]
    for fd in launch.pass_fds:
        os.close(fd)
    return tmp_path / "target.json"


def test_the_shop_reads_the_schema_the_harness_writes(tmp_path: Path) -> None:
    assert SHOP_CONFIG.schema == SCHEMA == "harness.shop-config/1"  # two sides, one contract
    path = _shop_config(tmp_path)
    assert json.loads(path.read_text())["schema"] == SCHEMA
    assert ShopConfig.from_file(path).pg_url == SHOP_CONFIG.read(path)["pg-url"] == "http://pg"


def test_a_shop_of_another_version_says_so_and_exits(tmp_path: Path) -> None:
    path = _shop_config(tmp_path)
    document = json.loads(path.read_text()) | {"schema": "harness.shop-config/2"}
    path.write_text(json.dumps(document))
    with pytest.raises(SystemExit) as stopped:
        shop_main.main(["--config", str(path)])
    assert stopped.value.code == (
        f"shop: {path}: schema 'harness.shop-config/2', and this shop reads "
        "'harness.shop-config/1': it was written by another version of the harness"
    )


def test_a_command_builds_record_has_the_same_shape(tmp_path: Path) -> None:
    build = _build(f"    command: [{sys.executable}, app.py, --port, '{{port}}']\n")
    (tmp_path / "b").mkdir()
    target_for(build).prepare(TargetContext(tmp_path / "b", "http://pg", "r", tmp_path))
    record = COMMAND_RECORD.read(tmp_path / "b" / "target.json")
    assert record["argv"][:2] == [sys.executable, "app.py"] and record["kind"] == "command"


SPEC: DockerSpec = {
    "kind": "docker",
    "image": "sha256:abc",
    "image_tags": ["shop:1"],
    "name": "harness-r-b",
    "labels": {"harness.run": "r"},
    "env": {"PORT": "8080"},
    "command": None,
    "network": "host",
    "ports": {},
    "stats_fd": 9,
    "stop_timeout_s": 1,
}


def test_the_docker_runner_reads_its_spec_and_refuses_another_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "target.json"
    path.write_text(DOCKER_SPEC.text(SPEC))
    assert DOCKER_SPEC.read(path) == SPEC
    unversioned = {k: v for k, v in json.loads(path.read_text()).items() if k != "schema"}
    path.write_text(json.dumps(unversioned))  # as a harness before hand-offs wrote it
    with pytest.raises(SystemExit) as stopped:
        docker_runner.main(["--spec", str(path)])
    assert stopped.value.code == 2
    assert capsys.readouterr().out == (
        f"[harness docker] {path}: not a harness.docker-spec/1 hand-off "
        "(no schema key: written by an older harness)\n"
    )
    del unversioned["stats_fd"]
    path.write_text(DOCKER_SPEC.text(unversioned))  # type: ignore[arg-type]
    with pytest.raises(HandoffError, match="harness.docker-spec/1 without stats_fd"):
        DOCKER_SPEC.read(path)
