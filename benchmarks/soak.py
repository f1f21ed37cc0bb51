"""Benchmark: memory of every process of a long run at a sustained rate (issue 11, the soak).

Runs the whole harness, ``harness run`` on a scenario written to a temporary
folder: one build of the reference shop (``retry-circuit-breaker``, the breaker
stays closed), a gateway that is healthy throughout, and an open-model load of
``--rate`` requests/s of ``GET /api/products/{id}`` (the shop's own database),
``--payments-pct`` of it ``POST /api/payments`` instead (through the gateway; 0
by default: on 2 cores the shop does not hold 1,000/s with payments in the mix,
see benchmarks/README.md), for ``--minutes`` after a short warmup. While it
runs, the script reads the RSS (``VmRSS`` in ``/proc/<pid>/status``) of the
orchestrator and of every process descended from it (the orphan guards, the
gateway, gunicorn's master and worker, Locust), each named from its command
line, every ``--interval`` from the load's start. At the end it prints, per
process, the RSS at the first sample after ``--settle`` minutes (the reference:
what a process holds once warmed up) and at the load's end, the growth between
them and a verdict against the issue's bound (growth < 10% after the first five
minutes), then the rate the run actually sustained, from its own
``samples.parquet``: a memory figure at a rate the shop did not hold would mean
nothing.

The run's folder (``results/soak/<id>/``, with its report) is kept, and the
samples go beside it as ``soak-rss.csv``, the harness's console output as
``soak-harness.log``.

Run: ``.venv/bin/python benchmarks/soak.py`` (one hour at 1,000 requests/s) or
``--minutes 15``, ``--rate 600``, ``--payments-pct 10`` (a tenth through the gateway).
Ctrl-C (or SIGTERM) stops the run the way Ctrl-C stops ``harness run`` (its
processes stop, partial results are kept) and prints what was sampled; if the
harness does not stop, it is killed and whatever of its processes is left is
killed too. Always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / ".venv" / "bin" / "harness"
SCENARIO_NAME = "soak"
BUILD = "shop"
BOUND_PCT = 10.0
"""The issue's bound: RSS growth after the first five minutes stays under 10%."""
HELD_SHARE = 0.99
"""A minute holds the rate when at least this share of the offered requests were answered 2xx."""
HELD_LATENCY_P99_S = 1.0
"""...and latency p99 stays under this: a target that falls behind an open load queues without
bound, so its latency grows long before requests fail."""
HELD_LATENESS_P99_S = 0.1
"""...and the generator sent on time (p99 of actual minus intended start)."""
EPS_S = 1e-5
"""Tolerance of the measured window's edges (``harness.analysis.endpoints.EPS_S``)."""
STOP_TERM_S = 180.0
"""How long the harness gets after SIGTERM to stop its processes, save and write its report."""
STOP_KILL_S = 15.0
SHOP_MASTER = "shop (gunicorn master)"
SHOP_WORKER = "shop worker (gunicorn)"
AFTER_LOAD_S = 1800.0
"""How long the harness may take after the load's end (drain, saving, report) before it is
stopped as hung."""


# ---------------------------------------------------------------- processes, from /proc


@dataclass
class Proc:
    """One process of the run, identified by pid and start time (a pid can be reused)."""

    pid: int
    start_ticks: int
    ppid: int
    argv: list[str]
    label: str = ""
    rss_kb: dict[float, int] = field(default_factory=dict)
    """RSS by sample time (seconds since the load's start)."""
    hwm_kb: int = 0
    """The highest ``VmHWM`` seen: the process's peak over its whole life so far."""


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time in clock ticks) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Fields after the command name, which may itself hold spaces or parentheses.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _status_kb(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of ``pid`` in kB; empty if it is gone (or a zombie)."""
    found: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    return found


def alive(proc: Proc) -> bool:
    stat = _stat(proc.pid)
    return stat is not None and stat[1] == proc.start_ticks and bool(_status_kb(proc.pid))


def descendants(root: int) -> dict[tuple[int, int], Proc]:
    """``root`` and every live process below it, by parent links (sessions do not matter)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(int(name))) is not None:
            stats[int(name)] = stat
            children.setdefault(stat[0], []).append(int(name))
    found: dict[tuple[int, int], Proc] = {}
    todo = [root] if root in stats else []
    while todo:  # bounded: each pid is visited once (parent links form a tree)
        pid = todo.pop()
        ppid, start = stats[pid]
        found[(pid, start)] = Proc(pid, start, ppid, _argv(pid))
        todo.extend(children.get(pid, []))
    return found


