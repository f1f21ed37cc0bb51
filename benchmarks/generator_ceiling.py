"""Benchmark: how many requests per second the open-model load generator holds on one core.

The server is nginx (Debian's, started here with its own config in a temporary
directory: one worker per server CPU, pinned with ``taskset``, a tiny static
``200 ok``, keep-alive without a request limit), so the server is never the
slow part. Every client is pinned to the generator CPU(s), and each is measured
in the same invocation:

  harness      the locustfile ``harness run`` starts (harness/load/locustfile.py),
               driven alone as the orchestrator drives it (plan.json, progress.json,
               go.json), one rate at a time: achieved rate, dispatch lateness
               (actual - intended start) p50/p99/max, errors, CPU
  Locust       plain Locust FastHttpUser, closed loop, 50 users, no wait: its peak
  wrk          ``wrk -t1 -c50``: the peak of a C client, i.e. what the server and
               loopback allow (skipped, with how to install it, if wrk is missing)

The harness's ceiling is its highest offered rate that *holds*: lateness p99
<= 5 ms, no errors, and at least 99% of the offered rate achieved. It is printed
as a ratio to plain Locust's peak (the issue's target: 1.5x). ``--workers 1,2``
then runs N Locust workers (a master and N workers, as ``harness run --workers
N``) at N x that ceiling and prints the scaling efficiency, achieved / (N x
ceiling). ``--profile RATE`` samples one generator at RATE with py-spy and prints
where its time goes.

Run: ``.venv/bin/python benchmarks/generator_ceiling.py`` (about 4 minutes here);
``--rates 2000,4000 --seconds 10 --workers 1,2,4,8 --server-cpus 1
--generator-cpus 0``. Bounded (every process waited for with a deadline); always
exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

import numpy as np

from harness.core.net import LOOPBACK
from harness.load.plan import EndpointPlan, LoadPlan
from harness.run.loadgen import (
    LOCUSTFILE,
    free_port,
    locust_argv,
    master_argv,
    read_progress,
    worker_argv,
)

T = TypeVar("T")
WARMUP_S = 1.0
"""Left out of every figure: the first connections open then."""
LATENESS_P99_S = 0.005
HOLDS_SHARE = 0.99
READY_S = 90.0
CLOSED_USERS = 50
LOCUSTFILE_OVERRIDE = ""
"""``--locustfile``: another version of the harness's locustfile, to compare before/after."""
DEFAULT_RATES = "4000,8000,10000,12000,13000,14000,15000,16000"

PLAIN_LOCUSTFILE = """\
from locust import FastHttpUser, constant, task


class Closed(FastHttpUser):
    wait_time = constant(0)

    @task
    def get(self):
        self.client.get("/")
"""

NGINX_CONF = """\
worker_processes {workers};
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_rlimit_nofile 65536;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""


# ---------------------------------------------------------------- processes


def _pinned(cpus: str, argv: list[str]) -> list[str]:
    return ["taskset", "-c", cpus, *argv]


def _children_cpu_s() -> float:
    """CPU seconds of every child reaped so far: a difference around a run is that run's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_s(procs: list[subprocess.Popen[bytes]]) -> float:
    """CPU seconds (user + system) the running processes have used so far."""
    total = 0.0
    for p in procs:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{p.pid}/stat").read_text().rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.time()))


def _wait_all(procs: list[subprocess.Popen[bytes]], deadline: float) -> None:
    """Wait for every process until ``deadline``, then kill what is left (and reap it)."""
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait()


@contextlib.contextmanager
def nginx(work: Path, cpus: str) -> Iterator[str]:
    """nginx on ``cpus`` (one worker per CPU) serving ``200 ok``; yields its base URL."""
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    ndir = work / "nginx"
    (ndir / "body").mkdir(parents=True)
    workers = len(_cpu_list(cpus))
    (ndir / "nginx.conf").write_text(NGINX_CONF.format(workers=workers, dir=ndir, port=port))
    log = open(ndir / "stdout.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        _pinned(cpus, [exe, "-p", str(ndir), "-c", str(ndir / "nginx.conf"), "-e", "stderr"]),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), 0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"nginx did not start: {(ndir / 'stdout.log').read_text()[-500:]}"
                )
            time.sleep(0.05)
        yield f"http://{LOOPBACK}:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _cpu_list(cpus: str) -> list[int]:
    """``0``, ``0,2`` or ``0-3`` as a list of CPU numbers."""
    out: list[int] = []
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


