"""Orchestration: run every build of a scenario under the same load and the same faults.

For each build in turn: start the gateway and the build's target on fresh
loopback ports, wait for health, start Locust, say go, watch progress while the
scraper records metrics, drain, then stop every process and write the build's
results. Whatever happens (a crash, Ctrl-C, a full disk), processes are stopped
and what was measured is written, and the manifest says how the run ended.
Every file goes through the run's ``RunFolder``: a folder that cannot take
the run fails before any process starts, and a disk that fills mid-run stops
the build within a second of it, not at the end of the schedule.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, cast

import httpx

from harness.analysis.gateway_check import silent_gateway_in
from harness.analysis.series import Preset, preset_for
from harness.core.errors import HarnessError, RunError
from harness.core.net import LOOPBACK, listener, port_of
from harness.load.plan import LoadPlan
from harness.results.io import (
    METRICS_LIVE,
    RunFolder,
    WriteError,
    utc_now,
    write_json_atomic,
    write_text_atomic,
)
from harness.results.manifest import BuildRecord, Status, control_urls
from harness.run.abort import AbortAsk, AbortCheck, live_run
from harness.run.caps.schedule import BuildCaps, preflight_caps
from harness.run.events import RunListener
from harness.run.health import check_metrics, log_tail, wait_healthy
from harness.run.kinds.registry import check_remote, target_for
from harness.run.loadgen import (
    EXTERNAL_READY_TIMEOUT_S,
    LOAD_WORKER,
    READY_TIMEOUT_S,
    LoadWorkers,
    free_port,
    locust_argv,
    master_argv,
    plan_for,
    read_progress,
    worker_argv,
)
from harness.run.manifest import Manifest
from harness.run.processes import Child, ProcessGroup, shielded_from_signals, wait_http
from harness.run.saving import save_build
from harness.run.scraper import Scraper, window_edges
from harness.run.settings_in_force import read_service
from harness.run.targets import Launch, Preflight, PreflightContext, Target, TargetContext
from harness.run.watch import watch_load
from harness.scenario.dependencies import PG, Played
from harness.scenario.schema import LoadedScenario, Scenario

BYTES_PER_REQUEST = 400
"""Disk a planned request takes, all files together: its sample (CSV, then Parquet) and the
gateway's ledger rows for it (CSV, then Parquet), with room for retries."""
BYTES_PER_BUILD = 8 * 1024 * 1024
"""Disk a build takes whatever its traffic: logs, plan, config, metrics, and the shop's
SQLite write-ahead log (up to ~4 MiB before SQLite checkpoints it)."""


def estimated_bytes(scenario: Scenario, runs: int) -> int:
    """About how much disk ``runs`` builds of ``scenario`` write (checked before the run)."""
    requests = scenario.most_attempts()  # a sample row and a ledger call each
    return int(runs * (requests * BYTES_PER_REQUEST + BYTES_PER_BUILD))


