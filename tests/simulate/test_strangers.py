"""The simulator refuses what it does not model, loudly: a stranger's jar or command is not
our Spring shop or Node gateway because both are jars or commands (issue 30, item 6:
``harness simulate`` on a stranger's jar exited 0 with a full report of our shop's routes,
"the gateway received no call while 2400 requests to orders were sent"). A build is
modelled as one of our reference services only when it says it is that service
(``simulate-as``), and only for traffic to the routes that service has; ``harness tune
--screen`` refuses the same, before a tune folder is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.scenario.loader import load_scenario
from harness.simulate import modelled, simulate_run

ROOT = Path(__file__).resolve().parents[2]

STRANGER = """\
name: orders
seed: 3
warmup: 1s
duration: 8s
drain: 1s
traffic:
  orders: {method: POST, path: /api/orders, rate: 20, timeout: 5s, body: {item: 1},
           calls-gateway: true}
  owners: {path: "/owners/{id}", params: {id: [1, 10]}, rate: 5, timeout: 5s}
builds:
  svc:
    jar: app.jar{said}
    properties:
      server.tomcat.threads.max: 16
      resilience4j.circuitbreaker.instances.pgClient.failure-rate-threshold: 50
pg:
  phases:
    - {name: baseline, start: 0s, duration: 3s, fault: {type: healthy}}
    - {name: outage, start: 3s, duration: 5s, fault: {type: timeout}}
"""


def _stranger(said: str) -> str:
    return STRANGER.replace("{said}", said)


def _scenario(tmp_path: Path, text: str) -> Path:
    (tmp_path / "app.jar").write_bytes(b"PK")  # the file a jar build names
    path = tmp_path / "orders.yaml"
    path.write_text(text)
    return path


def _simulate(tmp_path: Path, path: Path, *args: str) -> tuple[int, str]:
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["simulate", str(path), "--results", str(out), *args])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert not out.exists() or not any(out.rglob("*")), "a refused build left a run folder"
    return done.exit_code, done.output


def test_a_strangers_jar_is_refused_saying_why_and_what_is_modelled(tmp_path: Path) -> None:
    code, said = _simulate(tmp_path, _scenario(tmp_path, _stranger("")))
    assert code == 2, said
    flat = " ".join(said.split())
    assert "build 'svc': a jar build has no model unless it says it runs the Spring shop" in flat
    assert "simulate-as: spring-shop" in flat
    assert "the simulator models only our reference services" in flat


def test_a_jar_that_says_it_is_the_spring_shop_is_refused_for_routes_it_has_not(
    tmp_path: Path,
) -> None:
    text = _stranger("\n    simulate-as: spring-shop")
    code, said = _simulate(tmp_path, _scenario(tmp_path, text))
    assert code == 2, said
    flat = " ".join(said.split())
    assert "build 'svc': traffic.orders sends POST /api/orders" in flat
    assert "traffic.owners sends GET /owners/" in flat
    assert "not a route of the Spring shop (targets/spring-shop)" in flat
    assert "POST /api/payments, GET /api/products/{id}" in flat  # the routes it has


def test_a_shop_build_is_refused_for_traffic_to_routes_the_shop_has_not(tmp_path: Path) -> None:
    text = _stranger("").replace(
        "    jar: app.jar\n    properties:\n      server.tomcat.threads.max: 16\n"
        "      resilience4j.circuitbreaker.instances.pgClient.failure-rate-threshold: 50\n",
        "    profile: retry-only\n",
    )
    code, said = _simulate(tmp_path, _scenario(tmp_path, text))
    assert code == 2, said
    assert "not a route of the shop (targets/shop)" in " ".join(said.split())


def test_a_command_that_does_not_say_it_is_the_node_gateway_is_refused(tmp_path: Path) -> None:
    """The Node gateway's own command, with its own routes, is still another service until
    the build says it is ours: where it runs from proves nothing."""
    source = ROOT / "scenarios/ci/vendor-latency-short.yaml"
    text = source.read_text().replace("    simulate-as: node-gateway", "    # (not said)")
    text = text.replace("../../targets/node-gateway", str(ROOT / "targets/node-gateway"))
    code, said = _simulate(tmp_path, _scenario(tmp_path, text))
    assert code == 2, said
    flat = " ".join(said.split())
    assert "build 'before': a command build has no model unless it says it runs the Node" in flat
    assert "simulate-as: node-gateway" in flat


@pytest.mark.parametrize(
    "scenario",
    [
        "scenarios/ci/tune-spring-short.yaml",
        "scenarios/ci/seeds/000-pg-timeout-spring-short.yaml",
        "scenarios/seeds/000-pg-timeout-spring.yaml",
        "scenarios/ci/vendor-latency-short.yaml",
        "scenarios/ci/tune-opossum-short.yaml",
        "scenarios/vendor-latency.yaml",
        "scenarios/ci/tune-short.yaml",
        "scenarios/ci/seeds/000-pg-timeout-short.yaml",
        "scenarios/ci/seeds/004-thresholds-short.yaml",
    ],
)
def test_the_seeds_builds_of_our_services_say_so_and_are_modelled(scenario: str) -> None:
    loaded = load_scenario(ROOT / scenario, check_folders=False)
    services, refused = modelled(loaded.scenario)
    assert refused == [] and [s.name for s in services] == list(loaded.scenario.builds)


def test_the_spring_shops_jar_that_says_so_is_simulated(tmp_path: Path) -> None:
    loaded = load_scenario(ROOT / "scenarios/ci/tune-spring-short.yaml", check_folders=False)
    run_dir = simulate_run(loaded.scenario, tmp_path / "out")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["builds"]["after"]["kind"] == "jar"


SWEEP = """
sweep:
  base: svc
  grid:
    properties.resilience4j.circuitbreaker.instances.pgClient.failure-rate-threshold: [25, 75]
  abbrev:
    properties.resilience4j.circuitbreaker.instances.pgClient.failure-rate-threshold: fr
  objective: {minimize: "owners.p99[outage]"}
