"""The Target seam: how the orchestrator starts a build, where it answers and how to read it.

A build's kind (``shop``, ``command``, ``docker``, ``url``: the scenario's
``harness.scenario.builds``) is run by a ``Kind`` of ``harness.run.kinds.registry.KINDS``;
its ``target`` turns the build's settings into a ``Target``. The orchestrator then asks it
to ``prepare`` (write its config, bind its ports) and gets back a ``Launch``:
the process to start, if any, and the URLs it answers on. The orchestrator
starts that process in its ``ProcessGroup``, which also stops it, whatever
happens; after the stop, ``collect`` turns what the target left behind into
result files. ``preset`` names how its metrics map to the canonical series
(``harness.analysis.series.PRESETS``), and ``metrics_map`` and ``breaker``
adjust it for one build.

Each kind is a sub-package of ``harness.run.kinds`` (``shop``, ``replicas``,
``command``, ``docker``, ``url``). The orchestrator and the CLI never ask which
kind a build is; they ask what it can do: a target that must check something
before the whole run starts (an image) is also a ``Preflight``; a kind whose
addresses may leave this machine has a ``check_remote``; a kind that may leave
something outside the run's folder when every process is killed (a container)
has ``Leftovers``, which ``harness clean`` removes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from harness.results.manifest import KindRecord
from harness.scenario.bounds import MAX_TIMEOUT_S
from harness.scenario.builds.base import BuildSettings
from harness.scenario.caps import TargetCap

LOG_TAIL_LINES = 30
"""Lines of a build's log quoted in an error and kept in the manifest
(``harness.run.health.log_tail``), and of an image build's log in its error."""


@dataclass(frozen=True)
class TargetContext:
    """What a run gives a build's target to prepare it."""

    build_dir: Path
    """The build's folder: the target may write its config here and leave files to collect."""
    pg_url: str
    """The fault-injecting gateway the target must call."""
    run_id: str
    """Marks what the target starts (processes carry it as ``HARNESS_RUN_ID``), so a leak
    can be traced to its run."""
    scenario_dir: Path = Path(".")
    """The scenario file's folder: a build's relative paths (``cwd``, a Docker context)
    start there."""
    client_timeout_s: float = MAX_TIMEOUT_S
    """The longest client timeout of the scenario's traffic: a proxy in front of the
    service (a replicated shop's nginx) must wait longer than that for an answer."""
    dependency_values: Mapping[str, str] = field(default_factory=dict)
    """Where each named dependency listens, by placeholder: ``dep.NAME.url`` (an HTTP
    dependency's), ``dep.NAME.address``, ``dep.NAME.host``, ``dep.NAME.port``."""


@dataclass(frozen=True)
class Process:
    """One more process of a build besides ``Launch.argv``'s: a replica, a load balancer."""

    name: str
    """Its name in the run's process group; its output goes to ``<build>/<name>.log``."""
    argv: tuple[str, ...]
    pass_fds: tuple[int, ...] = ()
    """Descriptors it inherits; like ``Launch.pass_fds``, they belong to the ``Launch``."""
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    health_urls: tuple[str, ...] = ()
    """Each must answer ``Launch.health_status`` before the next process is checked."""


@dataclass(frozen=True)
class Launch:
    """A prepared target: the process to start (if any) and the URLs it answers on."""

    url: str
    """Base URL the load generator sends the scenario's traffic to."""
    health_urls: tuple[str, ...]
    """Each must answer 200 before the load starts."""
    metrics_url: str | None
    """Prometheus text exposition, scraped every interval; ``None``: nothing to scrape."""
    argv: tuple[str, ...] = ()
    """Command of the target's process; empty when there is nothing to start."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the process inherits (bound listeners); the orchestrator closes its
    own copies once the process has started, so they belong to the ``Launch``."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment of the process."""
    cwd: Path | None = None
    """Working folder of the process; ``None``: the harness's own."""
    health_status: int = 200
    """The status each of ``health_urls`` must answer."""
    health_timeout_s: float = 60.0
    """How long the build may take to answer them all before the run fails (exit 3)."""
    hint: str = ""
    """Said when the build does not get healthy: what the user should check."""
    listen_ports: Mapping[int, str] = field(default_factory=dict)
    """Ports the process was told to listen on, each with how it was told (``server.port``):
    a process tree that listens on others instead fails the build before the load
    (``harness.run.health``)."""
    extra_metrics: Mapping[str, str] = field(default_factory=dict)
    """More scrape sources besides the target's own (source name -> URL of Prometheus
    text), e.g. a container's CPU and memory (``CONTAINER_SOURCE``)."""
    record: KindRecord = field(default_factory=lambda: KindRecord())
    """Entries the build's manifest records (a container's image: id, tags, digest)."""
    processes: tuple[Process, ...] = ()
    """More processes of the build, started in order (before ``argv``'s) and checked
    healthy in order, each a child of the run's process group: the build fails when
    any exits. A replicated shop is its replicas, then nginx in front of them."""


