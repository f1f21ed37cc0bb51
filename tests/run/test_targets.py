"""The Target seam: what the shop target writes, starts, answers on and leaves behind."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.series import PRESETS
from harness.run.kinds.registry import KINDS, target_for
from harness.run.kinds.shop.target import ShopTarget
from harness.run.targets import Launch, TargetContext
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Build
from targets.shop.config import ShopConfig
from targets.shop.resilience import CircuitBreakerConfig, RetryConfig

SCENARIO = """\
name: t
duration: 10s
traffic:
  x: {path: /x, rate: 1}
builds:
  before:
    profile: retry-only
    workers: 12
    pg-client: {connect-timeout: 250ms, read-timeout: 2s}
    resilience4j:
      retry: {max-attempts: 4, wait-duration: 100ms, enable-exponential-backoff: true,
              exponential-max-wait-duration: 1s}
  after:
    profile: retry-circuit-breaker
    resilience4j:
      circuitbreaker: {sliding-window-type: TIME_BASED, sliding-window-size: 5,
                       wait-duration-in-open-state: 1m30s,
                       max-wait-duration-in-half-open-state: 500ms}
"""


def _builds() -> dict[str, Build]:
    return load_scenario_text(SCENARIO).scenario.builds


def _prepare(build: Build, tmp_path: Path) -> tuple[Launch, ShopConfig]:
    launch = ShopTarget(build).prepare(TargetContext(tmp_path, "http://pg", "run-1"))
    for fd in launch.pass_fds:
        os.close(fd)
    return launch, ShopConfig.from_file(tmp_path / "target.json")


def test_the_shop_reads_back_the_settings_the_scenario_gives(tmp_path: Path) -> None:
    launch, config = _prepare(_builds()["before"], tmp_path)
    assert config == ShopConfig(
        pg_url="http://pg",
        profile="retry-only",
        workers=12,
        connect_timeout_s=0.25,
        read_timeout_s=2.0,
        retry=RetryConfig(
            max_attempts=4,
            wait_duration_s=0.1,
            enable_exponential_backoff=True,
            exponential_max_wait_duration_s=1.0,
        ),
        circuitbreaker=None,
        db_path=str(tmp_path / "shop.sqlite"),
        listen_fd=launch.pass_fds[0],
        metrics_fd=launch.pass_fds[1],
    )


def test_breaker_settings_keep_resilience4j_names_and_seconds(tmp_path: Path) -> None:
    _, config = _prepare(_builds()["after"], tmp_path)
    assert config.circuitbreaker == CircuitBreakerConfig(
        sliding_window_type="TIME_BASED",
        sliding_window_size=5,
        wait_duration_in_open_state_s=90.0,
        max_wait_duration_in_half_open_state_s=0.5,
    )


def test_an_unknown_setting_is_an_error() -> None:
    with pytest.raises(ValueError, match="RetryConfig: unknown setting 'max-retries'"):
        ShopConfig.from_dict({"pg-url": "http://pg", "resilience4j": {"retry": {"max-retries": 2}}})


def test_launch_answers_on_the_listeners_it_hands_over(tmp_path: Path) -> None:
    launch, config = _prepare(_builds()["before"], tmp_path)
    assert launch.argv[1:] == ("-m", "targets.shop", "--config", str(tmp_path / "target.json"))
    assert launch.url.startswith("http://127.0.0.1:")
    assert launch.health_urls == (f"{launch.url}/health", launch.metrics_url)
    assert launch.metrics_url is not None and launch.metrics_url.endswith("/metrics")
    assert launch.metrics_url != f"{launch.url}/metrics"  # outside the worker pool
    assert PRESETS[ShopTarget.preset].name == "shop"


def test_collect_turns_the_shops_records_into_payments_parquet(tmp_path: Path) -> None:
    from targets.shop.db import Store

    store = Store(str(tmp_path / "shop.sqlite"), products=1)
    store.finish_payment(store.create_payment("key-1", 1500), "APPROVED", None)
    store.conn.close()
    ShopTarget(_builds()["before"]).collect(tmp_path)
    payments = pd.read_parquet(tmp_path / "payments.parquet")
    assert payments[["idempotency_key", "status"]].values.tolist() == [["key-1", "APPROVED"]]


def test_a_build_names_its_kind_of_target() -> None:
    assert {"shop", "command", "url"} <= {kind.name for kind in KINDS}
    assert all(isinstance(target_for(b), ShopTarget) for b in _builds().values())
