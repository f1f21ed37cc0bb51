"""The judge's false-alarm rate and power, against today's plain threshold gate.

    .venv/bin/python benchmarks/judge_power.py                  # 100 trials, ~2-3 min
    .venv/bin/python benchmarks/judge_power.py --trials 300 --reps 1,2,4,8

Every trial simulates (``harness.simulate``: the model of the shop, a fraction of a second a
build) scenarios/quickstart.yaml's ``after`` build under two fresh seeds per repetition:
side A and side A' (the same build, other arrivals and fates: an A/A pair). Side B is A'
with a known regression: every product read's service time (end - actual start) made 25 %
longer, so its latency (end - intended start) carries it. For the same trials and for
each number of repetitions R (each side's blocks pooled over R seeds, as ``--repeat R``
pools them), it counts:

- the judge (``harness.analysis.judge``, the p99's policy: 5 % allowed) saying ``worse`` of
  products.p99 (whole measured window, and [outage]) on A'/A (a false alarm) and on B/A
  (a detection);
- the plain threshold gate ``x.products.p99 <= 1.1 * baseline.x.products.p99`` (the mean of
  the repetitions' p99, as a ``--repeat`` report has it) failing on the same pairs.

Side C is A' with the breaker set so that it never opens (``sliding-window-size`` and
``minimum-number-of-calls`` 1,000: the outage's 40 s bring about 800 calls), the
regression a breaker build exists to prevent; its detection is counted the same way.

Then the smallest R meeting the targets (false alarms <= 1 %, detection >= 95 %). A rate
from N trials has a binomial uncertainty of about sqrt(p(1-p)/N): with 100 trials, 0 %
means "fewer than ~3 %" at 95 %; run more trials to pin 1 % down. Always exits 0.

Real noise (``--real-pairs N``, ``--busy``): N real ``harness run``s (the real shop, gateway
and Locust on this machine, about 2.5 minutes each) of a scenario that is the quickstart
with two builds, ``a`` and ``a2``, both its ``after`` build, and the run's seed 2000 + i
(both builds of a run get the same arrivals and fates, as a pull request's run and main's
baseline of one scenario do). Each run is an A/A pair; on each, the gates' own code
(``harness.gates.evaluate``) judges ``a2.products.p99 not worse than a`` and the plain
``a2.products.p99 <= 1.1 * a.products.p99``, over the measured window and [outage]: every
``fail`` is a false alarm. ``--busy`` keeps one core busy meanwhile (a spinning process,
stopped at the end), as a shared CI runner is.

    .venv/bin/python benchmarks/judge_power.py --trials 0 --real-pairs 20 --busy   # ~55 min
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.analysis.answers import served  # noqa: E402
from harness.analysis.judge import POLICIES, block_values, judge  # noqa: E402
from harness.gates.evaluate import evaluate  # noqa: E402
from harness.report.compare import load_report  # noqa: E402
from harness.results.attempts import requests_of, with_attempts  # noqa: E402
from harness.scenario.gates import parse_gate  # noqa: E402
from harness.scenario.loader import load_scenario, load_scenario_text  # noqa: E402
from harness.scenario.schema import Scenario  # noqa: E402
from harness.simulate.run import ORIGIN, modelled, simulate_build  # noqa: E402

SCENARIO = ROOT / "scenarios/quickstart.yaml"
BUILD = "after"
ENDPOINT = "products"
REGRESSION = 1.25
THRESHOLD = 1.10
"""Today's way: a gate ``p99 <= 1.1 * baseline p99``."""
NEVER_OPENS = {"sliding-window-size": 1000, "minimum-number-of-calls": 1000}
"""Side C's breaker: more calls than the outage brings before it may open."""
PAIRS = ("A/A", "A/B", "A/C")
"""A' (the same build), B (service time x1.25), C (a breaker that never opens) against A."""


def quickstart() -> dict[str, Any]:
    """The quickstart's YAML as data, for the variants below to edit."""
    doc: dict[str, Any] = yaml.safe_load(SCENARIO.read_text())
    return doc


def never_opens() -> Scenario:
    """The quickstart with its ``after`` build's breaker set never to open."""
    doc = quickstart()
    doc["builds"][BUILD]["resilience4j"]["circuitbreaker"] |= NEVER_OPENS
    return load_scenario_text(yaml.safe_dump(doc, sort_keys=False), str(SCENARIO)).scenario


