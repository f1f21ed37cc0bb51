"""Orchestration: run every build of a scenario under the same load and the same faults.

For each build in turn: start the gateway and the target on fresh loopback
ports, wait for health, start Locust, say go, watch progress while the
scraper records metrics, drain, then stop every process and write the build's
results. Whatever happens (a crash, Ctrl-C), processes are stopped and what
was measured is written, and the manifest says how the run ended.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

import harness.load
from harness.analysis.series import PRESETS, Scraper
from harness.core.errors import ProcessDied, RunError
from harness.load.plan import EndpointPlan, LoadPlan
from harness.results.model import (
    harness_version,
    host_info,
    ledger_from_csv,
    new_run_dir,
    payments_from_sqlite,
    samples_from_csv,
    utc_now,
    write_json_atomic,
    write_parquet_atomic,
    write_text_atomic,
)
from harness.run.processes import (
    LOOPBACK,
    ProcessGroup,
    listener,
    port_of,
    shielded_from_signals,
    wait_http,
)
from harness.scenario.schema import Build, LoadedScenario

_READY_TIMEOUT_S = 90.0
LOCUSTFILE = Path(harness.load.__file__).with_name("locustfile.py")
"""Run by Locust in its own process; never imported here (Locust patches with gevent)."""


@dataclass(frozen=True)
class Progress:
    """One live reading of a running build, for the CLI's progress line."""

    build: str
    elapsed_s: float
    total_s: float
    state: str
    offered_rps: dict[str, float]
    achieved_rps: dict[str, float]
    busy_workers: float | None
    max_workers: float | None
    breaker_state: str | None


@dataclass
class RunListener:
    """Callbacks the orchestrator fires; the CLI prints them, tests may record them."""

    build_started: Callable[[str], None] = lambda name: None
    progress: Callable[[Progress], None] = lambda p: None
    build_finished: Callable[[str, str], None] = lambda name, status: None


@dataclass
class Manifest:
    """The run's journal: what ran, on what, and how it ended (``manifest.json``)."""

    scenario_name: str
    scenario_file: str
    scenario_sha256: str
    seed: int
    harness_version: str
    host: dict[str, Any]
    started_at: str
    run_id: str
    repeat: int = 1
    status: str = "running"
    ended_at: str | None = None
    error: str | None = None
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)


def shop_config(
    build: Build, pg_url: str, listen_fd: int, metrics_fd: int, db: Path
) -> dict[str, Any]:
    """The JSON the reference target reads at start: Resilience4j settings in seconds."""
    r = build.resilience4j.retry
    config: dict[str, Any] = {
        "pg_url": pg_url,
        "profile": build.profile,
        "workers": build.workers,
        "connect_timeout_s": build.pg_client.connect_timeout,
        "read_timeout_s": build.pg_client.read_timeout,
        "listen_fd": listen_fd,
        "metrics_fd": metrics_fd,
        "db_path": str(db),
        "retry": {
            "max_attempts": r.max_attempts,
            "wait_duration_s": r.wait_duration,
            "enable_exponential_backoff": r.enable_exponential_backoff,
            "exponential_backoff_multiplier": r.exponential_backoff_multiplier,
            "exponential_max_wait_duration_s": r.exponential_max_wait_duration,
            "enable_randomized_wait": r.enable_randomized_wait,
            "randomized_wait_factor": r.randomized_wait_factor,
        },
    }
    cb = build.resilience4j.circuitbreaker
    if cb is not None:
        config["circuitbreaker"] = {
            "sliding_window_type": cb.sliding_window_type,
            "sliding_window_size": cb.sliding_window_size,
            "minimum_number_of_calls": cb.minimum_number_of_calls,
            "failure_rate_threshold": cb.failure_rate_threshold,
            "slow_call_rate_threshold": cb.slow_call_rate_threshold,
            "slow_call_duration_threshold_s": cb.slow_call_duration_threshold,
            "wait_duration_in_open_state_s": cb.wait_duration_in_open_state,
            "permitted_number_of_calls_in_half_open_state": (
                cb.permitted_number_of_calls_in_half_open_state
            ),
            "automatic_transition_from_open_to_half_open_enabled": (
                cb.automatic_transition_from_open_to_half_open_enabled
            ),
            "max_wait_duration_in_half_open_state_s": cb.max_wait_duration_in_half_open_state,
        }
    return config


