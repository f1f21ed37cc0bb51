"""The settings in force read back and compared with the build's (issue 30 item 4), on
what the spring-shop jar answered (``tests/data/settings_in_force/``: its
``/actuator/configprops/resilience4j``, ``/actuator/circuitbreakers`` and the
Resilience4j lines of ``/actuator/prometheus``, the jar started with
``resilience4j.circuitbreaker.configs.default.failure-rate-threshold: 30`` and
``sliding-window-size: 20`` in an additional file, its own ``instances.pgClient``
setting 50 and 10)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from harness.run.settings_in_force import (
    actuator_base,
    breaker_settings,
    configprops_settings,
    metric_instances,
    read_back,
)
from harness.scenario.builds.command import CommandBuild
from harness.scenario.builds.jar import JarBuild
from harness.scenario.builds.spring_properties import SetSetting

DATA = Path(__file__).resolve().parents[1] / "data" / "settings_in_force"
CONFIGPROPS = json.loads((DATA / "spring_shop_configprops_resilience4j.json").read_text())
BREAKERS = json.loads((DATA / "spring_shop_circuitbreakers.json").read_text())
METRICS = (DATA / "spring_shop_prometheus.txt").read_text()
ACTUATOR = "http://127.0.0.1:8081/actuator"
CB = "resilience4j.circuitbreaker"


def _jar(properties: dict[str, Any]) -> list[SetSetting]:
    return JarBuild(jar="app.jar", properties=properties).spring_settings()


def _getter(**documents: Any) -> Any:
    def get(url: str) -> tuple[Any, str]:
        name = url.rsplit("/", 1)[1]
        if name not in documents:
            return None, "answered 404 (not exposed?)"
        return documents[name], "read"

    return get


def _read(given: list[SetSetting], **documents: Any) -> Any:
    return read_back(ACTUATOR, METRICS, given, _getter(**documents))


def test_a_default_the_instance_overrides_is_named_with_what_outranks_it() -> None:
    given = _jar({"resilience4j": {"circuitbreaker": {"configs": {"default": {
        "failure-rate-threshold": 30, "sliding-window-size": 20}}}}})  # fmt: skip
    found = _read(given, configprops=CONFIGPROPS, circuitbreakers=BREAKERS)
    threshold, window = found["differences"]
    assert threshold.startswith(
        f"{CB}.configs.default.failure-rate-threshold: the build set 30, the service reports "
        "50.0 for circuitbreaker pgClient (actuator/circuitbreakers): a setting under "
        f"configs.default is overridden by the instance's own {CB}.instances.pgClient."
        "failure-rate-threshold: 50.0 (class path resource [application.yml] from "
        "spring-shop.jar - 77:33)"
    )
    # no breaker endpoint says the window: configprops does
    assert window.startswith(f"{CB}.configs.default.sliding-window-size: the build set 20, "
                             "the service reports 10 for circuitbreaker pgClient "
                             "(actuator/configprops)")  # fmt: skip
    assert "unread" not in found
    assert found["instances"] == {"circuitbreaker": ["pgClient"], "retry": ["pgClient"]}


def test_a_threshold_the_code_replaced_is_said_as_the_code() -> None:
    """Spring bound the build's 50, the breaker holds 80: a customizer in the code."""
    breakers = copy.deepcopy(BREAKERS)
    breakers["circuitBreakers"]["pgClient"]["failureRateThreshold"] = "80.0%"
    given = _jar({f"{CB}.instances.pgClient.failure-rate-threshold": 50})
    found = _read(given, configprops=CONFIGPROPS, circuitbreakers=breakers)
    (said,) = found["differences"]
    assert said.startswith(
        f"{CB}.instances.pgClient.failure-rate-threshold: the build set 50, the service "
        "reports 80.0 (actuator/circuitbreakers): the application's code sets it"
    )
    held = found["settings"][f"{CB}.instances.pgClient.failure-rate-threshold"]
    assert (held["value"], held["bound"]) == (80.0, 50.0)


def test_settings_the_service_holds_say_nothing_in_any_spelling() -> None:
    given = _jar({"resilience4j.circuitbreaker.instances.pgClient": {
        "failureRateThreshold": "50", "wait-duration-in-open-state": "10000ms",
        "sliding_window_type": "count_based", "ignore-exceptions":
        ["feign.FeignException$FeignClientException"],
        "automatic-transition-from-open-to-half-open-enabled": "true"}})  # fmt: skip
    found = _read(given, configprops=CONFIGPROPS, circuitbreakers=BREAKERS)
    assert found["differences"] == []


