"""A damaged tune folder is bad input: ``harness tune --resume DIR`` and ``--report DIR``
exit 2 naming the file and the field, what was expected, and no traceback (issue 32,
item 4). The folder is a complete one (every candidate finished), so nothing runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.tune.folder import TuneFolder
from harness.tune.plan import load_plan
from tests.tune.test_rank import CI, FIGURES, _build, _run


def _complete(tmp_path: Path) -> TuneFolder:
    folder = TuneFolder.create(tmp_path, load_plan(CI), 1)
    _run(folder, "a", {n: _build(*v) for n, v in FIGURES.items()} | {"fr90-w60": _build(1, 1, 1)})
    return folder


def _report_json(folder: TuneFolder) -> Path:
    return folder.runs / "tune-short" / "a" / "report.json"


def _edit_plan(folder: TuneFolder, **change: object) -> None:
    path = folder.path / "tune-plan.json"
    record = json.loads(path.read_text())
    for key, value in change.items():
        if value is None:
            record.pop(key)
        else:
            record[key] = value
    path.write_text(json.dumps(record))


DAMAGES: dict[str, tuple[Callable[[TuneFolder], object], list[str]]] = {
    "sweep.yaml missing": (lambda f: (f.path / "sweep.yaml").unlink(), ["sweep.yaml"]),
    "tune-plan.json without sweep_file": (
        lambda f: _edit_plan(f, sweep_file=None),
        ["tune-plan.json", "sweep_file"],
    ),
    "tune-plan.json repeat a word": (
        lambda f: _edit_plan(f, repeat="twice"),
        ["tune-plan.json", "repeat"],
    ),
    "tune-plan.json sweep_file a number": (
        lambda f: _edit_plan(f, sweep_file=5),
        ["tune-plan.json", "sweep_file"],
    ),
    "refine.json garbage": (lambda f: f.refine_record.write_text("{oops"), ["refine.json"]),
    "refine.json a list": (lambda f: f.refine_record.write_text("[1, 2]"), ["refine.json"]),
    "failed.json a list": (lambda f: f.failed_record.write_text("[1]"), ["failed.json"]),
    "report.json without builds": (
        lambda f: _report_json(f).write_text("{}"),
        ["report.json", "builds"],
    ),
    "report.json a list": (lambda f: _report_json(f).write_text("[]"), ["report.json"]),
    "report.json a string build": (
        lambda f: _report_json(f).write_text(json.dumps({"builds": {"fr25-w20": "fast"}})),
        ["report.json", "builds.fr25-w20"],
    ),
}


@pytest.mark.parametrize("command", ["--resume", "--report"])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_tune_folder_is_said_by_file_and_field_exit_2(
    tmp_path: Path, damage: str, command: str
) -> None:
    folder = _complete(tmp_path)
    spoil, said = DAMAGES[damage]
    spoil(folder)
    done = CliRunner().invoke(app, ["tune", command, str(folder.path)])
    assert done.exit_code == 2, (done.exit_code, done.output, done.exception)
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    for word in said:
        assert word in done.output, (word, done.output)


def test_a_damaged_copy_of_the_sweep_is_said_at_the_copy_not_the_sweep_file(
    tmp_path: Path,
) -> None:
    """The folder's own ``sweep.yaml`` is what ``--resume`` reads: a problem in it is said
    at the copy's line, not blamed on the original sweep file."""
    folder = _complete(tmp_path)
    copy = folder.path / "sweep.yaml"
    copy.write_text(copy.read_text().replace("failure-rate-threshold: [25, 90]", "fr: [1"))
    for command in ("--resume", "--report"):
        done = CliRunner().invoke(app, ["tune", command, str(folder.path)])
        assert done.exit_code == 2, done.output
        assert str(copy) in done.output.replace("\n", ""), done.output
        assert "tune-short.yaml" not in done.output
