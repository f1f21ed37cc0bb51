"""The run folder read back: a typed run and build model over pandas frames.

::

    results/<scenario>/<UTC-timestamp>-<id>/
      manifest.json            scenario copy + hash, harness version, seed, host, status
      scenario.yaml            the scenario exactly as it was read
      <build>/samples.parquet  one row per attempt (a request retried has several)
      <build>/metrics.parquet  every scraped sample (t, source, series, labels, value)
      <build>/pg.parquet       every call the gateway received (its ledger)
      <build>/payments.parquet the target's own payment records
      <build>/*.log            output of the processes the build started
      report.json  report.md

``load(run_dir)`` gives it back as pandas frames for notebooks and reports.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.core.errors import InputError
from harness.results.attempts import ATTEMPT_DTYPES, requests_of, with_attempts
from harness.results.io import (
    DEPENDENCY_PREFIX,
    LEDGER_DTYPES,
    LEDGER_OPTIONAL,
    METRICS_COLUMNS,
    METRICS_DTYPES,
    METRICS_LIVE,
    PAYMENT_DTYPES,
    SAMPLE_DTYPES,
    dependency_ledgers,
    empty_frame,
    ledger_from_csv,
    live_sample_files,
    merged_samples,
    metrics_from_csv,
    with_ledger_defaults,
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
    dependencies: dict[str, pd.DataFrame] = field(default_factory=dict)
    """Every call each named dependency received (``dep-NAME.parquet``), by name."""
    warmup_s: float = 0.0
    """The scenario's warmup; only used to infer ``t0`` when the manifest lacks it."""

    def __post_init__(self) -> None:
        self.info = build_record(self.name, self.info)
        self.samples = with_attempts(self.samples)

    @functools.cached_property
    def requests(self) -> pd.DataFrame:
        """One row per request (``results.attempts.requests_of``): what endpoint figures and
        charts read; ``samples`` is one row per attempt."""
        return requests_of(self.samples)

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


def _kind_fits(dtype: Any, wanted: str) -> bool:
    """A column read back has the kind of values its file was written with."""
    if wanted == "string":
        return bool(pd.api.types.is_string_dtype(dtype))  # object too: an older writer's
    if wanted == "bool":
        return bool(pd.api.types.is_bool_dtype(dtype))
    return bool(pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype))


def dependency_frames(build_dir: Path) -> dict[str, pd.DataFrame]:
    """Every named dependency's ledger in a build's folder: its Parquet file, or the live CSV a
    run that did not finish left."""
    found = {
        path.name[len(DEPENDENCY_PREFIX) : -len(".parquet")]: with_ledger_defaults(
            read_frame(path, LEDGER_DTYPES, optional=LEDGER_OPTIONAL)
        )
        for path in sorted(build_dir.glob(f"{DEPENDENCY_PREFIX}*.parquet"))
    }
    for name, csv_path in dependency_ledgers(build_dir).items():
        if name not in found:
            found[name] = ledger_from_csv(csv_path)
    return found


def read_frame(path: Path, dtypes: dict[str, str], optional: tuple[str, ...] = ()) -> pd.DataFrame:
    """A run's Parquet file, checked: one cut short, empty, or of other columns or types
    (not this file of a run) is an ``InputError`` naming it, not a traceback later."""
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        reason = (
            str(exc).split(". ")[0].removeprefix(f"Could not open Parquet input source '{path}': ")
        )
        raise InputError(
            f"{path}: not a Parquet file ({reason}): cut short or overwritten; the run "
            "folder is damaged"
        ) from None
    missing = [c for c in dtypes if c not in frame.columns and c not in optional]
    if missing:
        raise InputError(
            f"{path}: no column(s) {', '.join(missing)} (it has "
            f"{', '.join(map(str, frame.columns))}): not this file of a run"
        )
    wrong = [
        f"{c} holds {frame[c].dtype}, not {d}"
        for c, d in dtypes.items()
        if c in frame.columns and len(frame) and not _kind_fits(frame[c].dtype, d)
    ]
    if wrong:
        raise InputError(f"{path}: {'; '.join(wrong)}: not this file of a run")
    return frame


def _check_samples_kept(bdir: Path, info: BuildRecord) -> None:
    """A build whose manifest counts samples has them: a folder or file gone since is
    damage, and a report made without them would silently drop the build."""
    recorded = info.get("samples", 0)
    if not recorded or (bdir / "samples.parquet").exists() or live_sample_files(bdir):
        return
    gone = bdir if not bdir.is_dir() else bdir / "samples.parquet"
    raise InputError(
        f"{gone}: missing, and the manifest says build {bdir.name!r} recorded {recorded} "
        "samples: the run folder is damaged (restore the file; report.json is not rewritten)"
    )


def _warmup_s(run: RunResult) -> float:
    """The run's warmup, read from its scenario copy only when some build needs it for ``t0``."""
    needed = any("t0" not in b.info for b in run.builds.values())
    if not needed or not (run.path / "scenario.yaml").exists():
        return 0.0
    return run.scenario.warmup


def load(run_dir: str | Path) -> RunResult:
    """Load a run folder written by ``harness run`` (for reports and notebooks).

    A folder that is not whole is an ``InputError`` naming the file: a build's
    folder or samples gone that the manifest says it recorded, a Parquet file cut
    short, empty or of other columns (``read_frame``).
    """
    path = Path(run_dir)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
        raise InputError(f"{path}: not a run folder (no manifest.json)")
    manifest = read_manifest(manifest_path)
    builds = {
        name: load_build(path / name, name, info) for name, info in manifest["builds"].items()
    }
    run = RunResult(path, manifest, builds)
    warmup_s = _warmup_s(run)
    for build in builds.values():
        build.warmup_s = warmup_s
    return run


def load_build(bdir: Path, name: str, info: BuildRecord) -> BuildResult:
    """One build's frames from its folder: its Parquet files, or the live CSVs a run that
    did not finish left (``warmup_s`` is the caller's to set)."""
    _check_samples_kept(bdir, info)
    samples_path = bdir / "samples.parquet"
    metrics_path = bdir / "metrics.parquet"
    samples = (
        read_frame(
            samples_path, {**SAMPLE_DTYPES, **ATTEMPT_DTYPES}, optional=tuple(ATTEMPT_DTYPES)
        )
        if samples_path.exists()
        else merged_samples(bdir)
    )
    metrics = (
        read_frame(metrics_path, METRICS_DTYPES)
        if metrics_path.exists()
        else pd.DataFrame(columns=METRICS_COLUMNS)
    )
    ledger = (
        with_ledger_defaults(
            read_frame(bdir / "pg.parquet", LEDGER_DTYPES, optional=LEDGER_OPTIONAL)
        )
        if (bdir / "pg.parquet").exists()
        else ledger_from_csv(bdir / "pg-ledger.csv")
    )
    payments = (
        read_frame(bdir / "payments.parquet", PAYMENT_DTYPES)
        if (bdir / "payments.parquet").exists()
        else empty_frame(PAYMENT_DTYPES)
    )
    return BuildResult(
        name, samples, metrics, info, ledger, payments, dependencies=dependency_frames(bdir)
    )


def live_build(bdir: Path, name: str, info: BuildRecord) -> BuildResult:
    """A build still running, as far as it got: its live CSVs read as ``harness clean``
    reads them (whole rows only), the target's own records not yet collected."""
    return BuildResult(
        name,
        merged_samples(bdir),
        metrics_from_csv(bdir / METRICS_LIVE),
        info,
        ledger_from_csv(bdir / "pg-ledger.csv"),
        dependencies=dependency_frames(bdir),
    )
