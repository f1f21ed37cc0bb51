"""Benchmark: analyse a run of 1,000,000 samples (target: under 5 s on this machine).

Builds a synthetic run folder in a temporary directory (two builds x 500,000
samples, two endpoints, a metrics.parquet of a few thousand scrape rows per
build, manifest.json and scenario.yaml), then times, 3 times each, median
reported:

  harness   ``harness.report.make_report(run_dir)``: load, analyse, write the report
            (and, if it has a ``charts`` switch, once more with ``charts=False``)
  analyse   ``harness.analysis.figures.analyse(load(run_dir), scenario)`` alone (no files written)
  load      ``harness.results.load(run_dir)`` alone
  reference the bare cost: read the same parquet columns with pyarrow and compute the
            same percentiles (latency and service time per build and endpoint) with numpy

Run: ``.venv/bin/python benchmarks/analysis_1m.py`` (``--samples N`` for another size,
``--keep`` to keep the run folder). Always exits 0: it measures, it does not judge.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.analysis.figures import analyse
from harness.report.make import make_report
from harness.results.io import SAMPLE_DTYPES
from harness.results.model import load
from harness.scenario.loader import load_scenario

TARGET_S = 5.0
REPEAT = 3
RATES = {"payments": 70.0, "products": 30.0}  # requests/s; 100/s in all
WARMUP_S = 10.0
SCRAPE_S = 10.0
WORKERS = 200

SCENARIO = """\
name: bench-1m
description: synthetic run for benchmarks/analysis_1m.py
seed: 1
warmup: {warmup:g}s
duration: {duration:g}s
metrics: {{interval: {scrape:g}s}}
traffic:
  payments: {{method: POST, path: /api/payments, rate: {payments:g}, timeout: 30s,
             body: {{amount: 15000}}, idempotency-key: true, calls-gateway: true}}
  products: {{path: "/api/products/{{id}}", params: {{id: [1, 1000]}}, rate: {products:g},
             timeout: 30s}}
pg:
  phases:
    - {{name: baseline, start: 0s, duration: {b_end:g}s, fault: {{type: healthy}}}}
    - {{name: outage, start: {b_end:g}s, duration: {outage:g}s, fault: {{type: timeout}}}}
    - {{name: recovery, start: {o_end:g}s, duration: {recovery:g}s, fault: {{type: healthy}}}}
builds:
  before:
    profile: retry-only
    workers: {workers}
    pg-client: {{connect-timeout: 1s, read-timeout: 3s}}
    resilience4j: {{retry: {{max-attempts: 2, wait-duration: 100ms}}}}
  after:
    profile: retry-circuit-breaker
    workers: {workers}
    pg-client: {{connect-timeout: 1s, read-timeout: 3s}}
    resilience4j:
      retry: {{max-attempts: 2, wait-duration: 100ms}}
      circuitbreaker: {{sliding-window-size: 10, minimum-number-of-calls: 10}}
"""


# ---------------------------------------------------------------- the synthetic run


def _samples(
    rng: np.random.Generator,
    build: str,
    span: float,
    load_start: float,
    t0: float,
    fault: tuple[float, float],
) -> pd.DataFrame:
    """One build's samples: both endpoints on their open-model schedules, realistic outcomes."""
    parts = []
    for endpoint, rate in RATES.items():
        n = round(span * rate)
        index = np.arange(n, dtype=np.int64)
        intended = np.round(load_start + index / rate, 6)
        actual = intended + rng.exponential(0.0005, n)
        rel = intended - t0
        in_fault = (rel >= fault[0]) & (rel < fault[1])
        latency = rng.lognormal(np.log(0.004), 0.4, n)
        status = np.full(n, 200, dtype=np.int64)
        error = np.full(n, "", dtype=object)
        outcome = np.full(n, "APPROVED" if endpoint == "payments" else "", dtype=object)
        if build == "before":
            # The pool saturates: everything queues, payments time out twice then fail.
            backlog = np.clip(rel - fault[0], 0, None) * 0.01
            latency = np.where(in_fault, latency + np.minimum(backlog, 25.0), latency)
            if endpoint == "payments":
                latency = np.where(in_fault, latency + 6.1, latency)
                status[in_fault] = 502
                error[in_fault] = "HTTP502"
                outcome[in_fault] = "timeout"
        elif endpoint == "payments":
            # The breaker refuses nearly every payment at once.
            refused = in_fault & (rng.random(n) < 0.98)
            status[refused] = 503
            error[refused] = "HTTP503"
            outcome[refused] = "not_permitted"
            latency = np.where(in_fault & ~refused, latency + 6.1, latency)
        end = actual + latency
        unfinished = rng.random(n) < 1e-5
        end[unfinished] = np.nan
        status[unfinished] = 0
        error[unfinished] = "Unfinished"
        outcome[unfinished] = ""
        parts.append(
            pd.DataFrame(
                {
                    "endpoint": endpoint,
                    "index": index,
                    "intended_start": intended,
                    "actual_start": actual,
                    "end": end,
                    "status": status,
                    "error": error,
                    "outcome": outcome,
                }
            )
        )
    frame = pd.concat(parts, ignore_index=True).sort_values("intended_start", ignore_index=True)
    return frame.astype(SAMPLE_DTYPES)


