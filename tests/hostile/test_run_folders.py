"""Corrupted run folders are said, not crashed on (issue 22, items 8, 9, 10 and 17).

Each case copies the stored quickstart run, breaks one file the way a disk, an
editor or another harness version would, and runs the command on it: exit 2
(bad input, as for "a run folder that is not one"), the file and what is wrong
with it said, no traceback, and nothing good overwritten.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core.errors import InputError
from harness.results.manifest import read_manifest
from harness.run.cleanup import clean_results
from tests.report.runfolders import RUN
from tests.run.test_cleanup import crashed_run, dead_identity

Damage = Callable[[Path], None]


def _edit_json(name: str, change: Callable[[dict[str, Any]], object]) -> Damage:
    def damage(run_dir: Path) -> None:
        data = json.loads((run_dir / name).read_text())
        change(data)
        (run_dir / name).write_text(json.dumps(data))

    return damage


def _write(name: str, text: str) -> Damage:
    return lambda run_dir: (run_dir / name).write_text(text)


def _write_bytes(name: str, data: bytes) -> Damage:
    return lambda run_dir: (run_dir / name).write_bytes(data)


def _truncate(name: str, keep: int) -> Damage:
    def damage(run_dir: Path) -> None:
        path = run_dir / name
        path.write_bytes(path.read_bytes()[:keep])

    return damage


def _frame(name: str, frame: pd.DataFrame) -> Damage:
    return lambda run_dir: frame.to_parquet(run_dir / name)


def _retype(name: str, column: str) -> Damage:
    def damage(run_dir: Path) -> None:
        frame = pd.read_parquet(run_dir / name)
        frame[column] = frame[column].astype(str) + "s"
        frame.to_parquet(run_dir / name)

    return damage


def _rename_build(run_dir: Path) -> None:
    path = run_dir / "scenario.yaml"
    path.write_text(path.read_text().replace("before", "earlier"))


def _copy(tmp_path: Path, damage: Damage) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(RUN, run_dir)
    damage(run_dir)
    return run_dir


def _refused(args: list[str], *expected: str) -> str:
    """Run the command: exit 2 without a traceback, saying each of ``expected``."""
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    for text in expected:
        assert text in result.output, result.output
    return result.output


# ---------------------------------------------------------------- 8: report on a damaged run

REPORT_DAMAGE: dict[str, tuple[Damage, tuple[str, ...]]] = {
    "a garbage manifest": (_write("manifest.json", "\0garbage{"), ("manifest.json", "not JSON")),
    "a list manifest": (_write("manifest.json", "[1, 2]"), ("manifest.json", "list")),
    "a folder for a manifest": (
        lambda run_dir: ((run_dir / "manifest.json").unlink(), (run_dir / "manifest.json").mkdir()),
        ("manifest.json", "cannot read it"),
    ),
    "a manifest not UTF-8": (_write_bytes("manifest.json", b'{"x": "\xff"}'), ("manifest.json",)),
    "builds a list": (
        _edit_json("manifest.json", lambda m: m.update(builds=[1])),
        ("manifest.json", "builds"),
    ),
    "a build's t0 text": (
        _edit_json("manifest.json", lambda m: m["builds"]["before"].update(t0="soon")),
        ("manifest.json", "builds.before.t0", "expected a number"),
    ),
    "a build's status a number": (
        _edit_json("manifest.json", lambda m: m["builds"]["before"].update(status=3)),
        ("manifest.json", "builds.before.status"),
    ),
    "truncated samples": (
        _truncate("before/samples.parquet", 500),
        ("before/samples.parquet", "not a Parquet file"),
    ),
    "0-byte samples": (_write("before/samples.parquet", ""), ("before/samples.parquet",)),
    "0-byte metrics": (_write("before/metrics.parquet", ""), ("before/metrics.parquet",)),
    "0-byte ledger": (_write("before/pg.parquet", ""), ("before/pg.parquet",)),
    "a samples column of text": (
        _retype("before/samples.parquet", "end"),
        ("before/samples.parquet", "end"),
    ),
    "a build renamed in scenario.yaml": (
        _rename_build,
        ("before", "scenario.yaml", "earlier"),
    ),
}

OTHER_COLUMNS = dict(samples="endpoint", metrics="series", pg="arrival", payments="idempotency_key")
"""Each Parquet file of a build, and a column of it that one of other columns lacks."""
REPORT_DAMAGE |= {
    f"{name}.parquet of other columns": (
        _frame(f"before/{name}.parquet", pd.DataFrame({"x": [1]})),
        (f"before/{name}.parquet", column),
    )
    for name, column in OTHER_COLUMNS.items()
}


@pytest.mark.parametrize("case", list(REPORT_DAMAGE))
def test_report_on_a_damaged_run_folder_exits_2_saying_what_and_where(
    tmp_path: Path, case: str
) -> None:
    damage, expected = REPORT_DAMAGE[case]
    run_dir = _copy(tmp_path, damage)
    before = (run_dir / "report.json").read_bytes()
    _refused(["report", str(run_dir)], *expected)
    assert (run_dir / "report.json").read_bytes() == before


def _p95_text(report: dict[str, Any]) -> None:
    report["builds"]["after"]["endpoints"]["products"]["latency_s"]["p95"] = "slow"


REPORT_JSON_DAMAGE: dict[str, tuple[Damage, tuple[str, ...]]] = {
    "truncated": (_truncate("report.json", 300), ("report.json", "not JSON")),
    "a list": (_write("report.json", "[]"), ("report.json", "list")),
    "builds a list": (
        _edit_json("report.json", lambda r: r.update(builds=[])),
        ("report.json", "builds"),
    ),
    "a figure of text": (
        _edit_json("report.json", _p95_text),
        ("report.json", "builds.after.endpoints.products.latency_s.p95", "expected a number"),
    ),
}


@pytest.mark.parametrize("command", ["gate", "compare"])
@pytest.mark.parametrize("case", list(REPORT_JSON_DAMAGE))
def test_gate_and_compare_on_a_damaged_report_json_exit_2(
    tmp_path: Path, case: str, command: str
) -> None:
    damage, expected = REPORT_JSON_DAMAGE[case]
    run_dir = _copy(tmp_path, damage)
    args = [command, str(run_dir)] + ([str(RUN)] if command == "compare" else [])
    _refused(args, *expected)


def test_a_damaged_baseline_is_said_too(tmp_path: Path) -> None:
    baseline = _copy(tmp_path, _truncate("report.json", 300))
    _refused(["gate", str(RUN), "--baseline", str(baseline)], "report.json", "not JSON")


# ---------------------------------------------------------------- 9: a good report kept


@pytest.mark.parametrize(
    "damage",
    [
        lambda run_dir: shutil.rmtree(run_dir / "before"),
        lambda run_dir: (run_dir / "before" / "samples.parquet").unlink(),
    ],
    ids=["no build folder", "no samples file"],
)
def test_report_keeps_a_good_report_json_when_a_builds_samples_are_gone(
    tmp_path: Path, damage: Damage
) -> None:
    run_dir = _copy(tmp_path, damage)
    before = (run_dir / "report.json").read_bytes()
    _refused(["report", str(run_dir)], "before", "975 samples", "report.json")
    assert (run_dir / "report.json").read_bytes() == before


# ---------------------------------------------------------------- 10: build names read back


@pytest.mark.parametrize("key", ["../../../outside", "/etc", "a/b", ".", ".."])
def test_a_build_key_that_is_not_a_name_is_refused(tmp_path: Path, key: str) -> None:
    run_dir = _copy(
        tmp_path,
        _edit_json("manifest.json", lambda m: m["builds"].update({key: m["builds"]["before"]})),
    )
    with pytest.raises(InputError, match="builds"):
        read_manifest(run_dir / "manifest.json")
    _refused(["report", str(run_dir)], "manifest.json", "builds")


def test_clean_writes_nothing_outside_the_results_folder(tmp_path: Path) -> None:
    root = tmp_path / "results"
    run_dir = crashed_run(root, dead_identity())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "samples.csv").write_text((run_dir / "before" / "samples.csv").read_text())
    key = "../../../outside"
    assert (run_dir / key).resolve() == outside.resolve()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["builds"][key] = {"build": "before", "status": "running"}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    report = clean_results(root)
    assert sorted(outside.iterdir()) == [outside / "samples.csv"]
    assert [d for d, _ in report.failed] == [run_dir]
    assert "../../../outside" in report.failed[0][1]


# ---------------------------------------------------------------- 17: report.json's schema


def _future(report: dict[str, Any]) -> None:
    report["schema"] = "harness.report/9"
    report["added_in_9"] = {"x": 1}


@pytest.mark.parametrize("command", ["gate", "compare"])
def test_a_report_of_another_schema_is_refused(tmp_path: Path, command: str) -> None:
    run_dir = _copy(tmp_path, _edit_json("report.json", _future))
    args = [command, str(run_dir)] + ([str(RUN)] if command == "compare" else [])
    _refused(args, "report.json", "harness.report/9", "harness.report/1")


def test_a_report_with_only_added_keys_still_reads(tmp_path: Path) -> None:
    """A newer harness of the same schema adds keys (report.json changes only so)."""
    run_dir = _copy(tmp_path, _edit_json("report.json", lambda r: r.update(added_later=[1])))
    result = CliRunner().invoke(app, ["compare", str(run_dir), str(RUN)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("case", ["truncated", "a figure of text"])
def test_index_shows_a_damaged_report_json_as_its_rows_problem(tmp_path: Path, case: str) -> None:
    from harness.report.index import run_entry

    run_dir = _copy(tmp_path, REPORT_JSON_DAMAGE[case][0])
    entry = run_entry(run_dir)
    assert entry.problem is not None
    assert entry.problem.startswith("report.json unreadable:")