class Experiment:
    """One run of a scenario: the composition root that owns the run folder and manifest."""

    def __init__(
        self,
        loaded: LoadedScenario,
        results_root: Path,
        listener: RunListener | None = None,
        builds: list[str] | None = None,
        repeat: int = 1,
    ) -> None:
        self.loaded = loaded
        self.scenario = loaded.scenario
        self.listener = listener or RunListener()
        self.build_names = builds or list(self.scenario.builds)
        self.repeat = repeat
        self.run_dir = new_run_dir(results_root, self.scenario.name)
        self.manifest = Manifest(
            scenario_name=self.scenario.name,
            scenario_file=loaded.path,
            scenario_sha256=loaded.sha256,
            seed=self.scenario.seed,
            harness_version=harness_version(),
            host=host_info(),
            started_at=utc_now(),
            run_id=self.run_dir.name,
            repeat=repeat,
        )
        write_text_atomic(self.run_dir / "scenario.yaml", loaded.text)
        self.save_manifest()

    def save_manifest(self) -> None:
        write_json_atomic(self.run_dir / "manifest.json", asdict(self.manifest))

    def run(self) -> Path:
        """Run every build in turn; always leaves a manifest that says how it ended."""
        try:
            # Interleaved (A B A B ...), so slow drift of the machine hits every build alike.
            for repetition in range(1, self.repeat + 1):
                for name in self.build_names:
                    self._run_build(name, repetition)
        except KeyboardInterrupt:
            self._end("interrupted", "interrupted by the user (SIGINT)")
            raise
        except RunError as exc:
            self._end("failed", str(exc))
            raise
        except BaseException as exc:
            self._end("failed", f"{type(exc).__name__}: {exc}")
            raise
        self._end("completed", None)
        return self.run_dir

    def _end(self, status: str, error: str | None) -> None:
        self.manifest.status = status
        self.manifest.error = error
        self.manifest.ended_at = utc_now()
        self.save_manifest()

    def _run_build(self, name: str, repetition: int = 1) -> None:
        build = self.scenario.builds[name]
        key = name if self.repeat == 1 else f"{name}.r{repetition}"
        bdir = self.run_dir / key
        bdir.mkdir()
        info: dict[str, Any] = {
            "build": name,
            "repetition": repetition,
            "status": "running",
            "started_at": utc_now(),
            "preset": "shop",
        }
        self.manifest.builds[key] = info
        self.save_manifest()
        self.listener.build_started(key)
        scraper: Scraper | None = None
        group = ProcessGroup(self.run_dir.name, bdir)
        try:
            scraper = self._start_processes(name, build, bdir, group, info)
            self._drive_load(key, bdir, group, scraper, info)
            info["status"] = "completed"
        except KeyboardInterrupt:
            info["status"] = "interrupted"
            raise
        except BaseException as exc:
            info["status"] = "failed"
            info["error"] = str(exc)
            raise
        finally:
            with shielded_from_signals():
                if scraper is not None:
                    scraper.stop()
                group.stop_all()
                self._save_build(bdir, scraper, info)
                info["ended_at"] = utc_now()
                self.save_manifest()
            self.listener.build_finished(key, info["status"])

    def _start_processes(
        self, name: str, build: Build, bdir: Path, group: ProcessGroup, info: dict[str, Any]
    ) -> Scraper:
        py = sys.executable
        # The gateway gets two listeners: its API (which a `refuse` fault stops) and a
        # control port for /metrics and /__admin that always answers.
        pg_sock, control_sock = listener(), listener(backlog=64)
        target_sock, metrics_sock = listener(), listener(backlog=64)
        pg_url = f"http://{LOOPBACK}:{port_of(pg_sock)}"
        control_url = f"http://{LOOPBACK}:{port_of(control_sock)}"
        target_url = f"http://{LOOPBACK}:{port_of(target_sock)}"
        metrics_url = f"http://{LOOPBACK}:{port_of(metrics_sock)}/metrics"
        info.update(
            pg_url=pg_url,
            pg_control_url=control_url,
            target_url=target_url,
            target_metrics_url=metrics_url,
        )
        try:
            group.start(
                "pg",
                [py, "-m", "harness.gateway", "--scenario", str(self.run_dir / "scenario.yaml"),
                 "--fd", str(pg_sock.fileno()), "--control-fd", str(control_sock.fileno()),
                 "--ledger", str(bdir / "pg-ledger.csv")],
                pass_fds=(pg_sock.fileno(), control_sock.fileno()),
            )  # fmt: skip
            config = shop_config(
                build, pg_url, target_sock.fileno(), metrics_sock.fileno(), bdir / "shop.sqlite"
            )
            (bdir / "target.json").write_text(json.dumps(config, indent=2))
            group.start(
                "target",
                [py, "-m", "targets.shop", "--config", str(bdir / "target.json")],
                pass_fds=(target_sock.fileno(), metrics_sock.fileno()),
            )
        finally:
            # The children hold their own copies; ours would keep the ports open after they stop.
            for sock in (pg_sock, control_sock, target_sock, metrics_sock):
                sock.close()
        info["processes"] = group.pids()
        self.save_manifest()
        wait_http(f"{control_url}/health", group, "pg")
        wait_http(f"{target_url}/health", group, "target")
        wait_http(metrics_url, group, "target")
        scraper = Scraper(
            {"target": metrics_url, "pg": f"{control_url}/metrics"}, self.scenario.metrics.interval
        )
        return scraper.start()

    def _plan(self, base_url: str, bdir: Path) -> LoadPlan:
        s = self.scenario
        return LoadPlan(
            base_url=base_url,
            seed=s.seed,
            warmup_s=s.warmup,
            duration_s=s.duration,
            drain_s=s.drain_s,
            endpoints={
                n: EndpointPlan(
                    method=e.method,
                    path=e.path,
                    rate=e.rate,
                    timeout_s=e.timeout,
                    params=dict(e.params),
                    body=e.body,
                    idempotency_key=e.idempotency_key,
                )
                for n, e in s.traffic.items()
            },
            samples_path=str(bdir / "samples.csv"),
            progress_path=str(bdir / "progress.json"),
            go_path=str(bdir / "go.json"),
        )

    def _drive_load(
        self, name: str, bdir: Path, group: ProcessGroup, scraper: Scraper, info: dict[str, Any]
    ) -> None:
        plan = self._plan(info["target_url"], bdir)
        plan.write(bdir / "plan.json")
        bound_s = plan.total_s + plan.drain_s + _READY_TIMEOUT_S + 30
        load = group.start(
            "load",
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(LOCUSTFILE),
                "--headless",
                "-u",
                "1",
                "-r",
                "1",
                "--run-time",
                f"{int(bound_s)}s",
                "--host",
                plan.base_url,
                "--only-summary",
                "--exit-code-on-error",
                "0",
                "--loglevel",
                "WARNING",
            ],
            env={"HARNESS_LOAD_PLAN": str(bdir / "plan.json")},
        )
        info["processes"] = group.pids()
        progress_path = Path(plan.progress_path)
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while _read_json(progress_path).get("state") != "ready":
            group.check_alive()
            if time.monotonic() > deadline:
                raise RunError(f"Locust did not get ready within {_READY_TIMEOUT_S:g}s")
            time.sleep(0.05)
        start_at = time.time() + 0.3
        t0 = start_at + plan.warmup_s
        httpx.post(
            f"{info['pg_control_url']}/__admin/start", json={"t0": t0}, timeout=5
        ).raise_for_status()
        write_json_atomic(Path(plan.go_path), {"start_at": start_at})
        info.update(load_start=start_at, t0=t0)
        self.save_manifest()
        self._watch(name, plan, start_at, group, scraper, load.popen.poll)

    def _watch(
        self,
        name: str,
        plan: LoadPlan,
        start_at: float,
        group: ProcessGroup,
        scraper: Scraper,
        load_exit: Callable[[], int | None],
    ) -> None:
        """Emit progress every second until the load generator finishes; fail if a process dies."""
        preset = PRESETS["shop"]
        previous: dict[str, Any] = {}
        hard_stop = start_at + plan.total_s + plan.drain_s + 30
        while True:
            time.sleep(1.0)
            progress = _read_json(Path(plan.progress_path))
            if progress.get("state") in ("finished", "interrupted") or load_exit() is not None:
                break
            group.check_alive("pg", "target")
            if time.time() > hard_stop:
                raise RunError("the load generator did not finish in time")
            self.listener.progress(
                _progress(name, plan, start_at, progress, previous, scraper, preset)
            )
            previous = progress
        code = load_exit()
        if code not in (None, 0):
            raise ProcessDied(f"Locust exited with code {code}; see {plan.progress_path}")
        if progress.get("state") != "finished":
            raise RunError(f"the load generator stopped early (state {progress.get('state')!r})")

    def _save_build(self, bdir: Path, scraper: Scraper | None, info: dict[str, Any]) -> None:
        samples = samples_from_csv(bdir / "samples.csv")
        write_parquet_atomic(samples, bdir / "samples.parquet")
        info["samples"] = len(samples)
        if scraper is not None:
            write_parquet_atomic(scraper.frame(), bdir / "metrics.parquet")
            info["scrape_failures"] = dict(scraper.failures)
        ledger = ledger_from_csv(bdir / "pg-ledger.csv")
        write_parquet_atomic(ledger, bdir / "pg.parquet")
        info["pg_calls"] = len(ledger)
        # Read after the target stopped: recording payments costs the hot path nothing extra.
        write_parquet_atomic(payments_from_sqlite(bdir / "shop.sqlite"), bdir / "payments.parquet")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _progress(
    name: str,
    plan: LoadPlan,
    start_at: float,
    now: dict[str, Any],
    before: dict[str, Any],
    scraper: Scraper,
    preset: Any,
) -> Progress:
    dt = max(1e-6, now.get("t", 0.0) - before.get("t", start_at))
    sent_now: dict[str, int] = now.get("sent", {})
    sent_before: dict[str, int] = before.get("sent", {})
    achieved = {ep: (sent_now.get(ep, 0) - sent_before.get(ep, 0)) / dt for ep in plan.endpoints}
    return Progress(
        build=name,
        elapsed_s=max(0.0, time.time() - start_at),
        total_s=plan.total_s,
        state=str(now.get("state", "?")),
        offered_rps={ep: e.rate for ep, e in plan.endpoints.items()},
        achieved_rps=achieved,
        busy_workers=scraper.latest_value("target", preset.busy_workers),
        max_workers=scraper.latest_value("target", preset.max_workers),
        breaker_state=scraper.latest_state("target", preset.breaker_state or ""),
    )
