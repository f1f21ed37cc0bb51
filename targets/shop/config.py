"""Start-up settings of the shop, read from one JSON file the harness writes per build."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from targets.shop.breaker import CircuitBreakerConfig
from targets.shop.retry import RetryConfig

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
        data = dict(data)
        retry = RetryConfig(**data.pop("retry", {}))
        cb_data = data.pop("circuitbreaker", None)
        cb = CircuitBreakerConfig(**cb_data) if cb_data is not None else None
        return cls(retry=retry, circuitbreaker=cb, **data)

    @classmethod
    def from_file(cls, path: str | Path) -> ShopConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))