# ---------------------------------------------------------------- the harness's generator


@dataclass
class Outcome:
    """One run of the harness's generator at one offered rate (measured window only)."""

    offered: float
    workers: int
    planned: int = 0
    recorded: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    achieved: float = 0.0
    lateness_ms: tuple[float, float, float] = (0.0, 0.0, 0.0)
    seconds: float = 1.0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    problem: str | None = None

    @property
    def holds(self) -> bool:
        return (
            self.problem is None
            and not self.errors
            and self.recorded == self.planned
            and self.lateness_ms[1] <= LATENESS_P99_S * 1000
            and self.achieved >= HOLDS_SHARE * self.offered
        )


def _plan(url: str, rate: float, seconds: float, workers: int, d: Path) -> LoadPlan:
    return LoadPlan(
        base_url=url,
        seed=1,
        warmup_s=WARMUP_S,
        duration_s=seconds,
        drain_s=2.0,
        endpoints={"get": EndpointPlan("GET", "/", rate, 5.0)},
        samples_path=str(d / "samples.csv"),
        progress_path=str(d / "progress.json"),
        go_path=str(d / "go.json"),
        workers=workers,
    )


def start_harness(
    url: str, rate: float, seconds: float, workers: int, cpus: str, d: Path
) -> tuple[LoadPlan, list[subprocess.Popen[bytes]]]:
    """Start the harness's Locust process(es) as ``harness run`` does, pinned to ``cpus``."""
    d.mkdir(parents=True)
    plan = _plan(url, rate, seconds, workers, d)
    plan.write(d / "plan.json")
    env = {**os.environ, "HARNESS_LOAD_PLAN": str(d / "plan.json")}
    if workers == 1:
        argvs = [locust_argv(plan)]
    else:
        port = free_port()
        argvs = [master_argv(plan, LOOPBACK, port, READY_S)]
        argvs += [worker_argv(LOOPBACK, port)] * workers
    if LOCUSTFILE_OVERRIDE:
        argvs = [[LOCUSTFILE_OVERRIDE if a == str(LOCUSTFILE) else a for a in av] for av in argvs]
    procs = []
    for k, argv in enumerate(argvs):
        with open(d / f"locust{k}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    _pinned(cpus, argv), cwd=d, env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
    return plan, procs


def go(plan: LoadPlan, procs: list[subprocess.Popen[bytes]]) -> float:
    """Wait until the generator says ready, then write ``go.json``; the load's start time."""
    deadline = time.monotonic() + READY_S
    while read_progress(Path(plan.progress_path)).get("state") != "ready":
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            raise RuntimeError("the generator never got ready")
        time.sleep(0.05)
    start_at = time.time() + 0.5
    tmp = Path(plan.go_path).with_suffix(".tmp")
    tmp.write_text(json.dumps({"start_at": start_at}))
    os.replace(tmp, plan.go_path)
    return start_at


def run_harness(url: str, rate: float, seconds: float, workers: int, cpus: str, d: Path) -> Outcome:
    out = Outcome(rate, workers, seconds=seconds)
    plan, procs = start_harness(url, rate, seconds, workers, cpus, d)
    try:
        start_at = go(plan, procs)
        _sleep_until(start_at + plan.warmup_s)
        cpu0 = _cpu_s(procs)
        _sleep_until(start_at + plan.total_s)
        out.cpu_s = _cpu_s(procs) - cpu0
        _wait_all(procs, time.monotonic() + plan.drain_s + 60)
    finally:
        _wait_all(procs, time.monotonic())
    progress = read_progress(Path(plan.progress_path))
    if progress.get("state") != "finished":
        out.problem = f"generator ended in state {progress.get('state')!r}: {progress.get('error')}"
    paths = (
        [plan.samples_path]
        if workers == 1
        else [plan.worker_samples_path(k) for k in range(workers)]
    )
    t0 = start_at + plan.warmup_s
    warm = math.ceil(rate * plan.warmup_s - 1e-9)  # requests planned before t0 (uniform)
    lateness, last_end, seen = [], t0, set()
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                index = int(row["index"])
                seen.add(index)
                if index < warm:
                    continue
                intended = float(row["intended_start"])
                out.recorded += 1
                lateness.append(float(row["actual_start"]) - intended)
                if row["error"]:
                    out.errors[row["error"]] += 1
                else:
                    out.ok += 1
                    last_end = max(last_end, float(row["end"]))
    total = plan.planned_count("get")
    out.planned = total - warm
    if len(seen) != total and out.problem is None:
        out.problem = f"{total - len(seen)} planned requests not recorded"
    out.wall_s = last_end - t0
    out.achieved = out.ok / max(out.wall_s, seconds)
    if lateness:
        p50, p99 = np.percentile(lateness, [50, 99])
        out.lateness_ms = (p50 * 1000, p99 * 1000, max(lateness) * 1000)
    return out


def _outcome_line(o: Outcome) -> str:
    errors = sum(o.errors.values())
    why = ", ".join(f"{k} {v}" for k, v in o.errors.most_common(3))
    p50, p99, mx = o.lateness_ms
    cpu = o.cpu_s / o.seconds
    line = (
        f"  {o.offered:>9,.0f} {o.achieved:>10,.0f} {o.recorded:>9,} {errors:>7,}"
        f"  {p50:>7.2f} {p99:>8.2f} {mx:>8.1f}  {cpu:>5.0%}  {'holds' if o.holds else '-'}"
    )
    if why:
        line += f"  ({why})"
    if o.problem:
        line += f"  [{o.problem}]"
    return line


HEADER = "  offered/s achieved/s  measured  errors  lat p50  lat p99  lat max   CPU*"


# ---------------------------------------------------------------- references


def run_plain_locust(url: str, seconds: float, cpus: str, d: Path) -> tuple[float, int, float]:
    """Plain Locust FastHttpUser, closed loop: (requests/s, failures, CPU share)."""
    d.mkdir(parents=True)
    (d / "closed.py").write_text(PLAIN_LOCUSTFILE)
    argv = [
        sys.executable, "-m", "locust", "-f", str(d / "closed.py"), "--headless",
        "-u", str(CLOSED_USERS), "-r", str(CLOSED_USERS), "--run-time", f"{seconds:g}s",
        "--host", url, "--only-summary", "--csv", str(d / "closed"), "--loglevel", "WARNING",
    ]  # fmt: skip
    cpu0, t = _children_cpu_s(), time.monotonic()
    with open(d / "locust.log", "wb") as log:
        proc = subprocess.Popen(_pinned(cpus, argv), cwd=d, stdout=log, stderr=subprocess.STDOUT)
    _wait_all([proc], time.monotonic() + seconds + 60)
    cpu = (_children_cpu_s() - cpu0) / (time.monotonic() - t)
    with open(d / "closed_stats.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["Name"] == "Aggregated":
                return float(row["Requests/s"]), int(row["Failure Count"]), cpu
    raise RuntimeError("no Aggregated row in Locust's stats")


def run_wrk(url: str, seconds: float, cpus: str) -> float:
    """wrk's requests/s with one thread and 50 connections."""
    argv = ["wrk", "-t1", f"-c{CLOSED_USERS}", f"-d{seconds:g}s", url + "/"]
    done = subprocess.run(_pinned(cpus, argv), capture_output=True, text=True, timeout=seconds + 30)
    m = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    if m is None:
        raise RuntimeError(f"wrk said: {done.stdout[-300:]} {done.stderr[-300:]}")
    return float(m.group(1))


# ---------------------------------------------------------------- profile


def profile(url: str, rate: float, seconds: float, cpus: str, d: Path, top: int = 25) -> None:
    """Sample the generator with py-spy at ``rate`` and print the functions its time goes to."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("  py-spy not found: .venv/bin/pip install py-spy")
        return
    plan, procs = start_harness(url, rate, seconds, 1, cpus, d)
    raw = d / "profile.txt"
    try:
        go(plan, procs)
        time.sleep(0.5 + WARMUP_S)
        subprocess.run(
            [
                spy,
                "record",
                "--pid",
                str(procs[0].pid),
                "--rate",
                "250",
                "--duration",
                f"{max(1, int(seconds) - 1)}",
                "--format",
                "raw",
                "--output",
                str(raw),
                "--nonblocking",
            ],  # fmt: skip
            capture_output=True,
            timeout=seconds + 60,
        )
        _wait_all(procs, time.monotonic() + plan.total_s + plan.drain_s + 60)
    finally:
        _wait_all(procs, time.monotonic())
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_frame(f) for f in stack.split(";") if f]
        if frames:
            own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    if not total:
        print("  py-spy recorded nothing (it needs ptrace: run as root or with CAP_SYS_PTRACE)")
        return
    print(f"  {total} samples; own time (the function itself), then inclusive:")
    for name, n in own.most_common(top):
        print(f"    own {n / total:6.1%}  {name}")
    for name, n in inclusive.most_common(top):
        print(f"    inc {n / total:6.1%}  {name}")


def _frame(text: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py)``: one entry per function."""
    m = re.match(r"(.*) \((.*?):\d+\)$", text.strip())
    if m is None:
        return text.strip()
    return f"{m.group(1)} ({'/'.join(Path(m.group(2)).parts[-2:])})"


# ---------------------------------------------------------------- main


def _safely(label: str, step: Callable[[], T]) -> T | None:
    """Run one measurement; a failure is printed (with its traceback) and the rest goes on."""
    try:
        return step()
    except Exception:
        print(f"  {label}: failed")
        traceback.print_exc(limit=3, file=sys.stdout)
        return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default=DEFAULT_RATES, help="offered rates, requests/s")
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    ap.add_argument("--workers", default="1,2", help="Locust worker counts for scaling")
    ap.add_argument("--server-cpus", default="1", help="CPUs for nginx (taskset list)")
    ap.add_argument("--generator-cpus", default="0", help="CPUs for every client (taskset list)")
    ap.add_argument("--profile", type=float, default=None, metavar="RATE",
                    help="also sample the generator with py-spy at RATE requests/s")  # fmt: skip
    ap.add_argument("--skip-references", action="store_true", help="no Locust or wrk runs")
    ap.add_argument("--keep", action="store_true", help="keep the samples (folder printed)")
    ap.add_argument("--locustfile", default="",
                    help="drive this locustfile instead of the harness's own (e.g. an older "
                    "version: git show REV:harness/load/locustfile.py > /tmp/old.py)")  # fmt: skip
    args = ap.parse_args()
    global LOCUSTFILE_OVERRIDE
    LOCUSTFILE_OVERRIDE = args.locustfile
    rates = [float(r) for r in args.rates.split(",")]
    worker_counts = [int(w) for w in args.workers.split(",")]
    gen, srv = args.generator_cpus, args.server_cpus
    work = Path(tempfile.mkdtemp(prefix="gen-ceiling-"))
    try:
        with nginx(work, srv) as url:
            _bench(args, url, rates, worker_counts, gen, srv, work)
    except Exception:
        print("benchmark failed:")
        traceback.print_exc(file=sys.stdout)
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _bench(
    args: argparse.Namespace,
    url: str,
    rates: list[float],
    worker_counts: list[int],
    gen: str,
    srv: str,
    work: Path,
) -> None:
    version = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
    print(
        f"server: {version}, {len(_cpu_list(srv))} worker(s) on CPU {srv}, 'return 200 ok'; "
        f"clients on CPU {gen}; {os.cpu_count()} CPUs here"
    )
    print(
        f"harness open model, one Locust process (harness/load/locustfile.py as harness run "
        f"starts it), {args.seconds:g} s per rate after a {WARMUP_S:g} s warmup (left out)"
    )
    print(HEADER)
    outcomes: list[Outcome] = []
    for rate in rates:
        o = _safely(
            f"{rate:g}/s",
            partial(run_harness, url, rate, args.seconds, 1, gen, work / f"h1-{rate:g}"),
        )
        if o is not None:
            outcomes.append(o)
            print(_outcome_line(o), flush=True)
    print(
        "  lateness (actual - intended start) in ms; * CPU: the generator's CPU time over the "
        "measured seconds (one whole core: 100%)"
    )
    plain: float | None = None
    if not args.skip_references:
        print(f"references on the same CPU ({gen}), {args.seconds:g} s each:")
        got = _safely(
            "plain Locust", partial(run_plain_locust, url, args.seconds, gen, work / "plain")
        )
        if got is not None:
            plain, failures, cpu = got
            print(
                f"  plain Locust FastHttpUser, closed loop, {CLOSED_USERS} users, no wait: "
                f"{plain:,.0f}/s (failures {failures}, CPU {cpu:.0%})"
            )
        if shutil.which("wrk") is None:
            print("  wrk: not installed, skipped (apt-get install -y wrk)")
        elif (wrk := _safely("wrk", partial(run_wrk, url, args.seconds, gen))) is not None:
            print(f"  wrk -t1 -c{CLOSED_USERS}: {wrk:,.0f}/s (the server's and loopback's limit)")
    held = [o for o in outcomes if o.holds]
    ceiling = max((o.offered for o in held), default=None)
    if ceiling is None:
        print("harness ceiling: no rate held (lateness p99 <= 5 ms, no errors, >= 99% achieved)")
    else:
        ratio = f" = {ceiling / plain:.2f}x plain Locust (target 1.5x)" if plain else ""
        print(
            f"harness ceiling: {ceiling:,.0f}/s held (lateness p99 <= 5 ms, no errors, "
            f">= 99% achieved){ratio}"
        )
        if ceiling == max(rates):
            print("  (the highest rate tried: the ceiling may be higher, add --rates)")
    if ceiling is not None and any(w > 1 for w in worker_counts):
        _scaling(args, url, ceiling, outcomes, worker_counts, gen, work)
    if args.profile:
        print(f"profile: one generator at {args.profile:,.0f}/s, py-spy, {args.seconds:g} s")
        _safely("profile", partial(profile, url, args.profile, args.seconds, gen, work / "prof"))


def _scaling(
    args: argparse.Namespace,
    url: str,
    ceiling: float,
    outcomes: list[Outcome],
    worker_counts: list[int],
    gen: str,
    work: Path,
) -> None:
    share = len(_cpu_list(gen))
    print(
        f"scaling: N Locust workers (+ a master) at N x {ceiling:,.0f}/s; efficiency = "
        f"achieved / (N x {ceiling:,.0f}/s)"
    )
    if share < max(worker_counts):
        print(
            f"  note: the generator has {share} CPU(s) here, so up to {max(worker_counts)} "
            "workers share them: efficiency near 1/N per extra worker is this machine's limit, "
            "not the generator's; run with --generator-cpus on a bigger machine"
        )
    print("  workers " + HEADER[2:] + "  efficiency")
    for n in worker_counts:
        if n == 1:
            o: Outcome | None = next(x for x in outcomes if x.offered == ceiling)
        else:
            o = _safely(
                f"{n} workers",
                partial(run_harness, url, n * ceiling, args.seconds, n, gen, work / f"w{n}"),
            )
        if o is not None:
            print(f"  {n:>7} " + _outcome_line(o)[2:] + f"  {o.achieved / (n * ceiling):.2f}")


if __name__ == "__main__":
    main()
