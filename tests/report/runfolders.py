"""Run folders made from the stored quickstart run, for what it did not meet: repetitions, opossum.

No process is started: the raw files of ``tests/data/run-quickstart-v1`` are
copied and changed the way another run would have written them, and
``harness report`` renders them from scratch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

RUN = Path(__file__).parents[1] / "data" / "run-quickstart-v1"


def _manifest(run_dir: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((run_dir / "manifest.json").read_text())
    return data


def repeated(run_dir: Path) -> Path:
    """The quickstart as ``--repeat 2``: each build a second time, its latencies 10% longer
    (so every latency figure has an interval of some width)."""
    shutil.copytree(RUN, run_dir)
    (run_dir / "report.json").unlink()
    manifest = _manifest(run_dir)
    builds = manifest["builds"]
    assert isinstance(builds, dict)
    for name in list(builds):
        second = f"{name}.r2"
        shutil.copytree(run_dir / name, run_dir / second)
        samples = pd.read_parquet(run_dir / second / "samples.parquet")
        samples["end"] = samples["intended_start"] + 1.1 * (
            samples["end"] - samples["intended_start"]
        )
        samples.to_parquet(run_dir / second / "samples.parquet")
        builds[second] = {**builds[name], "repetition": 2}
    manifest["repeat"] = 2
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return run_dir


OPENS_S = (12.0, 20.0, 30.0)
"""When the stock opossum breaker of ``stock_opossum`` opens (s after t0); it closes at 45 s."""


def stock_opossum(run_dir: Path) -> Path:
    """The quickstart with ``after`` read as a stock opossum service: its breaker's events
    counted by opossum-prometheus 0.3.0 without a halfOpen listener (open, open, open,
    close: the failed probes in between never counted)."""
    shutil.copytree(RUN, run_dir)
    (run_dir / "report.json").unlink()
    manifest = _manifest(run_dir)
    builds = manifest["builds"]
    assert isinstance(builds, dict)
    after = builds["after"]
    after["preset"] = "opossum"
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
    metrics = pd.read_parquet(run_dir / "after" / "metrics.parquet")
    t0 = float(after["t0"])
    scrapes = sorted(set(metrics.loc[metrics["source"] == "target", "t"]))
    rows = []
    for t in scrapes:
        counts = {
            "fire": max(0.0, t - t0) * 10,
            "open": float(sum(t >= t0 + s for s in OPENS_S)),
            "close": float(t >= t0 + 45.0),
        }
        for event, value in counts.items():
            labels = json.dumps({"name": "vendor", "event": event})
            rows.append({"t": t, "source": "target", "series": "circuit_total"})
            rows[-1] |= {"labels": labels, "value": value}
    extra = pd.DataFrame(rows).astype(metrics.dtypes.to_dict())
    pd.concat([metrics, extra], ignore_index=True).to_parquet(run_dir / "after" / "metrics.parquet")
    return run_dir