"""


def _no_run(*args: object, **kwargs: object) -> None:
    raise AssertionError("nothing may run: the screen is refused first")


@pytest.mark.parametrize("plan", [[], ["--plan"]], ids=["tune", "plan"])
def test_tune_screen_refuses_a_strangers_jar_before_a_tune_folder(
    tmp_path: Path, plan: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("harness.run.experiment.Experiment", _no_run)
    path = _scenario(tmp_path, _stranger("") + SWEEP)
    results = tmp_path / "results"
    done = CliRunner().invoke(
        app, ["tune", str(path), "--screen", "--results", str(results), *plan]
    )
    assert done.exit_code == 2, done.output
    flat = " ".join(done.output.split())
    assert "--screen: the simulator cannot stand for every candidate" in flat
    assert "a jar build has no model unless it says it runs the Spring shop" in flat
    assert not results.exists() or not any(results.rglob("*"))


def test_tune_screen_refuses_a_candidate_the_model_leaves_out(tmp_path: Path) -> None:
    """A screen ranks every candidate by the model: one it cannot model (here two replicas
    behind a balancer) would rank as never simulated and never run for real, unsaid; the
    screen is refused instead, naming it (it screened the others and said nothing)."""
    text = (ROOT / "scenarios/ci/tune-short.yaml").read_text()
    old = "    resilience4j.circuitbreaker.sliding-window-size: [10, 20, 60]\n"
    assert old in text
    path = tmp_path / "sweep.yaml"
    path.write_text(text.replace(old, old + "    replicas: [1, 2]\n"))
    done = CliRunner().invoke(app, ["tune", str(path), "--screen", "--plan"])
    assert done.exit_code == 2, done.output
    assert "replicas: 2 (a balancer in front) is not modelled" in " ".join(done.output.split())


MIX = """\
  products:
    rate: 10
    timeout: 5s
    params: {id: [1, 1000]}
    requests:
      - {weight: 3, path: "/api/products/{id}"}
      - {weight: 1, path: "/api/products/{id}/detail"}
"""


def _mixed(tmp_path: Path, extra: str = "") -> Path:
    from tests.simulate.test_simulate_run import SCENARIO

    line = '{path: "/api/products/{id}", params: {id: [1, 1000]}, rate: 5, timeout: 5s}'
    old = f"  products: {line}\n"
    assert old in SCENARIO
    path = tmp_path / "mix.yaml"
    path.write_text(SCENARIO.replace(old, MIX + extra))
    return path


def test_a_mix_of_requests_is_simulated_request_by_request(tmp_path: Path) -> None:
    """Each request of a mix is sent with its own method and path, as the load generator
    sends it (the model sent the endpoint's path, empty for a mix, and answered all 404)."""
    from harness.gateway.decide import CATALOGUE_PREFIX
    from harness.results.model import load

    loaded = load_scenario(_mixed(tmp_path))
    run = load(simulate_run(loaded.scenario, tmp_path / "out", builds=["before"]))
    samples = run.builds["before"].samples
    products = samples[samples["endpoint"] == "products"]
    assert len(products) > 0 and not (products["status"] == 404).any()
    ledger = run.builds["before"].ledger
    assert ledger["path"].str.startswith(CATALOGUE_PREFIX).any()  # the detail reads' calls


def test_a_mix_with_a_request_the_model_has_no_route_for_is_refused(tmp_path: Path) -> None:
    """However rare in the mix, a request to a route the model has not is refused by name."""
    extra = "      - {weight: 0.01, method: POST, path: /api/orders}\n"
    path = _mixed(tmp_path, extra)
    code, said = _simulate(tmp_path, path)
    assert code == 2, said
    assert "traffic.products sends POST /api/orders" in " ".join(said.split())
