"""The run folder: where a run's evidence lives, written atomically and never overwritten.

::

    results/<scenario>/<UTC-timestamp>-<id>/
      manifest.json            scenario copy + hash, harness version, seed, host, status
      scenario.yaml            the scenario exactly as it was read
      <build>/samples.parquet  one row per request
      <build>/metrics.parquet  every scraped sample (t, source, series, labels, value)
      <build>/pg.parquet       every call the gateway received (its ledger)
      <build>/payments.parquet the target's own payment records
      <build>/*.log            output of the processes the build started
      report.json  report.md

``load(run_dir)`` gives it back as pandas frames for notebooks and reports.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.core.errors import InputError

if TYPE_CHECKING:
    from harness.scenario.schema import Scenario

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


def samples_from_csv(csv_path: Path) -> pd.DataFrame:
    """Read the load generator's CSV (possibly cut short by a kill) into typed columns."""
    if not csv_path.exists() or csv_path.stat().st_size == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in SAMPLE_DTYPES.items()})
    frame = pd.read_csv(csv_path, on_bad_lines="skip", keep_default_na=False, dtype=str)
    for col in ("index", "intended_start", "actual_start", "end", "status"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    # A killed writer can leave its last line cut short: keep only whole rows.
    frame = frame.dropna(subset=["index", "intended_start", "actual_start", "status"])
    for col in ("endpoint", "error", "outcome"):
        frame[col] = frame[col].fillna("")
    return frame.astype(SAMPLE_DTYPES)


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


def _empty(dtypes: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in dtypes.items()})


def ledger_from_csv(csv_path: Path) -> pd.DataFrame:
    """The gateway's ledger (one row per call it received), keeping only whole rows."""
    if not csv_path.exists() or csv_path.stat().st_size == 0:
        return _empty(LEDGER_DTYPES)
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
        return _empty(PAYMENT_DTYPES)
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        frame = pd.read_sql_query(
            "SELECT idempotency_key, amount, status, COALESCE(reason, '') AS reason,"
            " created_at, updated_at FROM payments",
            conn,
        )
    return frame.astype(PAYMENT_DTYPES)


@dataclass
class BuildResult:
    """One build's frames, as ``load`` returns them (one per repetition with ``--repeat``)."""

    name: str
    samples: pd.DataFrame
    metrics: pd.DataFrame
    info: dict[str, Any] = field(default_factory=dict)
    ledger: pd.DataFrame = field(default_factory=lambda: _empty(LEDGER_DTYPES))
    """Every call the gateway received (``pg.parquet``)."""
    payments: pd.DataFrame = field(default_factory=lambda: _empty(PAYMENT_DTYPES))
    """The target's payment records (``payments.parquet``), where the target keeps them."""

    @property
    def build(self) -> str:
        """The scenario's build name (``name`` is ``before.r2`` for repetition 2)."""
        return str(self.info.get("build", self.name))

    @property
    def repetition(self) -> int:
        return int(self.info.get("repetition", 1))

    @property
    def t0(self) -> float:
        """Unix time of the measured window's start (after warmup)."""
        if "t0" in self.info:
            return float(self.info["t0"])
        return float(self.samples["intended_start"].min()) if len(self.samples) else 0.0


@dataclass
class RunResult:
    """A run folder loaded back: manifest plus each build's frames."""

    path: Path
    manifest: dict[str, Any]
    builds: dict[str, BuildResult]

    @property
    def scenario(self) -> Scenario:
        """The scenario exactly as the run read it (its copy in the run folder)."""
        from harness.scenario.schema import load_scenario

        return load_scenario(self.path / "scenario.yaml").scenario


def latest(root: str | Path = "results", scenario: str | None = None) -> Path:
    """The newest run folder under ``root`` (optionally of one scenario)."""
    pattern = f"{scenario}/*/manifest.json" if scenario else "*/*/manifest.json"
    runs = sorted(Path(root).glob(pattern), key=lambda p: p.parent.name)
    if not runs:
        raise InputError(f"no run folders under {root}" + (f"/{scenario}" if scenario else ""))
    return runs[-1].parent


def load(run_dir: str | Path) -> RunResult:
    """Load a run folder written by ``harness run`` (for reports and notebooks)."""
    path = Path(run_dir)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{path}: not a run folder (no manifest.json)")
    manifest = json.loads(manifest_path.read_text())
    builds: dict[str, BuildResult] = {}
    for name, info in manifest.get("builds", {}).items():
        bdir = path / name
        samples_path = bdir / "samples.parquet"
        metrics_path = bdir / "metrics.parquet"
        samples = (
            pd.read_parquet(samples_path)
            if samples_path.exists()
            else samples_from_csv(bdir / "samples.csv")
        )
        metrics = (
            pd.read_parquet(metrics_path)
            if metrics_path.exists()
            else pd.DataFrame(columns=["t", "source", "series", "labels", "value"])
        )
        ledger = (
            pd.read_parquet(bdir / "pg.parquet")
            if (bdir / "pg.parquet").exists()
            else ledger_from_csv(bdir / "pg-ledger.csv")
        )
        payments = (
            pd.read_parquet(bdir / "payments.parquet")
            if (bdir / "payments.parquet").exists()
            else _empty(PAYMENT_DTYPES)
        )
        builds[name] = BuildResult(name, samples, metrics, info, ledger, payments)
    return RunResult(path, manifest, builds)