def describe(argv: list[str], parent: str | None) -> str:
    """What a process of the run is, from its command line (and its parent's name)."""
    if "--" in argv and any(a.endswith("orphan_guard.py") for a in argv):
        return f"guard: {describe(argv[argv.index('--') + 1 :], None)}"
    if parent is None and len(argv) > 2 and argv[1].endswith("harness") and argv[2] == "run":
        return "orchestrator (harness run)"
    modules = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-m"}
    if "harness.gateway" in modules:
        return "gateway"
    if "targets.shop" in modules:  # gunicorn's worker is a fork of its master: same argv
        return SHOP_WORKER if parent == SHOP_MASTER else SHOP_MASTER
    if "locust" in modules:
        roles = [role for role in ("master", "worker") if f"--{role}" in argv]
        return " ".join(["locust", *roles])
    if not argv:
        return "?"
    return " ".join([Path(argv[0]).name, *argv[1:3]])[:40]


class Tracker:
    """Every process seen in the run's tree, named once, sampled on demand."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.procs: dict[tuple[int, int], Proc] = {}

    def scan(self) -> None:
        """Add processes that appeared; refresh every known one's peak (``VmHWM``)."""
        for key, proc in descendants(self.root).items():
            if key not in self.procs:
                parent = next(
                    (p.label for p in self.procs.values() if p.pid == proc.ppid and alive(p)),
                    None,
                )
                base = describe(proc.argv, parent)
                taken = {p.label for p in self.procs.values()}
                proc.label = base
                n = 2
                while proc.label in taken:  # bounded by the number of processes
                    proc.label, n = f"{base} #{n}", n + 1
                self.procs[key] = proc
        for proc in self.procs.values():
            hwm = _status_kb(proc.pid).get("VmHWM", 0) if alive(proc) else 0
            proc.hwm_kb = max(proc.hwm_kb, hwm)

    def sample(self, t: float) -> int:
        """Record every live process's RSS at ``t``; the total in kB."""
        self.scan()
        total = 0
        for proc in self.procs.values():
            rss = _status_kb(proc.pid).get("VmRSS") if alive(proc) else None
            if rss is not None:
                proc.rss_kb[t] = rss
                total += rss
        return total

    def leftovers(self) -> list[Proc]:
        return [p for p in self.procs.values() if alive(p)]


# ---------------------------------------------------------------- the scenario and the run


def scenario_text(
    rate: float, payments_pct: float, minutes: float, warmup_s: float, shop_workers: int
) -> str:
    """A one-build scenario: the shop, a healthy gateway, ``rate`` requests/s in all."""
    payments = rate * payments_pct / 100
    products = rate - payments
    traffic = []
    if payments > 0:
        traffic.append(
            f"  payments:\n    method: POST\n    path: /api/payments\n    rate: {payments:g}\n"
            "    timeout: 10s\n    body: {amount: 15000}\n    idempotency-key: true\n"
            "    calls-gateway: true\n"
        )
    if products > 0:
        traffic.append(
            f"  products:\n    path: /api/products/{{id}}\n    params: {{id: [1, 1000]}}\n"
            f"    rate: {products:g}\n    timeout: 10s\n"
        )
    return (
        f"name: {SCENARIO_NAME}\n"
        f"description: soak, {rate:g} requests/s for {minutes:g} min, healthy gateway "
        "(benchmarks/soak.py)\n"
        f"seed: 11\nwarmup: {warmup_s:g}s\nduration: {minutes * 60:g}s\n"
        "traffic:\n" + "".join(traffic) + f"builds:\n  {BUILD}:\n"
        f"    profile: retry-circuit-breaker\n    workers: {shop_workers}\n"
    )