@dataclass(frozen=True)
class PreflightContext:
    """What a target is told to check its build before the run starts (no folder yet)."""

    build: str
    """The build's name in the scenario."""
    scenario: str
    """The scenario's name."""
    scenario_dir: Path
    """The scenario file's folder, where a build's relative paths start."""


@runtime_checkable
class Preflight(Protocol):
    """A target with something to check (or make) before any build of the run starts.

    The experiment calls ``preflight`` once per build, before the run folder is made and
    before any process starts: a Docker build checks its engine and image, or builds the
    image, so what is missing fails the run at once (``InputError`` for what the scenario
    names wrong, exit 2; ``RunError`` for what the environment lacks, exit 3).
    """

    def preflight(self, ctx: PreflightContext) -> None:
        """Check (or build) what the build needs; raise if it cannot run."""


class Target(Protocol):
    """One build of the service under test, as a run starts, watches and reads it.

    It stops with the run's process group (SIGTERM to the process's group, SIGKILL
    after a grace period); ``collect`` is called after that, even when the build failed.
    """

    @property
    def preset(self) -> str:
        """Name of the metrics preset that maps its series to the canonical ones."""

    @property
    def metrics_map(self) -> Mapping[str, str]:
        """Canonical series -> selector (``name{label="v"}``) that overrides the preset's."""

    @property
    def breaker(self) -> str | None:
        """The breaker to read (its ``name`` label) when the service has several."""

    def prepare(self, ctx: TargetContext) -> Launch:
        """Write its config and bind its ports; say what to start and where it answers."""

    def collect(self, build_dir: Path) -> None:
        """After its process stopped (whatever happened), write what it left as results."""


class Capper(Protocol):
    """Puts a phase's caps (CPU, memory) on a running build's target and lifts them."""

    @property
    def how(self) -> str:
        """What it caps, in words (the manifest's ``caps[].by``): a cgroup, a container."""

    def apply(self, cap: TargetCap) -> None:
        """Put ``cap`` in force now; ``RunError`` when it cannot."""

    def lift(self) -> str:
        """Put the build's own limits back; what is in force now, in words."""

    def close(self) -> None:
        """Let go of what it holds (a client of the Engine); the caps stay as they are."""


@runtime_checkable
class CapsItself(Protocol):
    """A target whose kind caps it its own way (a container, by the Docker Engine), not
    through a cgroup of its processes (``harness.run.caps``)."""

    def capper(self) -> Capper:
        """After ``prepare``: what applies and lifts the caps of the build."""


class Leftovers(Protocol):
    """What builds of a kind may leave outside the run's folder when every process of the
    run was killed at once (a container on a Docker Engine), and how it is removed.

    ``harness clean`` asks it (and so does the start of every ``harness run`` that has a
    build of the kind); what is left inside the folder is ``harness.run.cleanup``'s.
    """

    @property
    def noun(self) -> str:
        """What they are, plural (``containers``): how ``harness clean`` names a problem."""

    def remove_of_run(self, run_id: str) -> list[str]:
        """Remove what run ``run_id`` left (its orchestrator is gone); what was done, in words.

        Raises ``RunError`` saying what was not removed when it cannot look (no Engine).
        """

    def remove_of_ended_runs(self) -> tuple[list[str], list[str]]:
        """Remove what every run that is over left, wherever its results are.

        Returns what was removed (``container <name> (run <id>)``) and the problems.
        """


RemoteCheck = Callable[[str, Any, bool, bool], list[str]]
"""``(build name, build, the scenario allows, the command line allows)``: each address the
build sends to off this machine without both, in words (``check_remote`` refuses them all
at once, exit 2)."""


def _every(build: Any) -> bool:
    return True


@dataclass(frozen=True)
class Kind:
    """A kind of build as the orchestrator and the CLI see it: what runs it, what it can do.

    Each is declared once, at the end of its sub-package's ``target`` module, and
    registered once, in ``harness.run.kinds.registry.KINDS``.
    """

    name: str
    """Its name in reports and in ``harness.run.kinds``."""
    settings: type[BuildSettings]
    """The settings model of the builds it runs (``harness.scenario.builds``)."""
    target: Callable[[Any], Target]
    """Makes the target of one build; it is given only builds it ``runs``."""
    runs: Callable[[Any], bool] = _every
    """Which builds of its ``settings`` it runs (a shop alone, or its replicas behind nginx)."""
    check_remote: RemoteCheck | None = None
    """Refuses traffic off this machine unless allowed; ``None``: it only sends to loopback."""
    leftovers: Leftovers | None = None
    """What it may leave outside the run's folder; ``None``: nothing."""
