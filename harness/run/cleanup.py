"""Finishing runs that did not finish: what ``harness clean`` and the start of ``harness run`` do.

A run whose orchestrator was killed (``kill -9``, the OOM killer, a CI runner
cancelling a job) leaves its manifest at ``running`` and its builds' live
CSV logs unconverted; its processes die with it (``orphan_guard``). Here such
a run is found and closed: its manifest says ``crashed`` (with ``ended_at``,
the last time it wrote anything), each unfinished build's ``samples.csv`` and
``pg-ledger.csv`` become ``samples.parquet`` and ``pg.parquet``, the target's
own records are collected, the scraper's live ``metrics.csv`` becomes
``metrics.parquet``, and what the crash left lying (temporary files, the disk
reserve) is removed, so ``harness report`` reads it like any other.

A run is closed only when nothing can still be writing it: its folder's lock
(held by a live orchestrator, dropped by the kernel at its death) is free,
and the process its manifest names (pid, boot and start time, so a recycled
pid is not mistaken for it) is gone. Runs of another host, or written by a
harness that did not record its orchestrator, are left alone and said so.
A run that ended (failed, say on a full disk) with its CSVs unconverted gets
them converted too, its status untouched.

A tune's runs (``<scenario>/tune-<id>/runs/``) are closed the same way, and a tune whose
``harness tune`` died (its ``tune.lock`` free and still saying ``running``, its process
gone: ``harness.run.tunelock``) is marked ``crashed`` there, with how to resume it.

Outside the folder. A kind of build may leave something a crash does not
stop (a ``docker`` build's container, when its runner was killed too): its
``Leftovers`` (``harness.run.targets``). A crashed run it closes has those of
its builds' kinds removed first; ``clean_results`` with ``leftovers`` also has
every kind remove what runs that are over left, wherever their results are
(``harness.run.kinds.docker.cleanup`` for containers).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.core.errors import HarnessError, RunError
from harness.results.io import (
    RESERVE_NAME,
    dependency_calls,
    keep_live_logs,
    live_sample_files,
    lock_dir,
    utc_now,
    write_json_atomic,
)
from harness.results.manifest import ManifestRecord, read_manifest
from harness.run.kinds.registry import all_leftovers, leftovers_named, target_for
from harness.run.manifest import identity_alive
from harness.run.processes import processes_by_run, stop_leftovers
from harness.run.targets import Leftovers
from harness.run.tunelock import LOCK_NAME, TuneLock, holder, read_record
from harness.scenario.loader import load_scenario


@dataclass(frozen=True)
class Closed:
    """One run folder that was finished: its status now and what was done."""

    run_dir: Path
    status: str
    done: list[str]


@dataclass
class CleanReport:
    """What a clean found: runs closed, runs left alone (and why), runs it could not close."""

    closed: list[Closed] = field(default_factory=list)
    left: list[tuple[Path, str]] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    """What runs that are over left outside their folders, removed:
    ``container <name> (run <id>)``."""
    stopped: list[str] = field(default_factory=list)
    """Processes runs that are over left running, stopped: ``N process(es) of run <id> ...``."""
    leftover_problems: list[str] = field(default_factory=list)
    """Why such leftovers could not be looked for or removed (``containers: ...``)."""


def run_dirs(root: Path) -> list[Path]:
    """Run folders under a results root (``<scenario>/<run>/manifest.json``, and a tune's,
    ``<scenario>/tune-<id>/runs/<scenario>/<run>/``), oldest first."""
    try:
        if not root.is_dir():
            return []
        found = list(root.glob("*/*/manifest.json"))
        found += root.glob("*/tune-*/runs/*/*/manifest.json")
    except OSError:  # a path too long, say: nothing of ours can be there
        return []
    return sorted((p.parent for p in found), key=lambda p: p.name)


def tune_dirs(root: Path) -> list[Path]:
    """Tune folders under a results root that have a lock (``harness.run.tunelock``)."""
    try:
        return sorted(p.parent for p in root.glob(f"*/tune-*/{LOCK_NAME}"))
    except OSError:
        return []


def clean_results(root: Path, leftovers: bool | Sequence[Leftovers] = False) -> CleanReport:
    """Close every run under ``root`` that a dead orchestrator left open (see the module).

    What a crashed run it closes left outside its folder (containers) is removed with
    it; with ``leftovers``, also what every run that is over left, wherever its results
    are (see the module): ``True`` for every kind's, or those of the kinds given (the
    start of a run: its builds' kinds only).
    """
    report = CleanReport()
    for run_dir in run_dirs(root):
        try:
            _clean_run(run_dir, report)
        except (HarnessError, OSError, ValueError) as exc:
            report.failed.append((run_dir, str(exc)))
    for tune_dir in tune_dirs(root):  # after their runs: a killed tune's are closed
        _clean_tune(tune_dir, report)
    stop_processes_of_ended_runs(root, report)
    if leftovers:
        remove_leftovers(report, None if leftovers is True else leftovers)
    return report


def stop_processes_of_ended_runs(root: Path, report: CleanReport) -> None:
    """Stop what runs under ``root`` that are over left running (a process that left its
    build's process group, ``setsid``, as a daemon does), found by ``HARNESS_RUN_ID``."""
    running = processes_by_run()
    if not running:
        return
    for run_dir in run_dirs(root):
        try:
            manifest = read_manifest(run_dir / "manifest.json")
        except (HarnessError, OSError, ValueError):
            continue  # said by the closing pass above, or not a run of ours
        run_id = manifest.get("run_id")
        if run_id not in running or manifest.get("status") == "running":
            continue  # nothing of it runs, or it is live (or left alone above)
        try:
            stopped = stop_leftovers(run_id, grace_s=1.0)
        except RunError as exc:
            report.leftover_problems.append(f"processes: {run_dir}: {exc}")
            continue
        if stopped:
            report.stopped.append(
                f"{len(stopped)} process(es) of run {run_id} (pids {', '.join(map(str, stopped))})"
            )


def remove_leftovers(report: CleanReport, only: Sequence[Leftovers] | None = None) -> None:
    """Have every kind (or ``only`` these) remove what runs that are over left outside
    their folders."""
    for leftovers in all_leftovers() if only is None else only:
        removed, problems = leftovers.remove_of_ended_runs()
        report.leftovers += removed
        report.leftover_problems += [f"{leftovers.noun}: {p}" for p in problems]


def _unfinished_builds(run_dir: Path, manifest: ManifestRecord) -> list[str]:
    """Builds whose live samples were never turned into Parquet."""
    return [
        key
        for key, info in manifest["builds"].items()
        if info.get("status") == "running"
        or (
            bool(live_sample_files(run_dir / key))
            and not (run_dir / key / "samples.parquet").exists()
        )
    ]


def _clean_run(run_dir: Path, report: CleanReport) -> None:
    # The typed reader: a build key that is not a name (``../../outside``) is refused
    # before anything is written under it.
    manifest_path = run_dir / "manifest.json"
    manifest = read_manifest(manifest_path)
    status = manifest.get("status")
    if status != "running" and not _unfinished_builds(run_dir, manifest):
        return  # the common case, decided without taking any lock
    lock = lock_dir(run_dir)
    if lock is None:
        if status == "running":
            report.left.append((run_dir, "still running"))
        return
    try:
        manifest = read_manifest(manifest_path)  # as it is now that we hold the lock
        status = manifest.get("status")
        if status == "running":
            why_not = _why_still_open(manifest)
            if why_not is not None:
                report.left.append((run_dir, why_not))
                return
        done = _close(run_dir, manifest, report)
        if done:
            report.closed.append(Closed(run_dir, str(manifest.get("status")), done))
    finally:
        os.close(lock)


def _clean_tune(tune_dir: Path, report: CleanReport) -> None:
    """Mark ``crashed`` a tune whose ``harness tune`` died (its lock free, its record still
    ``running``, its process gone), as a killed run is; a live one is left alone."""
    record = read_record(tune_dir)
    if record is None or record.get("status") != "running":
        return  # the common case, decided without taking the lock
    lock = TuneLock.take(tune_dir)
    if lock is None:
        report.left.append((tune_dir, f"tune still running ({holder(record)})"))
        return
    try:
        record = lock.record()
        orchestrator = (record or {}).get("orchestrator")
        if record is None or record.get("status") != "running":
            return
        if isinstance(orchestrator, dict) and identity_alive(orchestrator):
            report.left.append((tune_dir, f"tune still running ({holder(record)})"))
            return
        pid = orchestrator.get("pid") if isinstance(orchestrator, dict) else None
        lock.end(
            "crashed",
            f"its harness tune (pid {pid}) died without ending the tune (closed at {utc_now()})",
        )
        done = [
            f"marked crashed (its harness tune, pid {pid}, died); `harness tune --resume "
            f"{tune_dir}` runs what it did not finish"
        ]
        report.closed.append(Closed(tune_dir, "crashed", done))
    finally:
        lock.close()


def _why_still_open(manifest: ManifestRecord) -> str | None:
    """Why a ``running`` run must be left alone, or ``None`` when its orchestrator is gone."""
    host = manifest.get("host", {}).get("hostname")
    if host is not None and host != socket.gethostname():
        return f"running on another host ({host})"
    orchestrator = manifest.get("orchestrator")
    if not isinstance(orchestrator, dict):
        return "its manifest does not name its orchestrator (written by an older harness)"
    if identity_alive(orchestrator):
        return "still running"
    return None


def _last_write(run_dir: Path) -> str:
    """When the run last wrote anything: as near to its death as the folder tells."""
    latest = max((p.stat().st_mtime for p in run_dir.rglob("*") if p.is_file()), default=None)
    if latest is None:
        return utc_now()
    return datetime.fromtimestamp(latest, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _close(run_dir: Path, manifest: ManifestRecord, report: CleanReport) -> list[str]:
    """Finish what the run left; write its manifest; say what was done."""
    done: list[str] = []
    crashed = manifest.get("status") == "running"
    ended_at = _last_write(run_dir)
    builds = manifest["builds"]
    if crashed:
        # Outside the folder first: stop_leftovers would only kill what runs in them.
        run_id = str(manifest.get("run_id", run_dir.name))
        for leftovers in leftovers_named(info.get("kind") for info in builds.values()):
            try:
                done += leftovers.remove_of_run(run_id)
            except RunError as exc:
                report.leftover_problems.append(f"{leftovers.noun}: {run_dir}: {exc}")
        stopped = stop_leftovers(run_id)
        if stopped:
            done.append(f"stopped {len(stopped)} leftover process(es)")
    scenario = None
    with contextlib.suppress(HarnessError, OSError):
        scenario = load_scenario(run_dir / "scenario.yaml").scenario
    for key in _unfinished_builds(run_dir, manifest):
        info = manifest["builds"][key]
        if info.get("status") == "running":
            info["status"] = "crashed"
            info["ended_at"] = ended_at
        bdir = run_dir / key
        if not bdir.is_dir():
            continue
        kept = keep_live_logs(bdir)
        info["samples"], info["pg_calls"] = kept["samples"], kept["pg_calls"]
        if named := dependency_calls(kept):
            info["dependency_calls"] = named
        done.append(f"{key}: {info['samples']} samples, {info['pg_calls']} gateway calls kept")
        build = scenario.builds.get(info["build"]) if scenario else None
        if build is not None:
            try:
                target_for(build).collect(bdir)
            except Exception as exc:  # whatever a crash left of them: the samples are kept
                info["save_error"] = f"the target's records: {type(exc).__name__}: {exc}"
    for leftover in [run_dir / RESERVE_NAME, *run_dir.rglob("*.tmp")]:
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    if crashed:
        orchestrator = manifest.get("orchestrator")
        pid = orchestrator["pid"] if orchestrator is not None else None
        manifest["status"] = "crashed"
        manifest["ended_at"] = ended_at
        manifest["error"] = (
            f"the orchestrator (pid {pid}) died without closing the run (closed at {utc_now()})"
        )
        done.insert(0, "marked crashed")
    if done:
        write_json_atomic(run_dir / "manifest.json", manifest)
    return done
