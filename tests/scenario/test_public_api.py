"""The public face of ``harness.scenario``: a deliberate, sorted list of names."""

import harness.scenario


def test_scenario_exports() -> None:
    assert harness.scenario.__all__ == [
        "Build",
        "CommandBuild",
        "DockerBuild",
        "Endpoint",
        "Fault",
        "FaultOverride",
        "LoadedScenario",
        "PgSchedule",
        "Phase",
        "Scenario",
        "ShopBuild",
        "UrlBuild",
        "load_scenario",
        "load_scenario_text",
    ]
    assert harness.scenario.__all__ == sorted(harness.scenario.__all__)
    assert all(hasattr(harness.scenario, name) for name in harness.scenario.__all__)