class Experiment:
    """One run of a scenario: the composition root that owns the run folder and manifest."""

    def __init__(
        self,
        loaded: LoadedScenario,
        results_root: Path,
        listener: RunListener | None = None,
        builds: list[str] | None = None,
        repeat: int = 1,
        allow_remote: bool = False,
        load_workers: LoadWorkers | None = None,
        abort_check: AbortCheck | None = None,
    ) -> None:
        self.loaded = loaded
        self.abort_check = abort_check
        """Asked after each phase whether a gate with ``abort: true`` stops the build."""
        self.scenario = loaded.scenario
        self.listener = listener or RunListener()
        self.build_names = builds or list(self.scenario.builds)
        # Off-machine addresses need the scenario's and the caller's word (InputError, exit 2).
        check_remote(self.scenario, self.build_names, allow_remote)
        self.load_workers = load_workers or LoadWorkers()
        """One Locust process, or a master and its workers (``harness run --workers``)."""
        self.allow_remote = allow_remote and self.scenario.allow_remote
        self.scenario_dir = Path(loaded.path).resolve().parent
        """Where a build's relative paths start: the scenario file's folder, not the run's."""
        # Each build's target once; one with something to check (a Docker engine and
        # image) checks it now, before the run folder and before any process starts.
        self.targets = {name: target_for(self.scenario.builds[name]) for name in self.build_names}
        for name, target in self.targets.items():
            if isinstance(target, Preflight):
                target.preflight(PreflightContext(name, self.scenario.name, self.scenario_dir))
        # Phases that cap the target need a writable cgroup: refused now (exit 3) if none.
        self.cap_hierarchy = preflight_caps(self.scenario, self.targets.values())
        self.repeat = repeat
        self.manifest_problem: WriteError | None = None
        """Set when the manifest could not be updated with how the run ended."""
        # Raises WriteError (exit 3) before anything starts if the folder cannot take the run.
        self.folder = RunFolder.create(
            results_root,
            self.scenario.name,
            estimated_bytes(self.scenario, len(self.build_names) * repeat),
        )
        self.run_dir = self.folder.path
        self.manifest = Manifest.begin(loaded, self.run_dir.name, repeat)
        try:
            write_text_atomic(self.run_dir / "scenario.yaml", loaded.text)
            self.save_manifest()
        except BaseException:
            self.folder.close()
            with contextlib.suppress(OSError):
                (self.run_dir / "scenario.yaml").unlink(missing_ok=True)
                self.run_dir.rmdir()
            raise

    def save_manifest(self) -> None:
        self.manifest.save(self.folder)

    def run(self) -> Path:
        """Run every build in turn; always leaves a manifest that says how it ended."""
        try:
            # Interleaved (A B A B ...), so slow drift of the machine hits every build alike.
            for repetition in range(1, self.repeat + 1):
                for name in self.build_names:
                    self._run_build(name, repetition)
            self._end("completed", None)
        except KeyboardInterrupt:
            if self.manifest.record.get("status") == "completed":
                # Every build was done and saying so when Ctrl-C came: it stays so (the
                # report, which Ctrl-C stops, is made again by `harness report`).
                with contextlib.suppress(WriteError):
                    self._end("completed", None)
            else:
                self._end("interrupted", "interrupted by the user (SIGINT)")
            raise
        except RunError as exc:
            self._end("failed", str(exc))
            raise
        except BaseException as exc:
            self._end("failed", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            self.folder.close()
        return self.run_dir

    def _end(self, status: Status, error: str | None) -> None:
        self.manifest.end(status, error)
        try:
            self.save_manifest()
        except WriteError as exc:
            if status == "completed":
                raise
            self.manifest_problem = exc  # the run's own error is what the user must see

    def _run_build(self, name: str, repetition: int = 1) -> None:
        target = self.targets[name]
        key = name if self.repeat == 1 else f"{name}.r{repetition}"
        bdir = self.folder.make_dir(key)
        info: BuildRecord = {
            "build": name,
            "repetition": repetition,
            "status": "running",
            "started_at": utc_now(),
            "kind": self.scenario.builds[name].kind,
            "preset": target.preset,
            "metrics_map": dict(target.metrics_map),
            "breaker": target.breaker,
        }
        self.manifest.builds[key] = info
        self.save_manifest()
        self.listener.build_started(key)
        scraper: Scraper | None = None
        unsaved: RunError | None = None
        group = ProcessGroup(self.run_dir.name, bdir)
        caps = BuildCaps(self.scenario, target, self.cap_hierarchy, self.run_dir.name, key, info)
        try:
            scraper = self._start_processes(target, bdir, group, info, caps)
            aborted = self._drive_load(key, bdir, group, scraper, preset_for(info), info, caps)
            info["status"] = "aborted" if aborted else "completed"
        except KeyboardInterrupt:
            info["status"] = "interrupted"
            raise
        except BaseException as exc:
            info["status"] = "failed"
            # A process a full disk killed ("pg exited with code 2") is said as the disk.
            full = self.folder.disk_full(exc)
            info["error"] = str(full or exc)
            if full is not None:
                raise full from exc
            raise
        finally:
            with shielded_from_signals():
                if scraper is not None:
                    # The load has finished and the processes still run: read every
                    # counter once more (skipped when the build failed or was interrupted).
                    scraper.stop(final=info["status"] in ("completed", "aborted"))
                group.stop_all()
                group.escaped += self._remove_cgroup(key, caps)
                if info["status"] == "failed" and (tail := log_tail(group)) is not None:
                    info["log_tail"] = tail
                unsaved = save_build(bdir, scraper, target, info)
                info["ended_at"] = utc_now()
                self.save_manifest()
            if group.escaped:
                self.listener.warning(
                    key,
                    f"{len(group.escaped)} process(es) had left the build's process group "
                    f"(setsid, as a daemon does) and outlived it: found by the run's "
                    f"HARNESS_RUN_ID and stopped (pids {', '.join(map(str, group.escaped))})",
                )
            if info["status"] in ("completed", "aborted"):
                self._check_results(key, bdir, info)
            self.listener.build_finished(key, info["status"])
        if unsaved is not None:  # the build ran, but what it measured could not be kept
            raise unsaved

    def _remove_cgroup(self, key: str, caps: BuildCaps) -> list[int]:
        """The build's cgroup removed; the pids still in it, killed (they left their group)."""
        try:
            return caps.close()
        except RunError as exc:
            self.listener.warning(key, f"{exc}; `harness clean` removes it later")
            return []

    def _start_processes(
        self, target: Target, bdir: Path, group: ProcessGroup, info: BuildRecord, caps: BuildCaps
    ) -> Scraper:
        # Each dependency gets two listeners: its API (which a `refuse` fault stops; a TCP
        # dependency's proxy accepts on it) and a control port for /metrics, /health and
        # /__admin/start that always answers.
        played = self.scenario.played()
        socks: list[tuple[Played, socket.socket, socket.socket]] = []
        launch: Launch | None = None
        try:
            for dep in played:
                socks.append((dep, _gateway_listener(dep), listener(backlog=64)))
            urls = {
                dep.name: f"{'tcp' if dep.api == 'tcp' else 'http'}://{LOOPBACK}:{port_of(api)}"
                for dep, api, _ in socks
            }
            controls = {dep.name: f"http://{LOOPBACK}:{port_of(c)}" for dep, _, c in socks}
            launch = target.prepare(
                TargetContext(
                    build_dir=bdir,
                    pg_url=urls.get(PG, ""),
                    run_id=self.run_dir.name,
                    scenario_dir=self.scenario_dir,
                    client_timeout_s=max(e.timeout for e in self.scenario.traffic.values()),
                    dependency_values=_dependency_values(
                        [(dep, port_of(api)) for dep, api, _ in socks if dep.name != PG]
                    ),
                )
            )
            if PG in urls:
                info.update({"pg_url": urls[PG], "pg_control_url": controls[PG]})
            named = [dep.name for dep in played if dep.name != PG]
            if named:
                info["dependencies"] = {
                    n: {"api_url": urls[n], "control_url": controls[n]} for n in named
                }
            info.update({"target_url": launch.url, "target_metrics_url": launch.metrics_url})
            info.update(cast(BuildRecord, launch.record))  # KindRecord: BuildRecord's own part
            for dep, api, control in socks:
                played_by = (
                    # a TCP dependency: the fault proxy, its toxics from the scenario, no ledger
                    ["harness.proxy"]
                    if dep.api == "tcp"
                    else ["harness.gateway", "--scenario-dir", str(self.scenario_dir),
                          "--ledger", str(bdir / dep.ledger_file)]
                )  # fmt: skip
                group.start(
                    dep.source,
                    [sys.executable, "-m", *played_by,
                     "--scenario", str(self.run_dir / "scenario.yaml"), "--dependency", dep.name,
                     "--fd", str(api.fileno()), "--control-fd", str(control.fileno())],
                    pass_fds=(api.fileno(), control.fileno()),
                )  # fmt: skip
            cgroup = caps.cgroup_procs()  # every process of the build runs in it, if capped
            for process in launch.processes:  # a replicated build's replicas, then nginx
                group.start(
                    process.name,
                    list(process.argv),
                    pass_fds=process.pass_fds,
                    env=dict(process.env),
                    cwd=process.cwd,
                    cgroup=cgroup,
                )
            if launch.argv:
                group.start(
                    "target",
                    list(launch.argv),
                    pass_fds=launch.pass_fds,
                    env=dict(launch.env),
                    cwd=launch.cwd,
                    cgroup=cgroup,
                )
        finally:
            # The children hold their own copies; ours would keep the ports open after they stop.
            for _, api, control in socks:
                api.close()
                control.close()
            if launch is not None:
                for fd in (*launch.pass_fds, *(fd for p in launch.processes for fd in p.pass_fds)):
                    os.close(fd)
        info["processes"] = group.pids()
        self.save_manifest()
        for dep in played:
            wait_http(f"{controls[dep.name]}/health", group, dep.source)
        for process in launch.processes:
            wait_healthy(replace(launch, health_urls=process.health_urls), group, process.name)
        wait_healthy(launch, group)
        if launch.metrics_url is not None:
            check_metrics(launch.metrics_url, preset=info["preset"])
        self._read_settings(launch, info)
        sources = {"target": launch.metrics_url} if launch.metrics_url else {}
        sources.update(launch.extra_metrics)
        sources.update({dep.source: f"{controls[dep.name]}/metrics" for dep in played})
        scraper = Scraper(
            sources,
            self.scenario.metrics.interval,
            spool=bdir / METRICS_LIVE,
            history=preset_for(info),
            timeout_s=self.scenario.metrics.scrape_timeout(),
        )
        return scraper.start()

    def _read_settings(self, launch: Launch, info: BuildRecord) -> None:
        """The settings in force, read back from the healthy build and compared with what
        it was given (``harness.run.settings_in_force``): recorded, each difference said."""
        given = self.scenario.builds[info["build"]].spring_settings()
        found = read_service(launch.metrics_url, launch.health_urls, given)
        if found is None:
            return
        info["settings_in_force"] = found
        key = next(k for k, record in self.manifest.builds.items() if record is info)
        for text in [*found["differences"], *([found["unread"]] if "unread" in found else [])]:
            self.listener.warning(key, text)

    def _drive_load(
        self,
        key: str,
        bdir: Path,
        group: ProcessGroup,
        scraper: Scraper,
        preset: Preset,
        info: BuildRecord,
        caps: BuildCaps,
    ) -> bool:
        """Start the load and watch it to its end; ``True`` when a gate aborted it first."""
        plan = plan_for(
            self.scenario, info["target_url"], bdir, self.load_workers.count, self.scenario_dir
        )
        write_text_atomic(bdir / "plan.json", plan.handoff())
        load, ready_s = self._start_load(plan, bdir, group, info)
        info["processes"] = group.pids()
        progress_path = Path(plan.progress_path)
        deadline = time.monotonic() + ready_s
        while read_progress(progress_path).get("state") != "ready":
            self.folder.check_space()
            group.check_alive()
            if time.monotonic() > deadline:
                raise RunError(_not_ready(self.load_workers, ready_s, read_progress(progress_path)))
            time.sleep(0.05)
        start_at = time.time() + 0.3
        t0 = start_at + plan.warmup_s
        for control in control_urls(info):  # every dependency on the one phase clock
            httpx.post(f"{control}/__admin/start", json={"t0": t0}, timeout=5).raise_for_status()
        write_json_atomic(Path(plan.go_path), {"start_at": start_at})
        info.update({"load_start": start_at, "t0": t0})
        scraper.scrape_at(window_edges(self.scenario, t0))
        self.save_manifest()
        try:
            caps.start(t0)  # each phase's caps on the target, on the gateway's phase clock
            return watch_load(
                self.folder,
                self.listener,
                key,
                plan,
                start_at,
                group,
                scraper,
                preset,
                load.popen.poll,
                self._abort_watch(key, info),
                caps.check,
            )
        finally:
            caps.stop()
            if self.load_workers.distributed:  # what each worker sent, and how late
                info["load_workers"] = read_progress(progress_path).get("workers", {})

    def _abort_watch(self, key: str, info: BuildRecord) -> Callable[[float], bool] | None:
        """What the watch asks each second: at each check after a phase (``AbortCheck``),
        whether a gate with ``abort: true`` fails; then ``abort`` goes in the build's record."""
        check, build, t0 = self.abort_check, info["build"], info["t0"]
        pending = list(check.checkpoints(build)) if check is not None else []
        if check is None or not pending:
            return None
        finished = {
            record["build"]
            for record in self.manifest.builds.values()
            if record["status"] in ("completed", "aborted") and record["build"] != build
        }

        def stop(now: float) -> bool:
            while pending and now >= t0 + pending[0][1]:
                phase = pending.pop(0)[0]
                data = partial(live_run, self.run_dir, self.manifest.record, key, finished)
                try:
                    verdict = check(AbortAsk(build, phase, finished, data))
                except (HarnessError, OSError, ValueError) as exc:
                    # Unreadable data so far: the build goes on; the run's gates decide at the end.
                    why = f"abort gates after phase {phase!r} unchecked: {exc}"
                    self.listener.warning(key, why)
                    continue
                if verdict is not None:
                    info["abort"] = verdict.record(phase, time.time() - t0)
                    return True
            return False

        return stop

    def _start_load(
        self, plan: LoadPlan, bdir: Path, group: ProcessGroup, info: BuildRecord
    ) -> tuple[Child, float]:
        """Start Locust (a master and its local workers, when distributed); how long to wait."""
        env = {"HARNESS_LOAD_PLAN": str(bdir / "plan.json")}
        spread = self.load_workers
        if not spread.distributed:
            return group.start("load", locust_argv(plan), env=env), READY_TIMEOUT_S
        port = spread.port or free_port(spread.connect_host)
        ready_s = EXTERNAL_READY_TIMEOUT_S if spread.external else READY_TIMEOUT_S
        master = group.start("load", master_argv(plan, spread.bind_host, port, ready_s), env=env)
        info["load_master"] = f"{spread.bind_host}:{port}"
        info["load_external_workers"] = spread.external
        if not spread.external:
            worker_env = {"HARNESS_ALLOW_REMOTE": "1"} if self.allow_remote else {}
            for k in range(spread.count):
                group.start(
                    f"{LOAD_WORKER}{k}", worker_argv(spread.connect_host, port), env=worker_env
                )
        return master, ready_s

    def _check_results(self, key: str, bdir: Path, info: BuildRecord) -> None:
        """Say what the build's results show that most likely means a wrong setup."""
        endpoints = self.scenario.gateway_endpoints()
        calls = info.get("pg_calls")
        if calls is None:  # its ledger was not kept: nothing to say
            return
        try:
            text = silent_gateway_in(bdir, calls, endpoints, info.get("pg_url", ""))
        except (OSError, ValueError):  # unreadable samples: the report says so
            return
        if text is not None:
            self.listener.warning(key, text)


def _not_ready(spread: LoadWorkers, waited_s: float, progress: dict[str, Any]) -> str:
    """Why the load generator is not ready, for the error of a run that gave up on it."""
    if not spread.distributed:
        return f"Locust did not get ready within {waited_s:g}s"
    joined = len(progress.get("workers", {}))
    text = f"{joined} of {spread.count} Locust workers joined within {waited_s:g}s"
    if spread.external:
        text += f"; start them with: harness worker --master {spread.connect_host}:<port>"
    return text


def _dependency_values(listening: list[tuple[Played, int]]) -> dict[str, str]:
    """What each named dependency's placeholders stand for in one build: ``dep.NAME.url``
    (an HTTP dependency's), ``.address``, ``.host`` and ``.port``."""
    values: dict[str, str] = {}
    for dep, port in listening:
        at = f"dep.{dep.name}"
        values.update({f"{at}.address": f"{LOOPBACK}:{port}", f"{at}.host": LOOPBACK,
                       f"{at}.port": str(port)})  # fmt: skip
        if dep.api != "tcp":
            values[f"{at}.url"] = f"http://{LOOPBACK}:{port}"
    return values


def _gateway_listener(dep: Played) -> socket.socket:
    """A dependency's API listener: on its ``port`` when the scenario fixes it, else a free one."""
    port = dep.schedule.port
    if port is None:
        return listener()
    try:
        return listener(port=port)
    except OSError as exc:
        raise RunError(
            f"{'.'.join(dep.at)}.port {port}: cannot listen on {LOOPBACK}:{port} ({exc.strerror}); "
            "another process holds it, or the port needs privileges"
        ) from None
