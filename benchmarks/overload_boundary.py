"""The boundary of the stuck state: trigger size x trigger duration x base load, with repeats.

Runs one build of the reproduction (``scenarios/overload-capacity-drop.yaml``, by default its
``retry-only`` build) once per cell and repetition, each a real ``harness run`` (gateway,
shop, Locust), and prints the share of runs whose ``recovery:`` verdict was stuck, per cell.
A cell changes only the trigger phase's brownout (its capacity: 100% minus the drop), the
trigger's duration (the phases after it move with it; the measured window ends ``within``
+ ``hold`` after it, as ``recovery:`` needs) and the rate of the ``calls-gateway``
endpoints; every other setting is the scenario's own. Repetition ``r`` runs with seed
``seed + r`` (Poisson arrivals and service times differ; the settings do not).

    .venv/bin/python benchmarks/overload_boundary.py --drops 60,80 --durations 4,10 \\
        --rates 15,25 --repeats 2

It is not a test: it prints the table and exits 0 (a run that failed to produce a verdict
is counted apart, ``n/a``). See docs/overload.md for a table it made.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from itertools import product
from pathlib import Path
from typing import Any

import yaml

from harness.core.durations import parse_duration

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "overload-capacity-drop.yaml"


def _numbers(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _seconds(value: Any) -> float:
    return parse_duration(value)


def cell_scenario(
    base: dict[str, Any], build: str, drop: float, duration: float, rate: float, seed: int
) -> dict[str, Any]:
    """The scenario of one cell: the trigger's brownout and duration, the load, one build."""
    data: dict[str, Any] = json.loads(json.dumps(base))
    recovery = data["recovery"]
    phases = sorted(data["pg"]["phases"], key=lambda p: _seconds(p["start"]))
    trigger = next(p for p in phases if p["name"] == recovery["trigger"])
    fault = trigger["fault"]
    fault.pop("concurrency", None)
    fault["capacity"] = f"{100 - drop:g}%"
    old_end = _seconds(trigger["start"]) + _seconds(trigger["duration"])
    trigger["duration"] = f"{duration:g}s"
    shift = _seconds(trigger["start"]) + duration - old_end
    for phase in phases:
        if _seconds(phase["start"]) >= old_end - 1e-9:
            phase["start"] = f"{_seconds(phase['start']) + shift:g}s"
    end = _seconds(trigger["start"]) + duration
    data["duration"] = f"{end + _seconds(recovery['within']) + _seconds(recovery['hold']):g}s"
    last = phases[-1]
    last["duration"] = f"{_seconds(data['duration']) - _seconds(last['start']):g}s"
    data["pg"]["phases"] = phases
    for endpoint in data["traffic"].values():
        if endpoint.get("calls-gateway"):
            endpoint["rate"] = rate
    data["builds"] = {build: data["builds"][build]}
    data["gates"] = []
    data["seed"] = seed
    data["name"] = f"boundary-d{drop:g}-t{duration:g}-r{rate:g}-s{seed}"
    return data


def run_cell(scenario: dict[str, Any], build: str, out: Path) -> float | None:
    """``recovered`` of the build in one real run (None: no verdict)."""
    path = out / f"{scenario['name']}.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    harness = Path(sys.executable).parent / "harness"
    subprocess.run(
        [str(harness), "run", str(path), "--results", str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    reports = sorted((out / scenario["name"]).glob("*/report.json"))
    if not reports:
        return None
    report = json.loads(reports[-1].read_text())
    value = report["builds"].get(build, {}).get("timeline", {}).get("recovered")
    return None if value is None else float(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--build", default="retry-only")
    parser.add_argument("--drops", default="60,80", help="% of capacity taken, comma-separated")
    parser.add_argument("--durations", default="4,10", help="trigger seconds, comma-separated")
    parser.add_argument("--rates", default="15,25", help="calls-gateway endpoints' rate (/s)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None, help="keep run folders here")
    args = parser.parse_args()
    base = yaml.safe_load(args.scenario.read_text())
    drops, durations, rates = _numbers(args.drops), _numbers(args.durations), _numbers(args.rates)
    out = args.keep or Path(tempfile.mkdtemp(prefix="boundary-"))
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    verdicts: dict[tuple[float, float, float], list[float | None]] = {}
    for rate, drop, duration in product(rates, drops, durations):
        cell = verdicts.setdefault((rate, drop, duration), [])
        for r in range(args.repeats):
            seed = int(base.get("seed", 0)) + r
            scenario = cell_scenario(base, args.build, drop, duration, rate, seed)
            cell.append(run_cell(scenario, args.build, out))
            print(
                f"rate {rate:g}/s drop {drop:g}% for {duration:g}s seed {seed}: "
                f"recovered={cell[-1]}",
                file=sys.stderr,
                flush=True,
            )
    columns = [(d, t) for d in drops for t in durations]
    print(f"# {args.scenario.name}, build {args.build}: share of stuck runs per cell")
    print(f"# {args.repeats} repeats per cell, {time.monotonic() - began:.0f} s in all\n")
    print("| base load | " + " | ".join(f"drop {d:g}% for {t:g} s" for d, t in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for rate in rates:
        cells = []
        for drop, duration in columns:
            found = [v for v in verdicts[(rate, drop, duration)] if v is not None]
            stuck = sum(1 for v in found if v == 0)
            missing = len(verdicts[(rate, drop, duration)]) - len(found)
            text = f"{stuck}/{len(found)} stuck" if found else "n/a"
            cells.append(text + (f" ({missing} n/a)" if missing and found else ""))
        print(f"| {rate:g}/s | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
