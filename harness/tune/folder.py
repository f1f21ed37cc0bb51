"""A tune's folder: the sweep as it was, and the run folders its candidates ran in.

``results/<name>/tune-<stamp>-<id>/`` holds ``sweep.yaml`` (the sweep file's text),
``tune-plan.json`` (where the file was, the repetitions, the candidates), ``runs/`` (the
``harness run`` folders, one per batch and per ``--resume``), and the report
(``tune.json``, ``tune.md``, ``front.png``). A candidate is finished when a run's report
has it ``completed`` (or ``aborted`` by the early stop); the latest run that has it wins.
``failed.json`` names the candidates that could not be run (their target did not start),
with why: infeasible, and not retried.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from harness.analysis.model import Report
from harness.core.errors import HarnessError, InputError
from harness.core.yamlread import read_text_file
from harness.report.make import make_report
from harness.results.io import WriteError, write_text_atomic
from harness.run.manifest import in_progress
from harness.tune.plan import Plan, load_plan
from harness.tune.rank import FINISHED

PLAN_SCHEMA = "harness.tune-plan/1"


@dataclass
class TuneFolder:
    path: Path
    sweep_file: Path
    repeat: int
    read_only: bool = False
    """Read without writing anything (``--report`` of a tune another process runs)."""

    @property
    def runs(self) -> Path:
        return self.path / "runs"

    @property
    def simulated(self) -> Path:
        """Where the simulator's run folders go (one per batch), apart from the real ones."""
        return self.path / "simulated"

    @classmethod
    def create(cls, results: Path, plan: Plan, repeat: int) -> TuneFolder:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = results / plan.scenario.name / f"tune-{stamp}-{secrets.token_hex(3)}"
        path.mkdir(parents=True)
        write_text_atomic(path / "sweep.yaml", plan.text)
        record = {
            "schema": PLAN_SCHEMA,
            "sweep_file": str(plan.path),
            "repeat": repeat,
            "candidates": [
                {"name": c.name, "origin": c.origin, "values": c.values, "aliases": c.aliases}
                for c in plan.candidates
            ],
        }
        write_text_atomic(path / "tune-plan.json", json.dumps(record, indent=2, default=str))
        return cls(path, plan.path, repeat)

    @classmethod
    def open(cls, path: Path) -> TuneFolder:
        """A tune folder written by ``create``; ``InputError`` when ``path`` is not one, or
        its ``tune-plan.json`` lacks a field or has one of the wrong type (said by name)."""
        record_path = path / "tune-plan.json"
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: not a tune folder ({record_path}: {exc})") from None
        if not isinstance(record, dict) or record.get("schema") != PLAN_SCHEMA:
            raise InputError(f"{record_path}: expected schema {PLAN_SCHEMA!r}")
        sweep_file = record.get("sweep_file")
        if not isinstance(sweep_file, str) or not sweep_file:
            raise InputError(
                f"{record_path}: `sweep_file`: expected the sweep file's path (text), got "
                f"{_kind(sweep_file, 'sweep_file' in record)}"
            )
        repeat = record.get("repeat")
        if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= 10:
            raise InputError(
                f"{record_path}: `repeat`: expected the repetitions, an integer 1-10, got "
                f"{_kind(repeat, 'repeat' in record)}"
            )
        return cls(path, Path(sweep_file), repeat)

    def plan(self) -> Plan:
        """The plan as it was made: the kept text, read as if at the sweep file's place (its
        builds' relative folders start there); a problem in it is said at the copy."""
        copy = self.path / "sweep.yaml"
        if not copy.is_file():
            raise InputError(
                f"{copy}: missing: a tune folder keeps the sweep file's text it ran there"
            )
        text = read_text_file(copy)
        return load_plan(self.sweep_file, self.repeat, screened=True, text=text, shown=copy)

    @property
    def refine_record(self) -> Path:
        """The refinement's selection (``refine.Selection.record``), once it was made."""
        return self.path / "refine.json"

    def refinement(self) -> dict[str, Any] | None:
        """The refinement's selection (``refine.Selection.record``), checked field by field."""
        path = self.refine_record
        if not path.is_file():
            return None
        record = _json(path, "the refinement's selection")
        if not isinstance(record, dict):
            raise InputError(
                f"{path}: expected the refinement's selection (a mapping: repeats, within, "
                f"picked, note, extra_runs), got {_kind(record)}"
            )
        for key, kind, expected in (
            ("repeats", int, "an integer, the extra rounds"),
            ("within", str, "text, the tolerance used"),
            ("picked", list, "a list of {name, why}"),
            ("note", str, "text"),
            ("extra_runs", int, "an integer"),
        ):
            value = record.get(key)
            if isinstance(value, bool) or not isinstance(value, kind):
                raise InputError(
                    f"{path}: `{key}`: expected {expected}, got {_kind(value, key in record)}"
                )
        for i, pick in enumerate(record["picked"]):
            if not isinstance(pick, dict) or not all(
                isinstance(pick.get(k), str) for k in ("name", "why")
            ):
                raise InputError(
                    f"{path}: `picked[{i}]`: expected {{name, why}} (text), got {pick!r:.80}"
                )
        return record

    @property
    def failed_record(self) -> Path:
        """Candidates that could not be run (``record_failure``): not retried by ``--resume``."""
        return self.path / "failed.json"

    def failures(self) -> dict[str, dict[str, str]]:
        """Candidate -> ``{"error", "run"}``: why it could not be run, and the run folder
        (relative) that says so."""
        path = self.failed_record
        if not path.is_file():
            return {}
        record = _json(path, "the candidates that could not be run")
        if not isinstance(record, dict):
            raise InputError(
                f"{path}: expected a mapping of candidate -> {{error, run}}, got {_kind(record)}"
            )
        for name, failed in record.items():
            if not isinstance(failed, dict) or not all(
                isinstance(failed.get(k), str) for k in ("error", "run")
            ):
                raise InputError(
                    f"{path}: `{name}`: expected {{error, run}} (text), got {failed!r:.80}"
                )
        return cast(dict[str, dict[str, str]], record)

    def record_failure(self, name: str, error: str, run_dir: Path | None) -> None:
        """``name`` could not be run (its target did not start): kept as failed, infeasible
        with ``error``, and not tried again."""
        record = self.failures()
        run = "" if run_dir is None else str(run_dir.relative_to(self.path))
        record[name] = {"error": error, "run": run}
        write_text_atomic(self.failed_record, json.dumps(record, indent=2))

    def finished(self) -> dict[str, tuple[Report, Path]]:
        """Candidate -> the report it last finished in and that run's folder."""
        return {name: runs[-1] for name, runs in self.rounds().items()}

    def rounds(self) -> dict[str, list[tuple[Report, Path]]]:
        """Candidate -> every run it finished in, oldest first (more than one when the
        refinement repeated it)."""
        found: dict[str, list[tuple[Report, Path]]] = {}
        for run_dir in sorted(self.runs.glob("*/*")):
            if not (run_dir / "manifest.json").is_file():
                continue
            report = _report(run_dir, write=not self.read_only)
            if report is None:
                continue
            for name, build in checked_report(report, run_dir / "report.json")["builds"].items():
                if build.get("status") in FINISHED:
                    found.setdefault(name, []).append((report, run_dir))
        return found


