"""Orchestration: run every build of a scenario under the same load and the same faults.

For each build in turn: start the gateway and the build's target on fresh
loopback ports, wait for health, start Locust, say go, watch progress while the
scraper records metrics, drain, then stop every process and write the build's
results. Whatever happens (a crash, Ctrl-C), processes are stopped and what
was measured is written, and the manifest says how the run ended.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from harness.analysis.series import Preset, Selector, preset_named
from harness.core.errors import ProcessDied, RunError
from harness.core.net import LOOPBACK, listener, port_of
from harness.load.plan import LoadPlan
from harness.results.io import (
    ledger_from_csv,
    new_run_dir,
    samples_from_csv,
    utc_now,
    write_json_atomic,
    write_parquet_atomic,
    write_text_atomic,
)
from harness.run.events import Progress, RunListener
from harness.run.loadgen import READY_TIMEOUT_S, locust_argv, plan_for, read_progress
from harness.run.manifest import Manifest
from harness.run.processes import ProcessGroup, shielded_from_signals, wait_http
from harness.run.scraper import Scraper
from harness.run.targets import Launch, Target, TargetContext, target_for
from harness.scenario.schema import LoadedScenario


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
        self.manifest = Manifest.begin(loaded, self.run_dir.name, repeat)
        write_text_atomic(self.run_dir / "scenario.yaml", loaded.text)
        self.save_manifest()

    def save_manifest(self) -> None:
        self.manifest.save(self.run_dir)

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
        self.manifest.end(status, error)
        self.save_manifest()

    def _run_build(self, name: str, repetition: int = 1) -> None:
        target = target_for(self.scenario.builds[name])
        key = name if self.repeat == 1 else f"{name}.r{repetition}"
        bdir = self.run_dir / key
        bdir.mkdir()
        info: dict[str, Any] = {
            "build": name,
            "repetition": repetition,
            "status": "running",
            "started_at": utc_now(),
            "preset": target.preset,
        }
        self.manifest.builds[key] = info
        self.save_manifest()
        self.listener.build_started(key)
        scraper: Scraper | None = None
        group = ProcessGroup(self.run_dir.name, bdir)
        try:
            scraper = self._start_processes(target, bdir, group, info)
            self._drive_load(key, bdir, group, scraper, preset_named(target.preset), info)
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
                self._save_build(bdir, scraper, target, info)
                info["ended_at"] = utc_now()
                self.save_manifest()
            self.listener.build_finished(key, info["status"])

    def _start_processes(
        self, target: Target, bdir: Path, group: ProcessGroup, info: dict[str, Any]
    ) -> Scraper:
        # The gateway gets two listeners: its API (which a `refuse` fault stops) and a
        # control port for /metrics and /__admin that always answers.
        pg_sock, control_sock = listener(), listener(backlog=64)
        pg_url = f"http://{LOOPBACK}:{port_of(pg_sock)}"
        control_url = f"http://{LOOPBACK}:{port_of(control_sock)}"
        launch: Launch | None = None
        try:
            launch = target.prepare(
                TargetContext(build_dir=bdir, pg_url=pg_url, run_id=self.run_dir.name)
            )
            info.update(
                pg_url=pg_url,
                pg_control_url=control_url,
                target_url=launch.url,
                target_metrics_url=launch.metrics_url,
            )
            group.start(
                "pg",
                [sys.executable, "-m", "harness.gateway",
                 "--scenario", str(self.run_dir / "scenario.yaml"),
                 "--fd", str(pg_sock.fileno()), "--control-fd", str(control_sock.fileno()),
                 "--ledger", str(bdir / "pg-ledger.csv")],
                pass_fds=(pg_sock.fileno(), control_sock.fileno()),
            )  # fmt: skip
            if launch.argv:
                group.start(
                    "target", list(launch.argv), pass_fds=launch.pass_fds, env=dict(launch.env)
                )
        finally:
            # The children hold their own copies; ours would keep the ports open after they stop.
            pg_sock.close()
            control_sock.close()
            if launch is not None:
                for fd in launch.pass_fds:
                    os.close(fd)
        info["processes"] = group.pids()
        self.save_manifest()
        wait_http(f"{control_url}/health", group, "pg")
        for url in launch.health_urls:
            wait_http(url, group, "target")
        sources = {"target": launch.metrics_url} if launch.metrics_url else {}
        scraper = Scraper(
            {**sources, "pg": f"{control_url}/metrics"}, self.scenario.metrics.interval
        )
        return scraper.start()

    def _drive_load(
        self,
        key: str,
        bdir: Path,
        group: ProcessGroup,
        scraper: Scraper,
        preset: Preset,
        info: dict[str, Any],
    ) -> None:
        plan = plan_for(self.scenario, info["target_url"], bdir)
        plan.write(bdir / "plan.json")
        load = group.start(
            "load", locust_argv(plan), env={"HARNESS_LOAD_PLAN": str(bdir / "plan.json")}
        )
        info["processes"] = group.pids()
        progress_path = Path(plan.progress_path)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while read_progress(progress_path).get("state") != "ready":
            group.check_alive()
            if time.monotonic() > deadline:
                raise RunError(f"Locust did not get ready within {READY_TIMEOUT_S:g}s")
            time.sleep(0.05)
        start_at = time.time() + 0.3
        t0 = start_at + plan.warmup_s
        httpx.post(
            f"{info['pg_control_url']}/__admin/start", json={"t0": t0}, timeout=5
        ).raise_for_status()
        write_json_atomic(Path(plan.go_path), {"start_at": start_at})
        info.update(load_start=start_at, t0=t0)
        self.save_manifest()
        self._watch(key, plan, start_at, group, scraper, preset, load.popen.poll)

    def _watch(
        self,
        key: str,
        plan: LoadPlan,
        start_at: float,
        group: ProcessGroup,
        scraper: Scraper,
        preset: Preset,
        load_exit: Callable[[], int | None],
    ) -> None:
        """Emit progress every second until the load generator finishes; fail if a process dies."""
        previous: dict[str, Any] = {}
        hard_stop = start_at + plan.total_s + plan.drain_s + 30
        while True:
            time.sleep(1.0)
            progress = read_progress(Path(plan.progress_path))
            if progress.get("state") in ("finished", "interrupted") or load_exit() is not None:
                break
            group.check_alive("pg", "target")
            if time.time() > hard_stop:
                raise RunError("the load generator did not finish in time")
            self.listener.progress(
                _progress(key, plan, start_at, progress, previous, scraper, preset)
            )
            previous = progress
        code = load_exit()
        if code not in (None, 0):
            raise ProcessDied(f"Locust exited with code {code}; see {plan.progress_path}")
        if progress.get("state") != "finished":
            raise RunError(f"the load generator stopped early (state {progress.get('state')!r})")

    def _save_build(
        self, bdir: Path, scraper: Scraper | None, target: Target, info: dict[str, Any]
    ) -> None:
        samples = samples_from_csv(bdir / "samples.csv")
        write_parquet_atomic(samples, bdir / "samples.parquet")
        info["samples"] = len(samples)
        if scraper is not None:
            write_parquet_atomic(scraper.frame(), bdir / "metrics.parquet")
            info["scrape_failures"] = dict(scraper.failures)
        ledger = ledger_from_csv(bdir / "pg-ledger.csv")
        write_parquet_atomic(ledger, bdir / "pg.parquet")
        info["pg_calls"] = len(ledger)
        target.collect(bdir)


def _progress(
    key: str,
    plan: LoadPlan,
    start_at: float,
    now: dict[str, Any],
    before: dict[str, Any],
    scraper: Scraper,
    preset: Preset,
) -> Progress:
    dt = max(1e-6, now.get("t", 0.0) - before.get("t", start_at))
    sent_now: dict[str, int] = now.get("sent", {})
    sent_before: dict[str, int] = before.get("sent", {})
    achieved = {ep: (sent_now.get(ep, 0) - sent_before.get(ep, 0)) / dt for ep in plan.endpoints}
    return Progress(
        build=key,
        elapsed_s=max(0.0, time.time() - start_at),
        total_s=plan.total_s,
        state=str(now.get("state", "?")),
        offered_rps={ep: e.rate for ep, e in plan.endpoints.items()},
        achieved_rps=achieved,
        busy_workers=_latest(scraper, preset.busy_workers),
        max_workers=_latest(scraper, preset.max_workers),
        breaker_state=(
            scraper.latest_state("target", preset.breaker_state) if preset.breaker_state else None
        ),
    )


def _latest(scraper: Scraper, selector: Selector | None) -> float | None:
    return scraper.latest_value("target", selector) if selector is not None else None
