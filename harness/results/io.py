"""Run-folder IO: where a run writes, the one writer of its files, and the live CSV logs read
into frames.

The run side writes through these and the results model reads back through
them, so a file's columns and dtypes are defined once. Every file is written
to a temporary name and renamed (a symlink is followed, and a device, a FIFO or
``/dev/stdout`` is written into, never replaced: ``results.through``), and a
failed write removes its temporary file and raises ``WriteError`` (a
``RunError``: exit 3) naming the file and why, "disk full: ..." when it is.
``RunFolder`` is a run's folder: probed before anything starts, locked while
its run lives, with a little space held back so the manifest can still say
how the run ended when the disk fills.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import platform
import secrets
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.errors import RunError
from harness.load.plan import CLASS
from harness.results.attempts import ATTEMPT_DTYPES, with_attempts
from harness.results.livecsv import read_live_csv
from harness.results.manifest import HostInfo, ManifestRecord
from harness.results.through import behind_fd, is_special, write_through

SAMPLE_DTYPES = {
    "endpoint": "string",
    "index": "int64",
    "intended_start": "float64",
    "actual_start": "float64",
    "end": "float64",
    "status": "int64",
    "error": "string",
    "outcome": "string",
}
"""``samples.parquet``'s columns every run has; it also has ``ATTEMPT_DTYPES`` (one row per
attempt: ``harness.results.attempts``), which runs before client retries lack, and ``class``
(the answer's class: ``harness.scenario.outcomes``), which runs before it lack (the
analysis then reads it from ``status`` and ``outcome``: ``harness.analysis.answers``)."""
LEDGER_DTYPES = {
    "arrival": "float64",
    "key": "string",
    "attempt": "int64",
    "phase": "string",
    "fault": "string",
    "status": "int64",
    "decision": "string",
    "duration_s": "float64",
    "client_gone": "bool",
    "path": "string",
    "method": "string",
    "route": "string",
    "queue_s": "float64",
    "service_s": "float64",
    "abandoned": "bool",
    "rejected": "bool",
}
LEDGER_OPTIONAL = ("path", "method", "route", "queue_s", "service_s", "abandoned", "rejected")
"""Columns a ledger may lack: ``path`` (written before it existed), ``method`` and ``route``
(written by a named dependency only: ``pg`` tells its two routes apart by ``path``) and a
capacity's, which only a dependency with capacity writes."""
LEDGER_WITHOUT_CAPACITY: dict[str, object] = {
    "queue_s": 0.0,
    "service_s": float("nan"),
    "abandoned": False,
    "rejected": False,
}
"""What a call had without ``pg.capacity``: no wait, no service stage (NaN: not modelled), never
kept for a client gone (``abandoned``) or refused by capacity (``rejected``)."""
LEDGER_PATH_BEFORE_COLUMN = "/v1/payments/approve"
"""The ``path`` of every row of a ledger written before the column: the gateway then served
approve calls only."""
PAYMENT_DTYPES = {
    "idempotency_key": "string",
    "amount": "int64",
    "status": "string",
    "reason": "string",
    "created_at": "float64",
    "updated_at": "float64",
}
METRICS_COLUMNS = ["t", "source", "series", "labels", "value"]
"""Columns of ``metrics.parquet`` (long format, one row per scraped sample)."""
METRICS_DTYPES = {
    "t": "float64",
    "source": "string",
    "series": "string",
    "labels": "string",
    "value": "float64",
}
"""Their kinds, as ``read_frame`` checks them."""
METRICS_LIVE = "metrics.csv"
"""The scraper's live log of ``metrics.parquet``'s rows, appended scrape by scrape."""


def harness_version() -> str:
    try:
        return version("harness")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def host_info() -> HostInfo:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class WriteError(RunError):
    """A results file could not be written (a full disk, a read-only folder, a bad path)."""

    def __init__(self, message: str, *, disk_full: bool = False) -> None:
        super().__init__(message)
        self.disk_full = disk_full


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
"""No space, no quota left, or over the process's file size limit: the disk is full for us."""


