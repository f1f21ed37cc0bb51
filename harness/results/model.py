"""The run folder read back: a typed run and build model over pandas frames.

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from harness.core.errors import InputError
from harness.results.io import (
    LEDGER_DTYPES,
    METRICS_COLUMNS,
    PAYMENT_DTYPES,
    empty_frame,
    ledger_from_csv,
    merged_samples,
)
from harness.results.manifest import BuildRecord, ManifestRecord, build_record, read_manifest

if TYPE_CHECKING:
    from harness.scenario.schema import Scenario


@dataclass
class BuildResult:
    """One build's frames, as ``load`` returns them (one per repetition with ``--repeat``)."""

    name: str
    samples: pd.DataFrame
    metrics: pd.DataFrame
    info: BuildRecord = field(default_factory=lambda: build_record("", {}))
    """The build's manifest record; one given with keys missing gets their defaults
    (``results.manifest.start_defaults``), as a manifest read back does."""
    ledger: pd.DataFrame = field(default_factory=lambda: empty_frame(LEDGER_DTYPES))
    """Every call the gateway received (``pg.parquet``)."""
    payments: pd.DataFrame = field(default_factory=lambda: empty_frame(PAYMENT_DTYPES))
    """The target's payment records (``payments.parquet``), where the target keeps them."""
    warmup_s: float = 0.0
    """The scenario's warmup; only used to infer ``t0`` when the manifest lacks it."""

    def __post_init__(self) -> None:
        self.info = build_record(self.name, self.info)

    @property
    def build(self) -> str:
        """The scenario's build name (``name`` is ``before.r2`` for repetition 2)."""
        return self.info["build"]

    @property
    def repetition(self) -> int:
        return self.info["repetition"]

    @property
    def preset(self) -> str:
        """The metrics preset the manifest names (``analysis.series.preset_for`` reads it, with
        ``metrics_map`` and ``breaker``)."""
        return self.info["preset"]

    @property
    def t0(self) -> float:
        """Unix time of the measured window's start (after warmup): every figure and chart's zero.

        The manifest records it once the load starts. Without it (a build that
        stopped before its load, a folder written by hand), it is the load's
        start plus warmup: ``load_start`` if recorded, else the first intended
        start (the schedule's first request is intended at the load's start),
        else the first scrape; 0 when there is nothing at all.
        """
        recorded = self.info.get("t0")
        if recorded is not None:
            return recorded
        load_start = self.info.get("load_start")
        if load_start is None and len(self.samples):
            load_start = float(self.samples["intended_start"].min())
        if load_start is None and len(self.metrics):
            load_start = float(self.metrics["t"].min())
        return 0.0 if load_start is None else load_start + self.warmup_s


@dataclass
class RunResult:
    """A run folder loaded back: manifest plus each build's frames."""

    path: Path
    manifest: ManifestRecord
    builds: dict[str, BuildResult]

    @property
    def scenario(self) -> Scenario:
        """The scenario exactly as the run read it (its copy in the run folder)."""
        from harness.scenario.loader import load_scenario

        return load_scenario(self.path / "scenario.yaml").scenario


def latest(root: str | Path = "results", scenario: str | None = None) -> Path:
    """The newest run folder under ``root`` (optionally of one scenario)."""
    pattern = f"{scenario}/*/manifest.json" if scenario else "*/*/manifest.json"
    runs = sorted(Path(root).glob(pattern), key=lambda p: p.parent.name)
    if not runs:
        raise InputError(f"no run folders under {root}" + (f"/{scenario}" if scenario else ""))
    return runs[-1].parent


def _warmup_s(run: RunResult) -> float:
    """The run's warmup, read from its scenario copy only when some build needs it for ``t0``."""
    needed = any("t0" not in b.info for b in run.builds.values())
    if not needed or not (run.path / "scenario.yaml").exists():
        return 0.0
    return run.scenario.warmup


def load(run_dir: str | Path) -> RunResult:
    """Load a run folder written by ``harness run`` (for reports and notebooks)."""
    path = Path(run_dir)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{path}: not a run folder (no manifest.json)")
    manifest = read_manifest(manifest_path)
    builds: dict[str, BuildResult] = {}
    for name, info in manifest["builds"].items():
        bdir = path / name
        samples_path = bdir / "samples.parquet"
        metrics_path = bdir / "metrics.parquet"
        samples = pd.read_parquet(samples_path) if samples_path.exists() else merged_samples(bdir)
        metrics = (
            pd.read_parquet(metrics_path)
            if metrics_path.exists()
            else pd.DataFrame(columns=METRICS_COLUMNS)
        )
        ledger = (
            pd.read_parquet(bdir / "pg.parquet")
            if (bdir / "pg.parquet").exists()
            else ledger_from_csv(bdir / "pg-ledger.csv")
        )
        payments = (
            pd.read_parquet(bdir / "payments.parquet")
            if (bdir / "payments.parquet").exists()
            else empty_frame(PAYMENT_DTYPES)
        )
        builds[name] = BuildResult(name, samples, metrics, info, ledger, payments)
    run = RunResult(path, manifest, builds)
    warmup_s = _warmup_s(run)
    for build in builds.values():
        build.warmup_s = warmup_s
    return run