def test_another_source_outranking_the_builds_file_names_its_origin() -> None:
    given = _jar({f"{CB}.instances.pgClient.wait-duration-in-open-state": "5s"})
    (said,) = _read(given, configprops=CONFIGPROPS)["differences"]
    assert said == (
        f"{CB}.instances.pgClient.wait-duration-in-open-state: the build set 5s, the service "
        "reports PT10S (actuator/configprops): another source outranks the build's properties "
        "(class path resource [application.yml] from spring-shop.jar - 78:38)"
    )


def test_nothing_readable_is_said_once_not_per_setting() -> None:
    given = _jar({CB: {"configs": {"default": {"failure-rate-threshold": 30,
                                               "sliding-window-size": 20}}}})  # fmt: skip
    found = _read(given)  # both endpoints 404
    assert found["differences"] == []
    assert found["unread"].startswith(
        "the settings the build gives (2) could not be read back from the service "
        "(actuator/configprops: answered 404 (not exposed?); actuator/circuitbreakers: "
        "answered 404 (not exposed?))"
    )
    assert (
        "management.endpoints.web.exposure.include: health,prometheus,configprops,"
        in (found["unread"])
    )


def test_hidden_values_are_not_read_as_values() -> None:
    """Boot 3 shows ``******`` for every value unless show-values says otherwise."""

    def hide(value: Any) -> Any:
        return {k: hide(v) for k, v in value.items()} if isinstance(value, dict) else "******"

    hidden = copy.deepcopy(CONFIGPROPS)
    for context in hidden["contexts"].values():
        for bean in context["beans"].values():
            bean["properties"] = hide(bean["properties"])
    given = _jar({f"{CB}.instances.pgClient.sliding-window-size": 20})
    found = _read(given, configprops=hidden)
    assert found["differences"] == []
    assert "values are hidden (management.endpoint.configprops.show-values)" in found["unread"]


def test_a_build_with_no_setting_and_no_actuator_records_sources_only() -> None:
    found = read_back(None, None, [], _getter())
    assert found["settings"] == {} and "unread" not in found


@pytest.mark.parametrize(
    ("metrics", "health", "base"),
    [
        ("http://h:1/actuator/prometheus", (), "http://h:1/actuator"),
        (None, ("http://h:2/manage/actuator/health",), "http://h:2/manage/actuator"),
        ("http://h:1/metrics", ("http://h:1/health",), None),
    ],
)
def test_actuator_is_found_beside_the_metrics_or_the_health(
    metrics: str | None, health: tuple[str, ...], base: str | None
) -> None:
    assert actuator_base(metrics, health) == base


def test_the_recorded_documents_read_as_names_and_values() -> None:
    bound = configprops_settings(CONFIGPROPS, lambda prefix: prefix.startswith("resilience4j"))
    assert bound[f"{CB}.instances.pgClient.wait-duration-in-open-state"]["value"] == "PT10S"
    assert bound[f"{CB}.configs.default.failure-rate-threshold"]["value"] == 30.0
    assert not any(".backends." in name for name in bound)  # the same map as instances
    assert breaker_settings(BREAKERS) == {
        f"{CB}.instances.pgClient.failure-rate-threshold": {
            "value": 50.0, "source": "actuator/circuitbreakers"},
        f"{CB}.instances.pgClient.slow-call-rate-threshold": {
            "value": 100.0, "source": "actuator/circuitbreakers"},
    }  # fmt: skip
    assert metric_instances("up 1\n") == {}


def test_a_command_build_gives_its_settings_in_json_and_arguments() -> None:
    build = CommandBuild(
        command=["java", "-jar", "app.jar", "--server.port={port}",
                 f"--{CB}.instances.pgClient.failure-rate-threshold=40"],
        env={"SPRING_APPLICATION_JSON": json.dumps(
            {"resilience4j": {"timelimiter": {"configs": {"default": {"timeout-duration": "1s"}}}},
             "pg.base-url": "{pg_url}"}
        ).replace("{", "{{").replace("}", "}}").replace("{{pg_url}}", "{pg_url}")},
    )  # fmt: skip
    given = {(s.written, s.where): s.value for s in build.spring_settings()}
    json_env = "env SPRING_APPLICATION_JSON"
    assert given == {
        ("resilience4j.timelimiter.configs.default.timeout-duration", json_env): "1s",
        (f"{CB}.instances.pgClient.failure-rate-threshold", "args"): "40",
    }  # fmt: skip
