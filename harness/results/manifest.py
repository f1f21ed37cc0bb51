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

from harness.core.conforms import conforms, departures
from harness.core.errors import InputError
from harness.scenario.bounds import check_name

SCHEMA = "harness.manifest/1"
"""The value of ``manifest.json``'s ``schema`` key (absent in manifests written before it)."""

Status = Literal["running", "completed", "interrupted", "failed", "crashed", "aborted"]
"""How a run, or one build of it, ended (``running`` while it lives, or until it is closed);
``aborted``: a build whose load a gate with ``abort: true`` stopped (never a run's)."""
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


class AbortRecord(TypedDict):
    """Why a build was aborted: the gate with ``abort: true`` that failed during its load."""

    gate: str
    """The gate's name (its text when it has none)."""
    expr: str
    phase: str
    """The phase after whose end (and settle time) the gate was checked."""
    at_s: float
    """When the load was stopped, in seconds of the measured window (after ``t0``)."""
    value: float | None
    """The gate's left side as measured then."""
    limit: float | None
    """Its right side."""


class CapRecord(TypedDict):
    """One phase's caps on a build's target (``pg.phases[].target``): when applied, when lifted."""

    phase: str
    cpus: float | None
    memory_bytes: int | None
    by: str
    """What capped it: ``cgroup v1 /sys/fs/cgroup/cpu/harness-...``, ``docker update of ...``."""
    due_at: float
    """Unix time the phase starts (t0 + its start): when the cap was due."""
    applied_at: NotRequired[float]
    """Unix time the cap was in force (after the write); absent if it never was."""
    applied_at_s: NotRequired[float]
    """The same, seconds from t0 (the phase clock)."""
    lifted_at: NotRequired[float]
    lifted_at_s: NotRequired[float]
    lifted_to: NotRequired[str]
    """What was in force after the lift, in words (the build's own limits, or none)."""
    error: NotRequired[str]
    """Why the cap could not be applied or lifted (the build then failed)."""


class DependencyUrls(TypedDict):
    """Where a named dependency listened in one build."""

    api_url: str
    control_url: str


class Reported(TypedDict):
    """One setting as the service said it."""

    value: Any
    source: str
    """Where it was read: ``actuator/configprops``, ``actuator/circuitbreakers``
    (``harness.run.settings_in_force``)."""
    origin: NotRequired[str]
    """Where Spring took it from (configprops' ``inputs``): a file and line, an env var."""
    bound: NotRequired[Any]
    """Read from ``actuator/circuitbreakers``: the value Spring bound to the same name
    (``actuator/configprops``), which the application's code may have replaced."""


class SettingsInForce(TypedDict):
    """A build's ``settings_in_force`` (manifest): what the service said it has in force."""

    sources: dict[str, str]
    """Each place asked -> ``read``, or why not (``404``, ``connection refused``)."""
    settings: dict[str, Reported]
    """Setting (Spring's dotted name, kebab-case, instance names as the service has them)
    -> its value as the service said it."""
    instances: dict[str, list[str]]
    """Resilience4j's kind (``circuitbreaker``) -> its instances' names seen in the metrics."""
    differences: list[str]
    """A sentence per setting the build gave that the service does not hold (warnings)."""
    unread: NotRequired[str]
    """Said once when the build gave settings and nothing could be read back."""


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
    dependencies: NotRequired[dict[str, DependencyUrls]]
    """Each named dependency's API and control URLs (``dependencies.<name>``)."""
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
    caps: NotRequired[list[CapRecord]]
    """Each phase's caps on the target, in order (only when the scenario has some)."""
    cgroup: NotRequired[str]
    """The build's own cgroup, when its processes ran in one (the scenario caps them)."""
    error: NotRequired[str]
    log_tail: NotRequired[str]
    scrape_failures: NotRequired[dict[str, int]]
    scrape_failed: NotRequired[list[list[float | str]]]
    """The first failed scrapes: [start, end (epoch s), source, why] (``run.scraper``)."""
    metrics_spool_error: NotRequired[str]
    samples: NotRequired[int]
    pg_calls: NotRequired[int]
    dependency_calls: NotRequired[dict[str, int]]
    """The calls each named dependency's ledger kept, by name."""
    save_error: NotRequired[str]
    ended_at: NotRequired[str]
    abort: NotRequired[AbortRecord]
    """Only when a gate with ``abort: true`` stopped the build (its status ``aborted``)."""
    settings_in_force: NotRequired[SettingsInForce]
    """What the service said it has in force after health, and how it differs from what
    the build set (``harness.run.settings_in_force``); absent for a build with no Actuator
    that was given no Spring setting."""


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
    simulated: NotRequired[bool]
    """``true``: written by ``harness simulate`` (a model's frames, no process ran)."""
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
    for key in builds:
        check_build_key(key, where)
    record = dict(raw)
    record["builds"] = {key: build_record(key, info) for key, info in builds.items()}
    # What is there has its type; what is not, each reader defaults (``.get``).
    problems = conforms(record, ManifestRecord, "", extra_keys=True, missing_keys=True)
    if problems:
        raise InputError(f"{where}: not a manifest of this harness: {departures(problems)}")
    return cast(ManifestRecord, record)


def check_build_key(key: str, where: str = "manifest.json") -> str:
    """A build record's key, which names its folder in the run's: a build's name (``.r<k>``
    with ``--repeat``), never a path (``../../outside``) that would take a writer out of it."""
    try:
        check_name(key)
    except ValueError as exc:
        raise InputError(
            f"{where}: builds: {key!r} is not a build's name ({exc}); it names the build's "
            "folder, so this manifest cannot be read"
        ) from None
    return key


def read_manifest(path: Path) -> ManifestRecord:
    """A run folder's ``manifest.json`` (``InputError`` when it is not one)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:  # a folder named so, unreadable
        raise InputError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from None
    return manifest_record(raw, str(path))


def control_urls(info: BuildRecord) -> list[str]:
    """Every dependency's control URL in a build (``pg`` first): each gets the phase clock."""
    urls = [info["pg_control_url"]] if "pg_control_url" in info else []
    return urls + [d["control_url"] for d in info.get("dependencies", {}).values()]
