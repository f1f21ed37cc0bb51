"""A ``docker`` build's phase caps: the Docker Engine's live update of its container.

``container.update`` changes a running container's CFS quota and memory limit at
once (``docker update``), so the orchestrator caps it on the phase clock, as it
writes a cgroup for the builds it runs itself; the runner only owns the
container's life. What the Engine accepts, measured on Docker 20.10 (API 1.41,
cgroup v1):

- CPU: ``cpu_quota = cpus x 100000`` with ``cpu_period = 100000``; lifted with
  ``cpu_quota = -1`` (none), or the container's own quota.
- Memory: ``mem_limit`` alone is refused (409, "should be smaller than already set
  memoryswap limit") unless ``memswap_limit`` comes with it: both are set to the cap,
  so the cap includes swap. The Engine cannot lift a memory limit back to none: it
  refuses -1 ("Minimum memory limit allowed is 6MB") and reads 0 as "unchanged".
  So a container that had none is lifted to the Engine's whole memory (``docker info``
  ``MemTotal``) for both, which no container can exceed: no limit in effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.core.errors import RunError
from harness.run.kinds.docker.engine import connect
from harness.scenario.caps import TargetCap, format_bytes

if TYPE_CHECKING:
    from docker import DockerClient

CPU_PERIOD_US = 100_000
"""The CFS period the quota is a share of (Docker's default)."""
_OWN_KEYS = ("CpuQuota", "CpuPeriod", "Memory", "MemorySwap")


class ContainerCapper:
    """Caps one build's container through the Engine (``harness.run.targets.Capper``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.own: dict[str, int] | None = None
        """The container's own limits (its ``HostConfig``), read before the first cap."""
        self.client: DockerClient | None = None
        self.capped: set[str] = set()
        """What a cap in force changed (``cpu``, ``memory``): what ``lift`` puts back."""

    @property
    def how(self) -> str:
        return f"docker update of container {self.name}"

    def _container(self) -> Any:
        import docker

        if self.client is None:
            self.client = connect()
        try:
            return self.client.containers.get(self.name)
        except docker.errors.DockerException as exc:
            raise RunError(f"cannot cap container {self.name}: {exc}") from None

    def _update(self, **limits: int) -> None:
        import docker

        try:
            self._container().update(**limits)
        except docker.errors.DockerException as exc:
            raise RunError(f"the Engine refused to update container {self.name}: {exc}") from None

    def apply(self, cap: TargetCap) -> None:
        if self.own is None:
            host = self._container().attrs.get("HostConfig") or {}
            self.own = {key: int(host.get(key) or 0) for key in _OWN_KEYS}
        limits: dict[str, int] = {}
        if cap.cpus is not None:
            limits.update(cpu_quota=round(cap.cpus * CPU_PERIOD_US), cpu_period=CPU_PERIOD_US)
            self.capped.add("cpu")
        if cap.memory is not None:
            limits.update(mem_limit=cap.memory, memswap_limit=cap.memory)
            self.capped.add("memory")
        self._update(**limits)

    def lift(self) -> str:
        """Only what a cap changed goes back: the container's own, or none."""
        own = self.own or dict.fromkeys(_OWN_KEYS, 0)
        limits: dict[str, int] = {}
        said = []
        if "cpu" in self.capped:
            limits.update(
                cpu_quota=own["CpuQuota"] if own["CpuQuota"] > 0 else -1,
                cpu_period=own["CpuPeriod"] or CPU_PERIOD_US,
            )
            said.append("its own CPU quota" if own["CpuQuota"] > 0 else "no CPU quota")
        if "memory" in self.capped and own["Memory"] > 0:
            limits.update(mem_limit=own["Memory"], memswap_limit=own["MemorySwap"] or -1)
            said.append("its own memory limit")
        elif "memory" in self.capped:
            self._container()  # connects
            assert self.client is not None
            total = int(self.client.info().get("MemTotal") or 0)
            if total <= 0:
                raise RunError("the Engine does not say its memory (docker info MemTotal)")
            limits.update(mem_limit=total, memswap_limit=total)
            said.append(
                f"memory {format_bytes(total)}: the Engine's whole memory, as it cannot "
                "lift a memory limit to none"
            )
        if limits:
            self._update(**limits)
        self.capped.clear()
        return ", ".join(said) or "nothing was capped"

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