def _metrics(build: str, t0: float, end: float, fault: tuple[float, float]) -> pd.DataFrame:
    """Long-format scrapes (t, source, series, labels, value) of the target and the gateway."""
    rows: list[tuple[float, str, str, str, float]] = []
    pg_ok = pg_timeout = shop_ok = shop_timeout = retries = refused = 0.0
    t = t0 - WARMUP_S
    while t <= end:
        rel = t - t0
        faulty = fault[0] <= rel < fault[1]
        rate_pay = RATES["payments"] * SCRAPE_S
        state = "closed"
        if build == "before":
            busy = WORKERS if faulty else 2.0
            if faulty:  # every held thread makes 2 attempts of 3 s + 0.1 s backoff
                shop_timeout += 2 * WORKERS / 6.1 * SCRAPE_S
                retries += WORKERS / 6.1 * SCRAPE_S
            else:
                shop_ok += rate_pay
        else:
            busy = 3.0 if faulty else 2.0
            if faulty:
                state = "open" if (rel - fault[0]) % 60 > 10 else "half_open"
                refused += rate_pay * 0.98
                shop_timeout += 3
            else:
                shop_ok += rate_pay
        pg_ok, pg_timeout = shop_ok, shop_timeout
        labels = "{}"
        rows += [
            (t, "target", "shop_workers_busy", labels, busy),
            (t, "target", "shop_workers_max", labels, float(WORKERS)),
            (t, "target", "shop_pg_calls_total", '{"outcome":"ok"}', shop_ok),
            (t, "target", "shop_pg_calls_total", '{"outcome":"timeout"}', shop_timeout),
            (t, "target", "shop_pg_retries_total", labels, retries),
        ]
        if build == "after":
            for s in ("closed", "open", "half_open", "disabled", "forced_open"):
                rows.append(
                    (
                        t,
                        "target",
                        "resilience4j_circuitbreaker_state",
                        json.dumps({"name": "pgClient", "state": s}, separators=(",", ":")),
                        1.0 if s == state else 0.0,
                    )
                )
            rows.append(
                (
                    t,
                    "target",
                    "resilience4j_circuitbreaker_not_permitted_calls_total",
                    '{"kind":"not_permitted","name":"pgClient"}',
                    refused,
                )
            )
        rows += [
            (t, "pg", "pg_calls_received_total", '{"phase":"baseline"}', pg_ok),
            (t, "pg", "pg_calls_received_total", '{"phase":"outage"}', pg_timeout),
        ]
        t += SCRAPE_S
    return pd.DataFrame(rows, columns=["t", "source", "series", "labels", "value"])