def _report(run_dir: Path, write: bool = True) -> Report | None:
    """The run's report, rendered when it has none yet (a run the tune just ran, or an
    interrupted one) or one older than its manifest (written before the run ended); a run
    still going on is read as it stands and never written into."""
    path = run_dir / "report.json"
    live = in_progress(run_dir) is not None
    if path.is_file() and not live and not _older_than_manifest(path):
        try:
            return cast(Report, json.loads(path.read_text(encoding="utf-8")))
        except ValueError:
            pass
    try:
        try:
            return make_report(run_dir, write=write and not live)
        except WriteError:  # a full disk: what it measured is read all the same
            return make_report(run_dir, write=False)
    except HarnessError:  # a run that left nothing to report on: its candidates are missing
        return None


def _older_than_manifest(report: Path) -> bool:
    try:
        return report.stat().st_mtime < (report.parent / "manifest.json").stat().st_mtime
    except OSError:
        return False


def checked_report(report: Any, path: Path) -> Report:
    """``report`` as a tune reads it (a mapping whose ``builds`` maps each build to a
    mapping of its figures); ``InputError`` naming ``path`` and the field when not."""
    if not isinstance(report, dict):
        raise InputError(
            f"{path}: expected a run's report (a mapping with `builds`), got {_kind(report)}"
        )
    builds = report.get("builds")
    if not isinstance(builds, dict):
        raise InputError(
            f"{path}: `builds`: expected a mapping of build -> its figures, got "
            f"{_kind(builds, 'builds' in report)}"
        )
    for name, build in builds.items():
        if not isinstance(build, dict):
            raise InputError(
                f"{path}: `builds.{name}`: expected a mapping of its figures, got {_kind(build)}"
            )
    return cast(Report, report)


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(f"{path}: expected JSON ({what}): {exc}") from None


def _kind(value: Any, present: bool = True) -> str:
    """What a JSON value is, for a message: ``nothing`` (absent), ``a list``, ``'x'``..."""
    if not present:
        return "nothing (the field is missing)"
    if isinstance(value, dict | list):
        return "a mapping" if isinstance(value, dict) else "a list"
    return f"{value!r:.80}"