def _die_with_parent() -> None:
    """In the child: SIGTERM when this script dies, even by SIGKILL (the harness then stops
    its own processes, as on Ctrl-C)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def stop_harness(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the harness stops its processes and keeps partial results, as on Ctrl-C), then
    SIGKILL (its orphan guards then stop their groups)."""
    # Not SIGINT: a shell that starts this script in the background makes it ignore SIGINT,
    # and the harness inherits that; its SIGTERM handler is its own.
    for sig, wait_s in ((signal.SIGTERM, STOP_TERM_S), (signal.SIGKILL, STOP_KILL_S)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait_s)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def new_run_dir(parent: Path, before: set[str]) -> Path | None:
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(parent)):
            if name not in before and (parent / name / "manifest.json").exists():
                return parent / name
    return None


@dataclass
class Soak:
    """What one soak measured: the processes, the run's folder, how it ended."""

    tracker: Tracker
    run_dir: Path | None = None
    load_start: float | None = None
    load_s: float = 0.0
    exit_code: int | None = None
    interrupted: bool = False
    times: list[float] = field(default_factory=list)


def fmt_t(t: float) -> str:
    return f"{int(t // 60):3d}:{int(t % 60):02d}"


def run_soak(args: argparse.Namespace, scenario: Path, log: Path) -> Soak:
    """Start the harness, sample every ``interval`` from the load's start, wait for its exit."""
    results = Path(args.results).resolve()
    parent = results / SCENARIO_NAME
    before = set(os.listdir(parent)) if parent.is_dir() else set()
    argv = [str(HARNESS), "run", str(scenario), "--results", str(results)]
    if args.load_workers > 1:
        argv += ["--workers", str(args.load_workers)]
    print(f"$ {' '.join(argv)}", flush=True)
    with open(log, "wb") as out:
        harness = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches this script, which stops the harness
            preexec_fn=_die_with_parent,
        )
    soak = Soak(Tracker(harness.pid), load_s=args.warmup + args.minutes * 60)
    try:
        watch(args, soak, harness, parent, before)
    except KeyboardInterrupt:
        soak.interrupted = True
        print("\ninterrupted: stopping the harness (its processes stop, results are kept)")
    finally:
        # Neither Ctrl-C nor SIGTERM may cut the stop short; it is bounded (STOP_TERM_S ...).
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        old_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            stop_harness(harness)
            time.sleep(0.5)  # the orphan guards of a killed harness stop their groups
            for proc in soak.tracker.leftovers():
                print(f"left running after the harness exited, killed: {proc.label} ({proc.pid})")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)
        soak.exit_code = harness.returncode
        if soak.run_dir is None:
            soak.run_dir = new_run_dir(parent, before)
    return soak


def watch(
    args: argparse.Namespace,
    soak: Soak,
    harness: subprocess.Popen[bytes],
    parent: Path,
    before: set[str],
) -> None:
    """Sample at the load's start + k x interval, and once more just before its end."""
    interval = args.interval
    next_k = 0
    last_sent: tuple[float, int] | None = None
    hung_at: float | None = None
    while harness.poll() is None:  # bounded: the harness is stopped once past hung_at
        time.sleep(0.5)
        soak.tracker.scan()
        if soak.run_dir is None:
            soak.run_dir = new_run_dir(parent, before)
            if soak.run_dir is not None:
                print(f"run folder: {soak.run_dir}", flush=True)
        if soak.load_start is None and soak.run_dir is not None:
            build = read_json(soak.run_dir / "manifest.json").get("builds", {}).get(BUILD, {})
            if isinstance(build.get("load_start"), int | float):
                soak.load_start = float(build["load_start"])
                hung_at = soak.load_start + soak.load_s + AFTER_LOAD_S
        if soak.load_start is None or soak.run_dir is None:
            continue
        now = time.time() - soak.load_start
        if hung_at is not None and time.time() > hung_at:
            print(
                f"the harness has not exited {AFTER_LOAD_S:g} s after the load's end: stopping it"
            )
            return
        end_t = soak.load_s - 1.0  # the last moment every process of the load surely runs
        due = next_k * interval
        if due > end_t and soak.times and soak.times[-1] < end_t - 0.5 * interval:
            due = end_t  # the end sample, when the schedule does not land near the end
        elif due > end_t:
            continue
        if now < due:
            continue
        total = soak.tracker.sample(due)
        soak.times.append(due)
        next_k += 1
        progress = read_json(soak.run_dir / BUILD / "progress.json")
        sent = sum(int(v) for v in progress.get("sent", {}).values())
        rate = ""
        if last_sent is not None and due > last_sent[0]:
            rate = f", sent {(sent - last_sent[1]) / (due - last_sent[0]):.0f}/s since the last"
        last_sent = (due, sent)
        live = sum(1 for p in soak.tracker.procs.values() if due in p.rss_kb)
        print(
            f"[{fmt_t(due)}] RSS {total / 1024:7.1f} MB over {live} processes; "
            f"requests sent {sent}{rate}",
            flush=True,
        )