def write_error(path: Path | str, exc: OSError) -> WriteError:
    """``exc`` met while writing ``path``, said for a person: "disk full: cannot write ..."."""
    reason = exc.strerror or str(exc)
    if exc.errno in _FULL:
        return WriteError(f"disk full: cannot write {path}: {reason}", disk_full=True)
    return WriteError(f"cannot write {path}: {reason}")


def temporary_name(path: Path) -> Path:
    """Where ``path`` is written before the rename (hidden, ends in ``.tmp``)."""
    return path.with_name(f".{path.name}.tmp")


def write_file_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` then rename to ``path``: a reader never sees half a file, and a failure
    leaves no temporary file behind and raises ``WriteError``.

    What the path names is written, never replaced: a symlink is followed (its
    target renamed over, the link left), and a device or FIFO (``/dev/stdout``,
    ``/dev/null``, a named pipe) is written into; a folder is refused.
    """
    try:
        through, fd = behind_fd(path)  # /dev/stdout: the open file behind fd 1, whatever it is
        if not through:
            path = Path(os.path.realpath(path)) if path.is_symlink() else path
            through = is_special(path)
        if through:
            write_through(path, write, fd)
            return
    except OSError as exc:
        raise write_error(path, exc) from exc
    tmp = temporary_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise write_error(path, exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary name and rename, so a reader never sees half a file."""
    write_file_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_parquet_atomic(frame: pd.DataFrame, path: Path) -> None:
    write_file_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def free_bytes(path: Path) -> int:
    """Bytes we may still write on ``path``'s file system (root may use the reserved blocks)."""
    st = os.statvfs(path)
    blocks = st.f_bfree if os.geteuid() == 0 else st.f_bavail
    return blocks * st.f_frsize


def lock_dir(path: Path) -> int | None:
    """An exclusive ``flock`` on folder ``path``: its descriptor, or ``None`` if another
    process holds it. The kernel drops it when the holder dies, however it dies."""
    return _flock(os.open(path, os.O_RDONLY | os.O_DIRECTORY))


def lock_file(path: Path) -> int | None:
    """``lock_dir`` for file ``path``, made if missing, its descriptor open for writing."""
    return _flock(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))


def _flock(fd: int) -> int | None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:  # a file system without flock: the caller's other checks decide
        return fd
    return fd


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    return f"{n / 1024:.0f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"


def _cannot(root: Path, exc: OSError) -> WriteError:
    where = exc.filename or root
    return WriteError(
        f"cannot write results under {root}: {where}: {exc.strerror or exc}",
        disk_full=exc.errno in _FULL,
    )


RESERVE_NAME = ".reserve"
"""A file of ``RunFolder.RESERVE_BYTES`` a live run keeps, freed to write its last manifest."""
LOW_WATER_BYTES = 64 * 1024
"""Below this much free space the disk counts as full: the next sample or ledger row fails."""


class RunFolder:
    """A run's folder and the one way to write into it.

    ``create`` probes the results root before anything starts (a folder we can
    create, write and fill with what the run needs), so "cannot write here" is
    a ``WriteError`` (exit 3) before a process starts, never a traceback half
    way. While the run lives it holds an exclusive ``flock`` on the folder, so
    ``harness clean`` can tell a live run from one whose orchestrator died,
    and a ``.reserve`` file that ``save_manifest`` frees when the disk is full,
    so the manifest can still say why the run stopped.
    """

    RESERVE_BYTES = 256 * 1024

    def __init__(self, path: Path, lock_fd: int | None) -> None:
        self.path = path
        self._lock_fd = lock_fd
        self.reserve = path / RESERVE_NAME

    @classmethod
    def create(cls, root: Path, scenario_name: str, need_bytes: int = 0) -> RunFolder:
        """A fresh ``root/<scenario_name>/<UTC stamp>-<id>/``, locked, after probing ``root``.

        Raises ``WriteError`` when ``root`` is not a folder we can write in (a file,
        read-only, a path too long) or has less free space than ``need_bytes``.
        """
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = root / scenario_name / f"{stamp}-{secrets.token_hex(3)}"
        try:
            if root.exists() and not root.is_dir():
                raise WriteError(f"cannot write results under {root}: it is not a folder")
            path.parent.mkdir(parents=True, exist_ok=True)
            free = free_bytes(path.parent)
            if free < need_bytes + cls.RESERVE_BYTES:
                raise WriteError(
                    f"cannot write results under {root}: only {_size(free)} free, and this "
                    f"run needs about {_size(need_bytes + cls.RESERVE_BYTES)}",
                    disk_full=True,
                )
            path.mkdir()
        except OSError as exc:
            raise _cannot(root, exc) from exc
        folder = cls(path, None)
        try:
            folder._lock_fd = lock_dir(path)
            folder._hold_reserve()
        except OSError as exc:
            folder.close()
            with contextlib.suppress(OSError):
                path.rmdir()
            raise _cannot(root, exc) from exc
        return folder

    def _hold_reserve(self) -> None:
        fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                os.posix_fallocate(fd, 0, self.RESERVE_BYTES)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.write(fd, b"\0" * self.RESERVE_BYTES)  # no fallocate here: real blocks
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                self.reserve.unlink()
            raise
        os.close(fd)

    def release_reserve(self) -> bool:
        """Free the held-back space; ``True`` if there was some to free."""
        try:
            self.reserve.unlink()
        except FileNotFoundError:
            return False
        return True

    def check_space(self) -> None:
        """Raise ``WriteError`` (disk full) when the folder's disk has (almost) no space left."""
        try:
            free = free_bytes(self.path)
        except OSError as exc:
            raise write_error(self.path, exc) from exc
        if free < LOW_WATER_BYTES:
            raise WriteError(
                f"disk full: {_size(free)} left on the disk of {self.path}", disk_full=True
            )

    def disk_full(self, exc: BaseException) -> WriteError | None:
        """``exc`` (a process that died, a failed step) said as the full disk it most likely
        is when the folder's disk is (almost) full or ``exc`` says "No space left on
        device": "disk full: 12 KiB left on the disk of <folder>; <exc>". ``None``: not a
        full disk, or already said as one."""
        if not isinstance(exc, RunError) or getattr(exc, "disk_full", False):
            return None
        try:
            free: int | None = free_bytes(self.path)
        except OSError:
            free = None
        said = str(exc)
        if (free is None or free >= LOW_WATER_BYTES) and not any(
            os.strerror(code) in said for code in _FULL
        ):
            return None
        left = "" if free is None else f"{_size(free)} left "
        return WriteError(f"disk full: {left}on the disk of {self.path}; {said}", disk_full=True)

    def make_dir(self, name: str) -> Path:
        """A fresh sub-folder (a build's)."""
        path = self.path / name
        try:
            path.mkdir()
        except OSError as exc:
            raise write_error(path, exc) from exc
        return path

    def save_manifest(self, data: ManifestRecord) -> None:
        """Write ``manifest.json``; on a full disk, free the reserve and try once more."""
        try:
            write_json_atomic(self.path / "manifest.json", data)
        except WriteError as exc:
            if not (exc.disk_full and self.release_reserve()):
                raise
            write_json_atomic(self.path / "manifest.json", data)

    def close(self) -> None:
        """The run is over: give back the reserve and the lock."""
        self.release_reserve()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def new_run_dir(root: Path, scenario_name: str) -> Path:
    """Create a fresh run folder; the random suffix means two runs never share one."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = root / scenario_name / f"{stamp}-{secrets.token_hex(3)}"
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def empty_frame(dtypes: dict[str, str]) -> pd.DataFrame:
    """A frame with no rows but the right columns and dtypes (a build that recorded nothing)."""
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in dtypes.items()})


def samples_from_csv(csv_path: Path) -> pd.DataFrame:
    """Read the load generator's CSV (possibly cut short by a kill) into typed columns."""
    if not csv_path.exists() or csv_path.stat().st_size == 0:
        return empty_frame({**SAMPLE_DTYPES, **ATTEMPT_DTYPES})
    frame = read_live_csv(csv_path)
    for col in ("index", "intended_start", "actual_start", "end", "status", *ATTEMPT_DTYPES):
        if col in frame.columns:
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    # A killed writer can leave its last line cut short: keep only whole rows.
    whole = ["index", "intended_start", "actual_start", "status"]
    frame = with_attempts(frame.dropna(subset=whole + [c for c in ATTEMPT_DTYPES if c in frame]))
    for col in ("endpoint", "error", "outcome"):
        frame[col] = frame[col].fillna("")
    if CLASS in frame.columns:  # written since answers are classed: "" for a dropped arrival
        frame[CLASS] = frame[CLASS].fillna("").astype("string")
    return frame.astype({**SAMPLE_DTYPES, **ATTEMPT_DTYPES})


WORKER_COLUMN = "worker"
"""Added to ``samples.parquet``: which Locust worker sent the request (0 for a single process)."""


def live_sample_files(build_dir: Path) -> dict[int, Path]:
    """A build's live sample logs by worker: ``samples.csv`` (a single Locust process, worker
    0) or ``samples.<k>.csv`` (worker k of a distributed load)."""
    found = {0: build_dir / "samples.csv"} if (build_dir / "samples.csv").exists() else {}
    for path in build_dir.glob("samples.*.csv"):
        k = path.name.removeprefix("samples.").removesuffix(".csv")
        if k.isdigit():
            found[int(k)] = path
    return dict(sorted(found.items()))


def merged_samples(build_dir: Path) -> pd.DataFrame:
    """Every worker's samples in one frame with a ``worker`` column, by intended start."""
    frames = [
        samples_from_csv(path).assign(**{WORKER_COLUMN: k})
        for k, path in live_sample_files(build_dir).items()
    ]
    if not frames:
        return empty_frame({**SAMPLE_DTYPES, **ATTEMPT_DTYPES, WORKER_COLUMN: "int64"})
    if len(frames) == 1:
        merged = frames[0]
    else:
        merged = pd.concat(frames, ignore_index=True)
        merged = merged.sort_values("intended_start", kind="stable", ignore_index=True)
    return merged.astype({WORKER_COLUMN: "int64"})


def ledger_from_csv(csv_path: Path) -> pd.DataFrame:
    """The gateway's ledger (one row per call it received), keeping only whole rows.

    A ledger written before the ``path`` column reads with every row's path the
    approve route's (``LEDGER_PATH_BEFORE_COLUMN``), the only one it served.
    """
    if not csv_path.exists() or csv_path.stat().st_size == 0:
        return empty_frame(LEDGER_DTYPES)
    frame = read_live_csv(csv_path)
    if "route" in frame.columns:  # a row cut short lacks its last column (a route has a name)
        frame = frame[frame["route"].fillna("") != ""].copy()
    if "path" in frame.columns:  # a row cut short lacks its last column (every path has a "/")
        frame = frame[frame["path"].fillna("") != ""].copy()
    else:
        frame["path"] = LEDGER_PATH_BEFORE_COLUMN
    capacity = "rejected" in frame.columns
    if capacity:  # a row cut short lacks its last column
        frame = frame[frame["rejected"].fillna("") != ""].copy()
    for col in ("arrival", "attempt", "status", "duration_s"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    frame = frame.dropna(subset=["arrival", "attempt", "status"])
    frame["duration_s"] = frame["duration_s"].astype(float)
    for col in ("client_gone", "abandoned", "rejected") if capacity else ("client_gone",):
        frame[col] = frame[col].str.lower().isin(("true", "1"))
    if capacity:
        for col in ("queue_s", "service_s"):
            frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return with_ledger_defaults(frame)[list(LEDGER_DTYPES)].astype(LEDGER_DTYPES)


def with_ledger_defaults(frame: pd.DataFrame) -> pd.DataFrame:
    """A ledger with every column of ``LEDGER_DTYPES``: those it lacks filled as a gateway
    without ``pg.capacity`` would (``LEDGER_WITHOUT_CAPACITY``); the others as they are."""
    missing = {
        col: pd.Series(value, index=frame.index, dtype=LEDGER_DTYPES[col])
        for col, value in {
            "path": LEDGER_PATH_BEFORE_COLUMN,
            "method": "",
            "route": "",
            **LEDGER_WITHOUT_CAPACITY,
        }.items()
        if col not in frame.columns
    }
    return frame.assign(**missing) if missing else frame


def metrics_from_csv(csv_path: Path) -> pd.DataFrame:
    """The scraper's live log (``metrics.csv``), keeping only whole rows."""
    if not csv_path.exists() or csv_path.stat().st_size == 0:
        return pd.DataFrame({col: [] for col in METRICS_COLUMNS}).astype(
            {"t": "float64", "value": "float64"}
        )
    frame = read_live_csv(csv_path)
    for col in ("t", "value"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    frame = frame.dropna(subset=["t", "value"])  # a killed writer's last line cut short
    return frame[METRICS_COLUMNS].reset_index(drop=True)


def keep_live_logs(build_dir: Path) -> dict[str, int]:
    """Turn a build's live CSV logs into Parquet (``samples.parquet``, ``pg.parquet``, and
    ``metrics.parquet`` when the scraper did not write it: a killed run).

    What the load generator and the gateway appended while the build ran, cut
    short or not; returns the row counts as the manifest records them.
    """
    if (build_dir / METRICS_LIVE).exists() and not (build_dir / "metrics.parquet").exists():
        metrics = metrics_from_csv(build_dir / METRICS_LIVE)
        write_parquet_atomic(metrics, build_dir / "metrics.parquet")
    samples = merged_samples(build_dir)
    write_parquet_atomic(samples, build_dir / "samples.parquet")
    ledger = ledger_from_csv(build_dir / "pg-ledger.csv")
    write_parquet_atomic(ledger, build_dir / "pg.parquet")
    kept = {"samples": len(samples), "pg_calls": len(ledger)}
    for name, csv_path in dependency_ledgers(build_dir).items():
        calls = ledger_from_csv(csv_path)
        write_parquet_atomic(calls, build_dir / f"{DEPENDENCY_PREFIX}{name}.parquet")
        kept[f"{DEPENDENCY_PREFIX}{name}"] = len(calls)
    return kept


DEPENDENCY_PREFIX = "dep-"
"""A named dependency's files in a build's folder: ``dep-NAME-ledger.csv`` while it runs,
``dep-NAME.parquet`` after (``pg``'s are ``pg-ledger.csv`` and ``pg.parquet``)."""


def dependency_calls(kept: dict[str, int]) -> dict[str, int]:
    """The calls each named dependency's ledger kept, by name, from ``keep_live_logs``'s counts
    (the manifest's ``dependency_calls``)."""
    prefix = DEPENDENCY_PREFIX
    return {k[len(prefix) :]: n for k, n in kept.items() if k.startswith(prefix)}


def dependency_ledgers(build_dir: Path) -> dict[str, Path]:
    """The named dependencies' live ledgers in a build's folder, by dependency name."""
    return {
        path.name[len(DEPENDENCY_PREFIX) : -len("-ledger.csv")]: path
        for path in sorted(build_dir.glob(f"{DEPENDENCY_PREFIX}*-ledger.csv"))
    }


def payments_from_sqlite(db_path: Path) -> pd.DataFrame:
    """The reference target's own payment records, read once it has stopped (off the hot path)."""
    import sqlite3

    if not db_path.exists():
        return empty_frame(PAYMENT_DTYPES)
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        frame = pd.read_sql_query(
            "SELECT idempotency_key, amount, status, COALESCE(reason, '') AS reason,"
            " created_at, updated_at FROM payments",
            conn,
        )
    return frame.astype(PAYMENT_DTYPES)
