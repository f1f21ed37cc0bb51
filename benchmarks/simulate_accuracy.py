"""The simulator's error against real runs, and its speed against one real run.

    .venv/bin/python benchmarks/simulate_accuracy.py            # 11 candidates, ~6 min
    .venv/bin/python benchmarks/simulate_accuracy.py --keep     # keep the run folders

Two seeds' CI scenarios (scenarios/ci/seeds/000-pg-timeout-short.yaml and
004-thresholds-short.yaml), each with a few breaker settings beside the seed's own builds:
11 candidates. Every candidate is run for real (``harness run``, one run per seed with
all its candidates) and simulated (``harness.simulate.simulate_run``, timed), and the four
figures of ``harness.simulate.accuracy`` are printed side by side with the error of each.
Seed 004's short scenario has no endpoint that spares the gateway; a product read at
4/s is added to both its real and its simulated runs (chosen once), so it has a
protected p99. Its gates are dropped (the added builds are not the seed's).
Then the wall time: simulating a 3-build scenario, and all candidates, against the wall
time of one real build measured in the same invocation.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.scenario.loader import load_scenario  # noqa: E402
from harness.simulate import simulate_run  # noqa: E402
from harness.simulate.accuracy import FIGURES, Error, errors  # noqa: E402

SEED_000 = ROOT / "scenarios/ci/seeds/000-pg-timeout-short.yaml"
SEED_004 = ROOT / "scenarios/ci/seeds/004-thresholds-short.yaml"


def seed_000(data: dict[str, Any]) -> dict[str, Any]:
    """before, after (the seed's), and four other breakers of the after build."""
    after = data["builds"]["after"]
    breaker = after["resilience4j"]["circuitbreaker"]

    def variant(**changes: Any) -> dict[str, Any]:
        build: dict[str, Any] = yaml.safe_load(yaml.safe_dump(after))
        build["resilience4j"]["circuitbreaker"] = {**breaker, **changes}
        return build

    data["builds"].update(
        {
            "win20": variant(**{"sliding-window-size": 20, "minimum-number-of-calls": 20}),
            "fr80": variant(**{"failure-rate-threshold": 80}),
            "open3s": variant(**{"wait-duration-in-open-state": "3s"}),
            "time5s": variant(**{"sliding-window-type": "TIME_BASED", "sliding-window-size": 5}),
        }
    )
    return data


def seed_004(data: dict[str, Any]) -> dict[str, Any]:
    """The seed's four builds, one rate-based breaker more, and a product read."""
    data["traffic"]["products"] = {
        "path": "/api/products/{id}", "params": {"id": [1, 1000]}, "rate": 4, "timeout": "5s",
    }  # fmt: skip
    probe5 = data["builds"]["probe-5"]
    build = yaml.safe_load(yaml.safe_dump(probe5))
    build["resilience4j"]["circuitbreaker"].update(
        {"sliding-window-size": 20, "minimum-number-of-calls": 20,
         "wait-duration-in-open-state": "1s", "permitted-number-of-calls-in-half-open-state": 3}
    )  # fmt: skip
    data["builds"]["count20"] = build
    return data


def scenario(source: Path, change: Any, folder: Path) -> Path:
    data = change(yaml.safe_load(source.read_text()))
    data["gates"] = []
    data["name"] = f"{data['name']}-bench"
    path = folder / source.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def real_run(path: Path, results: Path) -> tuple[Path, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [str(ROOT / ".venv/bin/harness"), "run", str(path), "--results", str(results)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    took = time.perf_counter() - started
    runs = sorted(results.glob("*/*/manifest.json"))
    if done.returncode not in (0, 1) or not runs:
        print(done.stdout[-2000:], done.stderr[-2000:])
        raise SystemExit(f"harness run {path.name} failed ({done.returncode})")
    return runs[-1].parent, took


def shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the run folders")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="simulate-accuracy-"))
    found: list[tuple[str, Error]] = []
    real_per_build: list[float] = []
    sim_times: list[tuple[str, int, float]] = []
    for source, change in ((SEED_000, seed_000), (SEED_004, seed_004)):
        path = scenario(source, change, folder)
        loaded = load_scenario(path)
        builds = len(loaded.scenario.builds)
        measured, took = real_run(path, folder / "real")
        real_per_build.append(took / builds)
        started = time.perf_counter()
        simulated = simulate_run(loaded.scenario, folder / "sim", scenario_text=loaded.text)
        sim_times.append((loaded.scenario.name, builds, time.perf_counter() - started))
        found += [(source.stem, e) for e in errors(simulated, measured)]
    print(f"{'scenario':28} {'candidate':9} {'figure':16} {'simulated':>10} {'measured':>10} "
          f"{'error':>9} {'error %':>8}")  # fmt: skip
    for name, e in found:
        rel = "-" if e.relative is None else f"{100 * e.relative:+.0f}%"
        print(f"{name:28} {e.build:9} {e.figure:16} {shown(e.simulated):>10} "
              f"{shown(e.measured):>10} {shown(e.absolute):>9} {rel:>8}")  # fmt: skip
    print(f"candidates: {len({(n, e.build) for n, e in found})}")
    for figure in FIGURES:
        errs = [abs(e.absolute) for _, e in found if e.figure == figure and e.absolute is not None]
        agree = sum(
            1 for _, e in found if e.figure == figure and e.simulated is None and e.measured is None
        )
        mismatch = sum(
            1
            for _, e in found
            if e.figure == figure and (e.simulated is None) != (e.measured is None)
        )
        median = statistics.median(errs) if errs else None
        print(f"  {figure:16} |error| median {shown(median)}, max {shown(max(errs, default=None))}"
              f" over {len(errs)}; both none {agree}; one none {mismatch}")  # fmt: skip
    three = load_scenario(SEED_000).scenario
    started = time.perf_counter()
    three_builds = three.model_copy(update={"builds": {
        **three.builds, "third": three.builds["after"]}})  # fmt: skip
    simulate_run(three_builds, folder / "sim3")
    took3 = time.perf_counter() - started
    real_build = statistics.mean(real_per_build)
    for name, builds, took in sim_times:
        print(f"simulated {name}: {builds} builds in {took:.2f} s")
    speedup = real_build / (took3 / 3)
    print(f"simulated a 3-build CI-scale scenario (seed 000 short) in {took3:.2f} s; one real "
          f"build took {real_build:.1f} s on average (this invocation): {speedup:.0f}x faster "
          "per build")  # fmt: skip
    print(f"run folders: {folder}" if args.keep else "")
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
