"""Start-up settings of the shop, read from one JSON file the harness writes per build.

The file is the build's block of the scenario as the harness validated it
(kebab-case Resilience4j property names, durations already in seconds) plus
where to listen and which gateway to call::

    {"profile": "retry-circuit-breaker", "workers": 200,
     "pg-client": {"connect-timeout": 1.0, "read-timeout": 3.0},
     "resilience4j": {"retry": {"max-attempts": 2, "wait-duration": 0.1, ...},
                      "circuitbreaker": {"sliding-window-size": 10, ...}},
     "pg-url": "http://127.0.0.1:41234", "listen-fd": 5, "metrics-fd": 6,
     "db-path": "results/.../shop.sqlite"}

This module is the only place that turns those names into the shop's own
config objects: ``wait-duration`` becomes ``wait_duration_s`` by one rule (kebab
to snake case, plus ``_s`` where the field holds seconds), not a list per
field. The shop is a service of its own and never imports the harness.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from targets.shop.resilience import CircuitBreakerConfig, RetryConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Profile = Literal["retry-only", "retry-circuit-breaker"]


@dataclass(frozen=True)
class ShopConfig:
    """Everything the shop needs to start; profiles pick the resilience composition."""

    pg_url: str
    profile: Profile = "retry-only"
    workers: int = 200
    connect_timeout_s: float = 1.0
    read_timeout_s: float = 3.0
    retry: RetryConfig = field(default_factory=RetryConfig)
    circuitbreaker: CircuitBreakerConfig | None = None
    db_path: str = ":memory:"
    products: int = 1000
    listen_fd: int | None = None
    metrics_fd: int | None = None
    host: str = "127.0.0.1"
    port: int = 8080

    def __post_init__(self) -> None:
        if self.profile not in ("retry-only", "retry-circuit-breaker"):
            raise ValueError(f"unknown profile {self.profile!r}")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.profile == "retry-circuit-breaker" and self.circuitbreaker is None:
            object.__setattr__(self, "circuitbreaker", CircuitBreakerConfig())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShopConfig:
        """Read the settings as the harness writes them (see the module's docstring)."""
        data = dict(data)
        data.pop("target", None)  # which kind of target the harness started: this one
        resilience = data.pop("resilience4j", None) or {}
        client = data.pop("pg-client", None) or {}  # its timeouts are the shop's own fields
        cb = resilience.get("circuitbreaker")
        return _build(
            cls,
            {**data, **client},
            retry=_build(RetryConfig, resilience.get("retry") or {}),
            circuitbreaker=_build(CircuitBreakerConfig, cb) if cb is not None else None,
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ShopConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))


C = TypeVar("C", bound="DataclassInstance")


def _build(cls: type[C], properties: dict[str, Any], **extra: Any) -> C:
    """``cls`` from kebab-case properties; a name not among its fields is an error."""
    names = {f.name for f in fields(cls)}
    kwargs = dict(extra)
    for key, value in properties.items():
        name = key.replace("-", "_")
        if name not in names and f"{name}_s" in names:
            name += "_s"  # durations arrive in seconds
        if name not in names:
            raise ValueError(f"{cls.__name__}: unknown setting {key!r}")
        kwargs[name] = value
    return cls(**kwargs)
