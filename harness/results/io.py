"""Run-folder IO: where a run writes, atomic writers, and the live CSV logs read into frames.

The run side writes through these and the results model reads back through
them, so a file's columns and dtypes are defined once.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import socket
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pandas as pd

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
}
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


def harness_version() -> str:
    try:
        return version("harness")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def host_info() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def new_run_dir(root: Path, scenario_name: str) -> Path:
    """Create a fresh run folder; the random suffix means two runs never share one."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = root / scenario_name / f"{stamp}-{secrets.token_hex(3)}"
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary name and rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def write_parquet_atomic(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)


def empty_frame(dtypes: dict[str, str]) -> pd.DataFrame:
    """A frame with no rows but the right columns and dtypes (a build that recorded nothing)."""
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in dtypes.items()})


def samples_from_csv(csv_path: Path) -> pd.DataFrame:
    """Read the load generator's CSV (possibly cut short by a kill) into typed columns."""
    if not csv_path.exists() or csv_path.stat().st_size == 0:
        return empty_frame(SAMPLE_DTYPES)
    frame = pd.read_csv(csv_path, on_bad_lines="skip", keep_default_na=False, dtype=str)
    for col in ("index", "intended_start", "actual_start", "end", "status"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    # A killed writer can leave its last line cut short: keep only whole rows.
    frame = frame.dropna(subset=["index", "intended_start", "actual_start", "status"])
    for col in ("endpoint", "error", "outcome"):
        frame[col] = frame[col].fillna("")
    return frame.astype(SAMPLE_DTYPES)


def ledger_from_csv(csv_path: Path) -> pd.DataFrame:
    """The gateway's ledger (one row per call it received), keeping only whole rows."""
    if not csv_path.exists() or csv_path.stat().st_size == 0:
        return empty_frame(LEDGER_DTYPES)
    frame = pd.read_csv(csv_path, on_bad_lines="skip", keep_default_na=False, dtype=str)
    for col in ("arrival", "attempt", "status", "duration_s"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    frame = frame.dropna(subset=["arrival", "attempt", "status"])
    frame["duration_s"] = frame["duration_s"].astype(float)
    frame["client_gone"] = frame["client_gone"].str.lower().isin(("true", "1"))
    return frame[list(LEDGER_DTYPES)].astype(LEDGER_DTYPES)


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