# ---------------------------------------------------------------- the tables


def mb(kb: float) -> str:
    return f"{kb / 1024:.1f} MB"


def memory_table(soak: Soak, settle_s: float) -> None:
    """RSS at the settle sample and at the end, growth, verdict; one line per process."""
    if not soak.times:
        print("no RSS sample was taken (the load never started)")
        return
    settle = next((t for t in soak.times if t >= settle_s), None)
    last = soak.times[-1]
    head = f"RSS @{fmt_t(settle).strip()}" if settle is not None else "RSS @settle"
    print(
        f"\nmemory: RSS of every process, sampled {len(soak.times)} times "
        f"(0:00 = the load's start, end = {fmt_t(last).strip()})"
    )
    print(
        f"{'process':30} {'pid':>7} {head:>12} {'RSS @end':>11} {'growth':>8} "
        f"{'MB/h':>7} {'peak':>10}  verdict (bound: growth < {BOUND_PCT:g}%)"
    )
    over: list[str] = []
    judged = 0
    for proc in sorted(soak.tracker.procs.values(), key=lambda p: p.pid):
        a = proc.rss_kb.get(settle) if settle is not None else None
        b = proc.rss_kb.get(last)
        growth = slope = "-"
        if settle is None or settle >= last:
            verdict = f"run too short: no sample after {fmt_t(settle_s).strip()} before the end"
        elif a is None or b is None:
            verdict = "not running at both samples"
        else:
            pct = 100.0 * (b - a) / a
            growth = f"{pct:+.1f}%"
            slope = f"{fit_mb_per_h(proc, settle):+.1f}"
            judged += 1
            verdict = "holds" if pct < BOUND_PCT else "EXCEEDS"
            if pct >= BOUND_PCT:
                over.append(proc.label)
        print(
            f"{proc.label[:30]:30} {proc.pid:>7} {mb(a) if a else '-':>12} "
            f"{mb(b) if b else '-':>11} {growth:>8} {slope:>7} {mb(proc.hwm_kb):>10}  {verdict}"
        )
    procs = soak.tracker.procs.values()
    total_settle = mb(sum(p.rss_kb.get(settle, 0) for p in procs)) if settle is not None else "-"
    total_end = mb(sum(p.rss_kb.get(last, 0) for p in procs))
    print(f"{'all together':30} {'':>7} {total_settle:>12} {total_end:>11}")
    if judged:
        span = fmt_t(last - settle).strip() if settle is not None else "?"
        print(
            f"bound 'RSS growth < {BOUND_PCT:g}% after the first {settle_s / 60:g} min' over "
            f"{span} min: "
            + ("holds for every process" if not over else f"EXCEEDED by {', '.join(over)}")
        )


