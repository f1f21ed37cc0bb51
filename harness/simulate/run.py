"""``simulate_run``: every modelled build of a scenario, simulated, written as a run folder.

The folder is laid out as ``harness run`` writes one (``harness.results.model``):
``manifest.json`` (with ``"simulated": true``), ``scenario.yaml``, and per build
``samples.parquet``, ``pg.parquet`` and ``metrics.parquet``, so ``harness report``,
``harness gate`` and ``harness.analysis.figures`` read it unchanged. Times are Unix
seconds from a fixed origin (``ORIGIN``), so the same scenario and seed give the same
files.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from harness.core.errors import InputError
from harness.load.plan import (
    LoadPlan,
    arrival_offsets,
    endpoint_plans,
    idempotency_key,
)
from harness.load.requests import Requests
from harness.results.io import (
    RunFolder,
    harness_version,
    host_info,
    utc_now,
    write_parquet_atomic,
    write_text_atomic,
)
from harness.results.manifest import SCHEMA, BuildRecord, ManifestRecord
from harness.scenario.bounds import MAX_SEED
from harness.scenario.schema import Scenario
from harness.simulate.clock import Clock
from harness.simulate.frames import Scraper, ledger_frame, samples_frame
from harness.simulate.gateway import Gateway
from harness.simulate.node import NodeConfig, NodeService
from harness.simulate.routes import sent, unrouted
from harness.simulate.services import NotModelled, Service, service_of
from harness.simulate.shop import Request, Shop

ORIGIN = 1_800_000_000.0
"""Unix time of a simulated load's start (2027-01-15): fixed, so reruns give equal files."""

MAX_SIMULATED_REQUESTS = 2_000_000
"""Requests one build's plan may hold to be simulated (rates x (warmup + duration)).

The model holds a build's whole run in memory: every arrival on the event heap, every
request's record and its samples row, about 1.7 KB a request (610,000 requests took 31 s
and 1.07 GB at peak; 125,000 took 370 MB with the interpreter's own). Two million is about
3.5 GB and 100 s a build, what a laptop or a CI runner of 7-8 GB still holds; the 50
million a real run may send (``harness.scenario.bounds.MAX_PLANNED_REQUESTS``) would be
some 85 GB. A larger plan is refused before anything starts (``plan_problem``)."""

SCRAPE_PHASE = 0.37
"""Where in each interval the periodic scrapes fall: off the arrivals' grid (a constant
rate's arrivals fall on round instants), as a real scraper's start is; the edges the real
scraper adds (phase starts and ends) are scraped at their instant."""


@dataclass
class Simulated:
    """One build's frames."""

    name: str
    samples: pd.DataFrame
    ledger: pd.DataFrame
    metrics: pd.DataFrame


def load_plan(scenario: Scenario) -> LoadPlan:
    """The scenario's traffic as the load generator is handed it (``harness run``'s
    ``plan_for``, without the files): the same arrivals, paths and keys."""
    endpoints = endpoint_plans(scenario)
    return LoadPlan("http://simulated", scenario.seed, scenario.warmup, scenario.duration,
                    scenario.drain_s, endpoints, "", "", "")  # fmt: skip


def simulate_build(scenario: Scenario, service: Service, seed: int) -> Simulated:
    """One build under the scenario's load and faults: its frames (times from ``ORIGIN``)."""
    clock = Clock()
    plan = load_plan(scenario)
    server: Shop | NodeService
    if isinstance(service.config, NodeConfig):
        timeout = service.config.vendor_timeout_s
        gateway = Gateway(clock, scenario, seed, timeout, scenario.warmup)
        server = NodeService(clock, service.config, gateway)
    else:
        timeout = service.config.read_timeout_s
        gateway = Gateway(clock, scenario, seed, timeout, scenario.warmup)
        rng = random.Random(f"{seed}:{service.name}:retry")
        server = Shop(clock, service.config, service.backlog, gateway, rng, service.routes)
    scraper = Scraper(server, gateway, ORIGIN)
    for name, ep in plan.endpoints.items():
        requests = Requests(plan.seed, name, ep)
        limit = ep.max_in_flight
        for offset, index in arrival_offsets(plan, name):
            key = idempotency_key(plan.seed, name, index) if ep.idempotency_key else ""
            method, path = requests.target(index)  # a mix's request, as the load sends it
            request = Request(name, index, offset, path, method, key, ep.timeout_s)
            clock.at(offset, server.arrive, request, limit)
    interval = scenario.metrics.interval
    end = plan.total_s + plan.drain_s
    times = [(k + SCRAPE_PHASE) * interval for k in range(int(end / interval) + 1)]
    times += [scenario.warmup, plan.total_s]
    for phase in scenario.pg.phases:
        times += [scenario.warmup + phase.start, scenario.warmup + phase.end]
    for t in sorted({round(t, 6) for t in times}):  # one scrape per microsecond at most
        clock.at(t, scraper.scrape)
    clock.run(end + 1e-9)
    return Simulated(
        service.name,
        samples_frame(server, ORIGIN),
        ledger_frame(gateway, ORIGIN),
        scraper.frame().sort_values("t", kind="stable", ignore_index=True),
    )


def planned_requests(scenario: Scenario) -> int:
    """Requests one build's plan sends, every endpoint together (each build sends the same)."""
    plan = load_plan(scenario)
    return sum(plan.planned_count(name) for name in plan.endpoints)


def plan_problem(scenario: Scenario) -> str | None:
    """Why the simulator cannot hold the scenario's plan (``MAX_SIMULATED_REQUESTS``)."""
    planned = planned_requests(scenario)
    if planned <= MAX_SIMULATED_REQUESTS:
        return None
    return (
        f"each build's plan is {planned:,} requests (rates x (warmup + duration)); the "
        f"simulator holds a build's whole run in memory and simulates at most "
        f"{MAX_SIMULATED_REQUESTS:,}: shorten the scenario (warmup, duration) or lower the "
        "rates (or stages) to simulate it"
    )


