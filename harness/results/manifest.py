"""The shape of ``manifest.json`` (schema ``harness.manifest/1``), typed once like report.json.

``harness.run`` writes these records and ``harness.results``, ``analysis`` and
``run.cleanup`` read them back, so a key misspelt on either side is a mypy
error. They are TypedDicts, plain dicts at run time: the file's keys and values
are what they were before the type, and a manifest written by an older harness
loads unchanged. Every key is documented in ``docs/report.md`` (a test checks
the table against these classes).

A build record's keys fall in two groups. Those written when the build starts
are required; a manifest written before one of them existed gets its default
here, in ``START_DEFAULTS``, the one place a missing key is filled. The others
are recorded as the build gets that far (``pg_url`` once its processes are
prepared, ``t0`` once its load starts, ``error`` only if it failed), so their
absence says how far it got, and each reader decides what that means.
"""

# No ``from __future__ import annotations``: TypedDict needs real annotations at class
# creation to tell ``NotRequired`` keys apart (Python 3.11), and tests introspect them.
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast, get_args

from harness.core.errors import InputError

SCHEMA = "harness.manifest/1"
"""The value of ``manifest.json``'s ``schema`` key (absent in manifests written before it)."""

Status = Literal["running", "completed", "interrupted", "failed", "crashed"]
"""How a run, or one build of it, ended (``running`` while it lives, or until it is closed)."""
STATUSES: tuple[Status, ...] = get_args(Status)


class HostInfo(TypedDict):
    hostname: str
    platform: str
    python: str
    cpus: int | None


class ProcessIdentity(TypedDict):
    """What tells a process apart from a later one that reuses its pid."""

    pid: int
    boot_id: str | None
    """This boot of the machine (Linux); ``None`` where there is no such thing."""
    start_ticks: int | None
    """When it started, in clock ticks since boot; ``None``: no such live process."""


class WorkerSummary(TypedDict):
    """One Locust worker's last report, as the master keeps it (``harness.load.master``)."""

    host: str
    client_id: str
    state: str
    planned: dict[str, int]
    sent: dict[str, int]
    done: dict[str, int]
    dropped: NotRequired[dict[str, int]]
    """Absent in manifests written before ``max-in-flight``."""
    max_lateness_s: float
    silent_s: float
    error: str | None


class KindRecord(TypedDict, total=False):
    """What a build kind adds to its build's record (``Launch.record``)."""

    image: dict[str, object]
    """A ``docker`` build's image: ``id``, ``tags``, ``digest`` (``null`` with
    ``digest_note`` for a local image), ``built_from`` when the harness built it."""
    container: str
    """A ``docker`` build's container name."""
    replicas: int
    """A build with ``replicas: N``: how many shops ran behind the balancer."""
    replica_urls: list[str]
    replica_metrics_urls: list[str | None]


class BuildRecord(KindRecord):
    """One build's (one repetition's) entry in ``builds``: what ran and how it went."""

    build: str
    """The scenario's build name (the record's key is ``<build>.r<k>`` with ``--repeat``)."""
    repetition: int
    status: Status
    started_at: str
    kind: str
    """``shop``, ``command``, ``docker`` or ``url``."""
    preset: str
    """The metrics preset that maps the build's series to the canonical ones."""
    metrics_map: dict[str, str]
    """Canonical series -> selector overriding the preset's."""
    breaker: str | None
    """The breaker read (its ``name`` label) when the service has several."""
    pg_url: NotRequired[str]
    pg_control_url: NotRequired[str]
    target_url: NotRequired[str]
    target_metrics_url: NotRequired[str | None]
    processes: NotRequired[dict[str, int]]
    """Pid per process of the build (``pg``, ``target``, ``load``, ...)."""
    load_start: NotRequired[float]
    """Unix time the load started (its warmup's start)."""
    t0: NotRequired[float]
    """Unix time of the measured window's start (after warmup)."""
    load_master: NotRequired[str]
    load_external_workers: NotRequired[bool]
    load_workers: NotRequired[dict[str, WorkerSummary]]
    """By worker number, its last report: ``host``, ``state``, ``planned``, ``sent``, ..."""
    error: NotRequired[str]
    log_tail: NotRequired[str]
    scrape_failures: NotRequired[dict[str, int]]
    metrics_spool_error: NotRequired[str]
    samples: NotRequired[int]
    pg_calls: NotRequired[int]
    save_error: NotRequired[str]
    ended_at: NotRequired[str]


class ManifestRecord(TypedDict):
    """``manifest.json`` as written."""

    schema: NotRequired[str]
    scenario_name: str
    scenario_file: str
    scenario_sha256: str
    seed: int
    harness_version: str
    host: HostInfo
    started_at: str
    run_id: str
    repeat: int
    status: Status
    ended_at: str | None
    error: str | None
    orchestrator: NotRequired[ProcessIdentity]
    """The ``harness run`` process: ``pid``, ``boot_id``, ``start_ticks`` (absent before it)."""
    builds: dict[str, BuildRecord]


def start_defaults(key: str) -> dict[str, object]:
    """What a build record written before these keys existed had, said once.

    Before ``kind`` every build was the shop (``preset: shop``, no map, no breaker
    to pick); before ``repetition`` there was no ``--repeat``, so the record's
    key was its build's name.
    """
    return {
        "build": key,
        "repetition": 1,
        "kind": "shop",
        "preset": "shop",
        "metrics_map": {},
        "breaker": None,
    }


def build_record(key: str, raw: Mapping[str, Any]) -> BuildRecord:
    """The record ``raw`` (a manifest's ``builds[key]``) with every start key present."""
    return cast(BuildRecord, {**start_defaults(key), **raw})


def manifest_record(raw: object, where: str = "manifest.json") -> ManifestRecord:
    """``raw`` (a manifest's JSON) as a ``ManifestRecord``, its build records completed."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    schema = raw.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise InputError(
            f"{where}: schema {schema!r}, and this harness reads {SCHEMA!r}: "
            "it was written by another harness version"
        )
    builds = raw.get("builds", {})
    if not isinstance(builds, dict) or not all(isinstance(b, dict) for b in builds.values()):
        raise InputError(f"{where}: builds: expected an object of build records")
    record = dict(raw)
    record["builds"] = {key: build_record(key, info) for key, info in builds.items()}
    return cast(ManifestRecord, record)


def read_manifest(path: Path) -> ManifestRecord:
    """A run folder's ``manifest.json`` (``InputError`` when it is not one)."""
    try:
        raw = json.loads(path.read_text())
    except ValueError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from None
    return manifest_record(raw, str(path))