def fit_mb_per_h(proc: Proc, settle: float) -> float:
    """Least-squares slope of RSS over the samples from ``settle`` on, in MB per hour."""
    points = [(t, kb / 1024) for t, kb in proc.rss_kb.items() if t >= settle]
    if len(points) < 2:
        return 0.0
    mt = sum(t for t, _ in points) / len(points)
    mr = sum(r for _, r in points) / len(points)
    var = sum((t - mt) ** 2 for t, _ in points)
    cov = sum((t - mt) * (r - mr) for t, r in points)
    return cov / var * 3600 if var else 0.0


def rate_check(run_dir: Path, rate: float, cut_short: bool) -> None:
    """What the run sustained, from its own samples: per-minute 2xx answers, lateness, latency."""
    import numpy as np
    import pyarrow.parquet as pq

    path = run_dir / BUILD / "samples.parquet"
    manifest = read_json(run_dir / "manifest.json")
    build = manifest.get("builds", {}).get(BUILD, {})
    t0 = build.get("t0")
    if not path.exists() or not isinstance(t0, int | float):
        print(f"\nrate: no samples to check ({path} missing or no t0 in the manifest)")
        return
    cols = ["endpoint", "intended_start", "actual_start", "end", "status"]
    frame = pq.read_table(path, columns=cols).to_pandas()
    intended, actual, end, status = (
        frame[c].to_numpy(dtype=float, na_value=np.nan)
        for c in ("intended_start", "actual_start", "end", "status")
    )
    endpoint = frame["endpoint"].astype(str).to_numpy()
    duration = float(read_json(run_dir / "report.json").get("duration_s") or 0.0)
    if cut_short or not duration:  # what the load covered before it was stopped
        duration = max(0.0, float(np.nanmax(intended)) - t0) if len(intended) else 0.0
    # As the report counts: intended starts are stored to the microsecond.
    window = (intended >= t0 - EPS_S) & (intended < t0 + duration - EPS_S)
    ok = (status >= 200) & (status < 300)
    what = (
        "the part of the measured window the load covered" if cut_short else "the measured window"
    )
    print(f"\nrate: offered {rate:g}/s over {what}, {duration / 60:.2f} min")
    for ep in sorted(set(endpoint[window])):
        sel = window & (endpoint == ep)
        n = int(sel.sum())
        lat = (end - intended)[sel & ~np.isnan(end)]
        late = (actual - intended)[sel]
        print(
            f"  {ep:10} requests {n} ({n / duration:.1f}/s), 2xx {100 * ok[sel].mean():.2f}%, "
            f"latency p50 {q_ms(lat, 50)} p99 {q_ms(lat, 99)} max {q_ms(lat, 100)}, "
            f"send lateness p99 {q_ms(late, 99)} max {q_ms(late, 100)}"
        )
    # Answers per whole minute of the window, by when they came: what the shop delivered.
    minutes = int(duration // 60)
    if minutes < 1:
        print("  (window under a minute: no per-minute figures)")
        return
    answered = end[ok & window]
    edges = t0 + 60.0 * np.arange(minutes + 1)
    per_min = np.histogram(answered, bins=edges)[0] / 60.0
    lat_all = (end - intended)[window & ~np.isnan(end)]
    late_all = (actual - intended)[window]
    lat_p99 = float(np.percentile(lat_all, 99)) if len(lat_all) else float("inf")
    late_p99 = float(np.percentile(late_all, 99)) if len(late_all) else float("inf")
    unanswered = int((window & np.isnan(end)).sum())
    print(
        f"  achieved (2xx answers by arrival time, per whole minute): mean {per_min.mean():.1f}/s, "
        f"min {per_min.min():.1f}/s (minute {int(per_min.argmin()) + 1}), max {per_min.max():.1f}/s"
        f"; unanswered {unanswered}"
    )
    held = (
        per_min.min() >= HELD_SHARE * rate
        and lat_p99 < HELD_LATENCY_P99_S
        and late_p99 < HELD_LATENESS_P99_S
    )
    print(
        f"  rate {rate:g}/s {'held' if held else 'NOT held'} (every minute >= "
        f"{HELD_SHARE * 100:g}% of it answered 2xx: min {per_min.min() / rate * 100:.1f}%; "
        f"latency p99 {lat_p99 * 1000:.1f} ms < {HELD_LATENCY_P99_S * 1000:g} ms; "
        f"send lateness p99 {late_p99 * 1000:.1f} ms < {HELD_LATENESS_P99_S * 1000:g} ms)"
    )


def q_ms(values: Any, q: float) -> str:
    import numpy as np

    return f"{float(np.percentile(values, q)) * 1000:.1f} ms" if len(values) else "-"


def keep(soak: Soak, log: Path) -> None:
    """The samples and the harness's console output go into the run's folder, beside its
    report."""
    if soak.run_dir is None:
        return
    rows = ["t_s,pid,process,rss_kb"]
    for proc in soak.tracker.procs.values():
        rows += [f"{t:g},{proc.pid},{proc.label},{kb}" for t, kb in sorted(proc.rss_kb.items())]
    try:
        (soak.run_dir / "soak-rss.csv").write_text("\n".join(rows) + "\n")
        shutil.copyfile(log, soak.run_dir / "soak-harness.log")
    except OSError as exc:
        print(f"could not keep the samples in {soak.run_dir}: {exc}")


def tail(path: Path, lines: int) -> Iterator[str]:
    with contextlib.suppress(OSError):
        yield from path.read_text(errors="replace").splitlines()[-lines:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=60, help="measured window, minutes")
    parser.add_argument("--rate", type=float, default=1000, help="requests/s, all endpoints")
    parser.add_argument(
        "--payments-pct", type=float, default=0,
        help="share of --rate sent to POST /api/payments (through the gateway), in %%; the "
        "rest reads GET /api/products/{id} (0: what the shop holds at 1,000/s on 2 cores)",
    )  # fmt: skip
    parser.add_argument("--interval", type=float, default=60, help="seconds between samples")
    parser.add_argument("--settle", type=float, default=5, help="warm-up minutes not judged")
    parser.add_argument("--warmup", type=float, default=10, help="the scenario's warmup, s")
    parser.add_argument("--shop-workers", type=int, default=200, help="the shop's threads")
    parser.add_argument("--load-workers", type=int, default=1, help="harness run --workers")
    parser.add_argument("--results", default=str(ROOT / "results"), help="harness --results")
    args = parser.parse_args()
    if not (0 <= args.payments_pct <= 100 and args.rate > 0 and args.minutes > 0):
        print("--payments-pct must be 0-100, --rate and --minutes above 0")
        return 0
    signal.signal(signal.SIGTERM, _interrupt)
    payments = args.rate * args.payments_pct / 100
    print(
        f"soak: {args.rate:g} requests/s ({payments:g} payments/s through the gateway, "
        f"{args.rate - payments:g} product reads/s) for {args.minutes:g} min after a "
        f"{args.warmup:g} s warmup; RSS every {args.interval:g} s; {os.cpu_count()} CPUs"
    )
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        scenario = Path(tmp) / "soak.yaml"
        scenario.write_text(
            scenario_text(
                args.rate, args.payments_pct, args.minutes, args.warmup, args.shop_workers
            )
        )
        log = Path(tmp) / "harness.log"
        soak: Soak | None = None
        try:
            soak = run_soak(args, scenario, log)
            state = "interrupted" if soak.interrupted else "finished"
            print(f"harness run {state}, exit code {soak.exit_code}; results: {soak.run_dir}")
            if soak.exit_code != 0 and not soak.interrupted:
                print("last lines of its output:", *(f"  {x}" for x in tail(log, 15)), sep="\n")
            memory_table(soak, args.settle * 60)
            if soak.run_dir is not None:
                rate_check(soak.run_dir, args.rate, soak.interrupted)
            keep(soak, log)
            left = soak.tracker.leftovers()
            print(
                f"\nprocesses of the run still running: {len(left)}"
                + "".join(f"\n  {p.label} ({p.pid})" for p in left)
            )
        except KeyboardInterrupt:
            print("interrupted while printing the figures")
        except Exception:
            print(f"failed\n{traceback.format_exc()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