def seed_problem(seed: int) -> str | None:
    """Why ``seed`` cannot replace the scenario's: a scenario's seed is in ``[0, 2**63)``."""
    if 0 <= seed < MAX_SEED:
        return None
    return f"seed {seed} is out of range: a seed is from 0 to {MAX_SEED - 1}"


def not_modelled_in(scenario: Scenario) -> list[str]:
    """What of the scenario itself the model leaves out (its figures would be wrong, not
    rough): clients that retry, a gateway with finite capacity and caps on the target."""
    problems = [
        f"traffic.{name}.retry (clients that retry)"
        for name, endpoint in scenario.traffic.items()
        if endpoint.retry is not None
    ]
    problems += [
        f"dependencies.{name} (the model plays the payment gateway only)"
        for name in scenario.dependencies
    ]
    if scenario.pg.capacity is not None:
        problems.append("pg.capacity (a gateway with finite capacity, its queue and brownouts)")
    problems += [
        f"pg.phases[{i}].target (a CPU or memory cap)"
        for i, phase in enumerate(scenario.pg.phases)
        if phase.target is not None
    ]
    return problems


def modelled(
    scenario: Scenario, builds: Sequence[str] | None = None
) -> tuple[list[Service], list[NotModelled]]:
    """The builds the simulator models (of ``builds``, or all) and those it cannot; an
    ``InputError`` for what of the scenario itself it cannot (``not_modelled_in``) or a
    plan larger than it holds (``plan_problem``)."""
    if problems := not_modelled_in(scenario):
        raise InputError("the simulator cannot model this scenario: " + "; ".join(problems))
    if (too_large := plan_problem(scenario)) is not None:
        raise InputError(too_large)
    names = list(builds) if builds is not None else list(scenario.builds)
    unknown = [n for n in names if n not in scenario.builds]
    if unknown:
        raise InputError(f"unknown build(s) {unknown}; the scenario has {list(scenario.builds)}")
    services: list[Service] = []
    refused: list[NotModelled] = []
    requests = sent(load_plan(scenario))
    for name in names:
        try:
            service = service_of(name, scenario.builds[name])
        except NotModelled as exc:
            refused.append(exc)
            continue
        problem = unrouted(service, requests)
        if problem is None:
            services.append(service)
        else:
            refused.append(problem)
    return services, refused


def simulate_run(
    scenario: Scenario,
    out: Path,
    builds: Sequence[str] | None = None,
    seed: int | None = None,
    *,
    scenario_text: str | None = None,
    scenario_file: str = "",
) -> Path:
    """Simulate every modelled build (of ``builds``) and write them as a run folder under
    ``out/<scenario name>/``; the folder's path. ``seed`` replaces the scenario's (the
    gateway's fates, the arrivals, the Retry's jitter). A build that cannot be modelled
    is an ``InputError`` naming it when no build is left, else it is skipped (the
    manifest lists only those simulated): ``modelled`` says which.

    ``scenario_text``: the scenario file's text, copied as ``scenario.yaml``; without
    it the scenario is written back from its model. A ``seed`` out of the scenario's own
    range is an ``InputError`` before anything is written.
    """
    if seed is not None:
        if (said := seed_problem(seed)) is not None:
            raise InputError(said)
        scenario = scenario.model_copy(update={"seed": seed})
    services, refused = modelled(scenario, builds)
    if not services:
        raise InputError("; ".join(str(r) for r in refused) or "no builds to simulate")
    text = scenario_text if scenario_text is not None and seed is None else _yaml(scenario)
    folder = RunFolder.create(Path(out), scenario.name)
    try:
        write_text_atomic(folder.path / "scenario.yaml", text)
        started = utc_now()
        records: dict[str, BuildRecord] = {}
        for service in services:
            frames = simulate_build(scenario, service, scenario.seed)
            bdir = folder.make_dir(service.name)
            write_parquet_atomic(frames.samples, bdir / "samples.parquet")
            write_parquet_atomic(frames.ledger, bdir / "pg.parquet")
            write_parquet_atomic(frames.metrics, bdir / "metrics.parquet")
            records[service.name] = {
                "build": service.name, "repetition": 1, "status": "completed",
                "started_at": started, "kind": service.kind, "preset": "shop",
                "metrics_map": {}, "breaker": None, "load_start": ORIGIN,
                "t0": ORIGIN + scenario.warmup, "samples": len(frames.samples),
                "pg_calls": len(frames.ledger), "ended_at": utc_now(),
            }  # fmt: skip
        manifest: ManifestRecord = {
            "schema": SCHEMA, "scenario_name": scenario.name, "scenario_file": scenario_file,
            "scenario_sha256": _sha256(text), "seed": scenario.seed,
            "harness_version": harness_version(), "host": host_info(), "started_at": started,
            "run_id": folder.path.name, "repeat": 1, "status": "completed",
            "ended_at": utc_now(), "error": None, "simulated": True, "builds": records,
        }  # fmt: skip
        folder.save_manifest(manifest)
    finally:
        folder.close()
    return folder.path


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _yaml(scenario: Scenario) -> str:
    """The scenario written back from its model, as it reloads: what was given, and a
    phase's fault once (its validator fills ``faults`` from ``fault``)."""
    data = scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
    for phase in data.get("pg", {}).get("phases", []):
        if "fault" in phase and "faults" in phase:
            del phase["fault" if len(phase["faults"]) > 1 else "faults"]
    return "# written by harness simulate from the scenario's model\n" + yaml.safe_dump(
        data, sort_keys=False, allow_unicode=True
    )