def make_run(root: Path, per_build: int, seed: int = 1) -> Path:
    """Write a synthetic run folder of ``per_build`` samples per build under ``root``."""
    rng = np.random.default_rng(seed)
    span = per_build / sum(RATES.values())  # seconds of load, warmup included
    duration = span - WARMUP_S
    b_end = round(duration * 0.12)
    o_end = round(duration * 0.84)
    fault = (float(b_end), float(o_end))
    run_dir = root / "bench-1m" / "20260101T000000Z-bench0"
    run_dir.mkdir(parents=True)
    (run_dir / "scenario.yaml").write_text(
        SCENARIO.format(
            warmup=WARMUP_S,
            duration=duration,
            scrape=SCRAPE_S,
            workers=WORKERS,
            b_end=b_end,
            outage=o_end - b_end,
            o_end=o_end,
            recovery=duration - o_end,
            **RATES,
        )
    )
    start = 1_790_000_000.0
    builds: dict[str, Any] = {}
    for name in ("before", "after"):
        t0 = start + WARMUP_S
        bdir = run_dir / name
        bdir.mkdir()
        samples = _samples(rng, name, span, start, t0, fault)
        samples.to_parquet(bdir / "samples.parquet", index=False)
        metrics = _metrics(name, t0, t0 + duration + 30, fault)
        metrics.to_parquet(bdir / "metrics.parquet", index=False)
        builds[name] = {
            "status": "completed",
            "preset": "shop",
            "load_start": start,
            "t0": t0,
            "samples": len(samples),
            "scrape_failures": {"target": 0, "pg": 0},
            "metric_rows": len(metrics),
        }
        start += span + 60
    manifest = {
        "scenario_name": "bench-1m",
        "scenario_file": "scenario.yaml",
        "run_id": "20260101T000000Z-bench0",
        "seed": 1,
        "status": "completed",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T03:00:00Z",
        "builds": builds,
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return run_dir


# ---------------------------------------------------------------- the measurements


def reference(run_dir: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Read the parquet columns and compute the percentiles with numpy: the floor to compare to."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    duration = _duration(run_dir)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for build, info in manifest["builds"].items():
        table = pq.read_table(
            run_dir / build / "samples.parquet",
            columns=["endpoint", "intended_start", "actual_start", "end"],
        )
        intended = table["intended_start"].to_numpy()
        actual = table["actual_start"].to_numpy()
        end = table["end"].to_numpy(zero_copy_only=False)
        t0 = info["t0"]
        # Same window as the analysis: intended in [t0, t0 + duration), 10 µs tolerance.
        window = (intended >= t0 - 1e-5) & (intended < t0 + duration - 1e-5)
        out[build] = {}
        for endpoint in RATES:
            mask = window & pc.equal(table["endpoint"], endpoint).to_numpy(zero_copy_only=False)
            for kind, start in (("latency", intended), ("service", actual)):
                values = end[mask] - start[mask]
                values = values[~np.isnan(values)]
                q = np.quantile(values, [0.5, 0.95, 0.99])
                out[build][f"{endpoint}.{kind}"] = {
                    "p50": float(q[0]),
                    "p95": float(q[1]),
                    "p99": float(q[2]),
                    "max": float(values.max()),
                    "mean": float(values.mean()),
                }
    return out


def _duration(run_dir: Path) -> float:
    return float(load_scenario(run_dir / "scenario.yaml").scenario.duration)


class Timing(NamedTuple):
    label: str
    median_s: float | None  # None when the call failed
    every_s: list[float]
    result: Any


def timed(label: str, fn: Callable[[], Any], repeat: int = REPEAT) -> Timing:
    """Median wall time of ``repeat`` calls; a failure is printed and measured as None."""
    times: list[float] = []
    result = None
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - start)
    except Exception:  # a benchmark reports, it does not stop at the first broken call
        print(f"{label}: failed\n{traceback.format_exc()}")
        return Timing(label, None, times, None)
    return Timing(label, statistics.median(times), times, result)


def _agree(report: Any, ref: dict[str, dict[str, dict[str, float]]]) -> str:
    """Whether the harness's percentiles equal the reference's (to the report's 4 decimals)."""
    try:
        for build, figures in ref.items():
            for key, stats in figures.items():
                endpoint, kind = key.split(".")
                section = "latency_s" if kind == "latency" else "service_time_s"
                got = report["builds"][build]["endpoints"][endpoint][section]
                for q, value in stats.items():
                    if got.get(q) is None or abs(got[q] - value) > 1e-3:
                        return f"NO ({build} {key} {q}: harness {got.get(q)}, reference {value})"
    except (KeyError, TypeError) as exc:
        return f"unknown (report has no {exc})"
    return "yes"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}x" if a is not None and b else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000, help="in total, over 2 builds")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic run folder")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="harness-bench-"))
    try:
        start = time.perf_counter()
        run_dir = make_run(tmp, args.samples // 2)
        made_s = time.perf_counter() - start
        manifest = json.loads((run_dir / "manifest.json").read_text())
        n = sum(b["samples"] for b in manifest["builds"].values())
        scrapes = sum(b["metric_rows"] for b in manifest["builds"].values())
        print(f"synthetic run: {run_dir}")
        print(
            f"  {n:,} samples ({len(manifest['builds'])} builds x {len(RATES)} endpoints), "
            f"{scrapes:,} metric rows; written in {made_s:.1f} s"
        )
        scenario = load_scenario(run_dir / "scenario.yaml").scenario

        harness = timed("harness  make_report(run_dir)", lambda: make_report(run_dir))
        extra = []
        if "charts" in inspect.signature(make_report).parameters:  # it also draws charts
            extra.append(
                timed(
                    "  same, make_report(charts=False)", lambda: make_report(run_dir, charts=False)
                )
            )
        loaded = timed("  of it: load(run_dir)", lambda: load(run_dir))
        analysed = timed(
            "  of it: analyse(run, scenario)", lambda: analyse(loaded.result, scenario)
        )
        ref = timed("reference pyarrow read + numpy", lambda: reference(run_dir))

        print(f"\nmedian of {REPEAT} (each run in brackets):")
        for t in (harness, *extra, loaded, analysed, ref):
            if t.median_s is None:
                print(f"  {t.label:<34} failed")
                continue
            every = ", ".join(f"{x:.2f}" for x in t.every_s)
            print(
                f"  {t.label:<34} {t.median_s:7.3f} s  {n / t.median_s:>12,.0f} rows/s  [{every}]"
            )
        both = (
            loaded.median_s + analysed.median_s
            if loaded.median_s is not None and analysed.median_s is not None
            else None
        )
        print(f"\nratio harness / reference: {_ratio(harness.median_s, ref.median_s)}")
        print(f"ratio load + analyse / reference: {_ratio(both, ref.median_s)}")
        if harness.result is not None and ref.result is not None:
            print(f"figures agree with the reference: {_agree(harness.result, ref.result)}")
        goal = f"target (analysis of {n:,} samples in under {TARGET_S:g} s):"
        if harness.median_s is None:
            print(f"{goal} unknown (make_report failed)")
        else:
            met = "met" if harness.median_s < TARGET_S else "NOT met"
            print(f"{goal} {met} ({harness.median_s:.2f} s end to end with make_report)")
        if args.keep:
            print(f"kept: {run_dir}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