Pooled = tuple[float, list[float | None]]
"""A window's p99 and its blocks' p99s."""
Side = dict[str, Pooled]


def side(scenario: Scenario, seed: int, slower: float = 1.0) -> Side:
    """One simulated repetition: per window, the endpoint's p99 and its blocks' p99s."""
    sc = scenario.model_copy(update={"seed": seed})
    (service,), _ = modelled(sc, [BUILD])
    frames = simulate_build(sc, service, seed)
    requests = requests_of(with_attempts(frames.samples))
    rows = requests[requests["endpoint"] == ENDPOINT].copy()
    if slower != 1.0:
        service_s = rows["end"] - rows["actual_start"]
        rows["end"] = rows["actual_start"] + slower * service_s
    t0 = ORIGIN + sc.warmup
    windows = {"": (t0, t0 + sc.duration)}
    windows |= {f"[{p.name}]": (t0 + p.start, t0 + p.end) for p in sc.phases}
    ok = served(rows)
    out = {}
    for name, (start, end) in windows.items():
        inside = (rows["intended_start"] >= start) & (rows["intended_start"] < end)
        latency = (rows["end"] - rows["intended_start"])[inside].dropna()
        p99 = float(np.quantile(latency, 0.99)) if len(latency) else float("nan")
        out[name] = (p99, block_values(rows, ok, start, end)["p99"])
    return out


def pooled(reps: list[Side], window: str) -> Pooled:
    return (
        float(np.mean([r[window][0] for r in reps])),
        [v for r in reps for v in r[window][1]],
    )


REAL_GATES = {
    ("judge", ""): f"a2.{ENDPOINT}.p99 not worse than a",
    ("judge", "[outage]"): f"a2.{ENDPOINT}.p99[outage] not worse than a",
    ("threshold", ""): f"a2.{ENDPOINT}.p99 <= {THRESHOLD} * a.{ENDPOINT}.p99",
    ("threshold", "[outage]"): (
        f"a2.{ENDPOINT}.p99[outage] <= {THRESHOLD} * a.{ENDPOINT}.p99[outage]"
    ),
}
"""The same comparisons as the simulated trials', as gates, on each real A/A run."""
RUN_GUARD_S = 900
"""A hang guard for one real run (two builds of ~75 s each idle)."""


def aa_scenario(seed: int) -> dict[str, Any]:
    """The quickstart with its ``after`` build twice (``a``, ``a2``), the run's own seed, and
    no gates of its own (the benchmark evaluates its own)."""
    doc = quickstart()
    after = doc["builds"][BUILD]
    doc |= {
        "name": f"judge-aa-{seed}",
        "seed": seed,
        "builds": {"a": after, "a2": copy.deepcopy(after)},
    }
    doc.pop("gates", None)
    return doc


