"""The load plan: what the Locust process must send, as JSON both sides can read.

Kept free of Locust and gevent imports so the orchestrator can build it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SAMPLE_COLUMNS = (
    "endpoint",
    "index",
    "intended_start",
    "actual_start",
    "end",
    "status",
    "error",
    "outcome",
)
"""Columns of ``samples.csv``: one row per request; times are Unix seconds."""


@dataclass(frozen=True)
class EndpointPlan:
    """One endpoint's stream: requests at ``rate``/s, each with its own client timeout."""

    method: str
    path: str
    rate: float
    timeout_s: float
    params: dict[str, tuple[int, int]] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    idempotency_key: bool = False


@dataclass(frozen=True)
class LoadPlan:
    """Everything the locustfile needs; ``go_path`` is written by the orchestrator to start."""

    base_url: str
    seed: int
    warmup_s: float
    duration_s: float
    drain_s: float
    endpoints: dict[str, EndpointPlan]
    samples_path: str
    progress_path: str
    go_path: str

    @property
    def total_s(self) -> float:
        return self.warmup_s + self.duration_s

    def planned_count(self, name: str) -> int:
        """Requests the plan sends for one endpoint: one every 1/rate over the whole time."""
        return int(self.total_s * self.endpoints[name].rate + 1e-9)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, path: str | Path) -> LoadPlan:
        data = json.loads(Path(path).read_text())
        endpoints = {
            name: EndpointPlan(
                **{**ep, "params": {k: tuple(v) for k, v in ep.get("params", {}).items()}}
            )
            for name, ep in data.pop("endpoints").items()
        }
        return cls(endpoints=endpoints, **data)