def real_pairs(pairs: int, busy: bool) -> None:
    """Run ``pairs`` real A/A runs and print each gate's false alarms (fail) and errors."""
    folder = Path(tempfile.mkdtemp(prefix="judge-aa-"))
    spinner = None
    if busy:  # one core busy, bounded by its own deadline as well as by the finally below
        deadline = time.time() + pairs * RUN_GUARD_S
        spin = f"import time\nwhile time.time() < {deadline}: pass"
        spinner = subprocess.Popen([sys.executable, "-c", spin])
    verdicts: dict[tuple[str, str], list[str]] = {key: [] for key in REAL_GATES}
    harness = Path(sys.executable).with_name("harness")
    started = time.monotonic()
    try:
        for i in range(pairs):
            seed = 2000 + i
            path = folder / f"aa-{seed}.yaml"
            path.write_text(yaml.safe_dump(aa_scenario(seed), sort_keys=False))
            results = folder / f"runs-{seed}"
            done = subprocess.run(
                [str(harness), "run", str(path), "--results", str(results)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=RUN_GUARD_S,
                check=False,
            )
            (run_dir,) = [p.parent for p in results.glob("*/*/manifest.json")]
            report = load_report(run_dir)
            line = []
            for key, text in REAL_GATES.items():
                result = evaluate(parse_gate(text), report)
                verdicts[key].append(result.verdict)
                line.append(f"{key[0]}{key[1] or ''}: {result.verdict} ({result.detail})")
            print(f"pair {i + 1}/{pairs} (exit {done.returncode}): " + "; ".join(line))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    n = len(next(iter(verdicts.values())))
    print(
        f"real A/A pairs: {n} runs of {SCENARIO.name} (a, a2 = its {BUILD!r}), "
        f"{'one core busy' if busy else 'nothing else started'}, "
        f"{time.monotonic() - started:.0f} s; run folders in {folder}"
    )
    table = pd.DataFrame(
        [
            {
                "window": w or "measured",
                "who": who,
                "false alarms (fail)": f"{sum(v == 'fail' for v in got)}/{n}",
                "not enough data (error)": f"{sum(v == 'error' for v in got)}/{n}",
                "pass": f"{sum(v == 'pass' for v in got)}/{n}",
            }
            for (who, w), got in verdicts.items()
        ]
    )
    print(table.to_string(index=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--reps", default="1,2,4", help="repetitions per side to try")
    parser.add_argument("--real-pairs", type=int, default=0, help="real A/A runs to make")
    parser.add_argument("--busy", action="store_true", help="keep one core busy meanwhile")
    args = parser.parse_args()
    if args.real_pairs > 0:
        real_pairs(args.real_pairs, args.busy)
    if args.trials <= 0:
        return
    reps = sorted({int(r) for r in args.reps.split(",")})
    scenario = load_scenario(SCENARIO).scenario
    broken = never_opens()
    windows = ["", "[outage]"]
    policy = POLICIES["latency_s.p99"]
    started = time.monotonic()
    # counts[(R, window, who, pair)] = alarms
    counts: dict[tuple[int, str, str, str], int] = {}
    for trial in range(args.trials):
        seeds = [(1000 + trial * 100 + r, 500_000 + trial * 100 + r) for r in range(max(reps))]
        a = [side(scenario, s) for s, _ in seeds]
        a2 = [side(scenario, s) for _, s in seeds]
        b = [side(scenario, s, REGRESSION) for _, s in seeds]
        c = [side(broken, s) for _, s in seeds]
        for r in reps:
            for w in windows:
                base = pooled(a[:r], w)
                others = (pooled(a2[:r], w), pooled(b[:r], w), pooled(c[:r], w))
                for pair, other in zip(PAIRS, others, strict=True):
                    worse = judge(base[1], other[1], policy, seed=trial).verdict == "worse"
                    plain = other[0] > THRESHOLD * base[0]
                    for who, alarm in (("judge", worse), ("threshold", plain)):
                        key = (r, w, who, pair)
                        counts[key] = counts.get(key, 0) + int(alarm)
    took = time.monotonic() - started
    n = args.trials
    print(
        f"{SCENARIO.name}, build {BUILD!r}, {ENDPOINT} p99; {n} trials; regression: service "
        f"time x{REGRESSION}; C: a breaker that never opens; threshold gate: p99 <= "
        f"{THRESHOLD} x baseline; {took:.0f} s"
    )
    table = pd.DataFrame(
        [
            {
                "window": w or "measured",
                "reps": r,
                "who": who,
                "false alarms (A/A)": f"{100 * counts[(r, w, who, 'A/A')] / n:.1f}%",
                "detected (A/B)": f"{100 * counts[(r, w, who, 'A/B')] / n:.1f}%",
                "detected (A/C)": f"{100 * counts[(r, w, who, 'A/C')] / n:.1f}%",
            }
            for w in windows
            for r in reps
            for who in ("judge", "threshold")
        ]
    )
    print(table.to_string(index=False))
    for w in windows:
        met = [
            r
            for r in reps
            if counts[(r, w, "judge", "A/A")] / n <= 0.01
            and counts[(r, w, "judge", "A/B")] / n >= 0.95
            and counts[(r, w, "judge", "A/C")] / n >= 0.95
        ]
        said = f"{met[0]} repetition(s) a side" if met else f"more than {max(reps)} repetitions"
        print(f"judge meets both targets on {w or 'the measured window'} with {said}")


if __name__ == "__main__":
    main()
