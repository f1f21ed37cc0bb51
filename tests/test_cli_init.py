"""`harness init` (a starter scenario and its schema) and `harness schema`, through the CLI."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import EXIT_INPUT, EXIT_OK, EXIT_RUN, app
from harness.scenario.starter import SCHEMA_FILE, STARTER_PRESETS, scenario_json_schema

ROOT = Path(__file__).resolve().parents[1]

KIND_ARGS: dict[str, list[str]] = {
    "default": [],
    "command": ["--command", "node server.js --port {port}"],
    "image": ["--image", "shop:before"],
    "url": ["--url", "http://127.0.0.1:8080"],
}
COMBINATIONS = list(itertools.product(STARTER_PRESETS, KIND_ARGS))

runner = CliRunner()


def init(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, ["init", *map(str, args)])
    return result.exit_code, result.output


@pytest.mark.parametrize(("preset", "kind"), COMBINATIONS)
def test_every_combination_writes_a_valid_scenario(tmp_path: Path, preset: str, kind: str) -> None:
    path = tmp_path / "svc" / "checkout.yaml"  # a folder that does not exist yet
    code, output = init(path, "--preset", preset, *KIND_ARGS[kind])
    assert code == EXIT_OK, output
    assert path.is_file() and (path.parent / SCHEMA_FILE).is_file()
    validated = runner.invoke(app, ["validate", str(path)])
    assert validated.exit_code == EXIT_OK, validated.output
    assert "builds: before, after" in validated.output
    text = path.read_text()
    first = text.splitlines()[0]
    assert first == f"# yaml-language-server: $schema={SCHEMA_FILE}"
    # the comment points at the schema written beside the file, and the file is valid by it
    schema = json.loads((path.parent / first.split("$schema=")[1]).read_text())
    jsonschema.validate(yaml.safe_load(text), schema)
    assert yaml.safe_load(text)["name"] == "checkout"


@pytest.mark.parametrize("kind", list(KIND_ARGS))
def test_harness_validate_accepts_the_written_file(tmp_path: Path, kind: str) -> None:
    """The real commands, as a user runs them (one preset per kind keeps it quick)."""
    preset = {"default": "shop", "command": "opossum", "image": "spring-boot", "url": "shop"}[kind]
    harness = [sys.executable, "-m", "harness"]
    written = subprocess.run(
        [*harness, "init", "--preset", preset, *KIND_ARGS[kind]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "scenario.yaml").is_file()  # the default PATH
    checked = subprocess.run(
        [*harness, "validate", "scenario.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "scenario.yaml: ok" in checked.stdout


def test_an_existing_file_is_not_overwritten_without_force(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text("name: mine\n")
    code, output = init(path, "--preset", "opossum")
    assert code == EXIT_INPUT
    assert "exists; --force overwrites it" in output
    assert path.read_text() == "name: mine\n"
    assert not (tmp_path / SCHEMA_FILE).exists()  # nothing written at all
    code, output = init(path, "--preset", "opossum", "--force")
    assert code == EXIT_OK, output
    assert "preset: opossum" in path.read_text()


def test_bad_options_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "scenario.yaml"
    two_kinds = init(path, "--command", "x {port}", "--url", "http://127.0.0.1:1")
    assert two_kinds[0] == EXIT_INPUT and "not --command and --url" in two_kinds[1]
    remote = init(path, "--url", "http://10.1.2.3:8080")
    assert remote[0] == EXIT_INPUT
    assert "not on this machine" in remote[1] and "nothing written" in remote[1]
    bad_image = init(path, "--image", "two words")
    assert bad_image[0] == EXIT_INPUT
    unknown_preset = init(path, "--preset", "django")
    assert unknown_preset[0] == EXIT_INPUT
    folder = init(tmp_path)
    assert folder[0] == EXIT_INPUT and "is a folder" in folder[1]
    schema_name = init(tmp_path / SCHEMA_FILE)
    assert schema_name[0] == EXIT_INPUT
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_folder_is_a_run_failure(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, output = init(blocker / "scenario.yaml", "--preset", "shop")
    assert code == EXIT_RUN, output


def test_schema_prints_the_json_schema() -> None:
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == EXIT_OK
    printed = json.loads(result.stdout)
    assert printed == scenario_json_schema()
    assert printed["$schema"].startswith("https://json-schema.org/")


def test_schema_output_writes_a_file(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "harness.schema.json"
    result = runner.invoke(app, ["schema", "--output", str(out)])
    assert result.exit_code == EXIT_OK, result.output
    schema = json.loads(out.read_text())
    for shipped in sorted((ROOT / "scenarios").glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(shipped.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "duration": "30 parsecs"}, schema)


def test_a_spring_boot_jar_starter_has_jar_builds_that_differ_only_by_properties(
    tmp_path: Path,
) -> None:
    jar = tmp_path / "target" / "app.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"PK")
    path = tmp_path / "scenarios" / "checkout.yaml"
    code, output = init(path, "--preset", "spring-boot", "--jar", jar)
    assert code == EXIT_OK, output
    validated = runner.invoke(app, ["validate", str(path)])  # the jar found from the file
    assert validated.exit_code == EXIT_OK, validated.output
    data = yaml.safe_load(path.read_text())
    before, after = data["builds"]["before"], data["builds"]["after"]
    assert before["jar"] == after["jar"] == "../target/app.jar"
    assert before["properties"]["pg.base-url"] == "{pg_url}"
    assert {k: v for k, v in after.items() if k != "properties"} == {
        k: v for k, v in before.items() if k != "properties"
    }
    assert after["properties"].items() >= before["properties"].items()  # <<: *common
    jsonschema.validate(data, json.loads((path.parent / SCHEMA_FILE).read_text()))
    other = init(tmp_path / "o.yaml", "--preset", "opossum", "--jar", jar)
    assert other[0] == EXIT_INPUT and "--preset spring-boot" in other[1]
    two = init(tmp_path / "o.yaml", "--jar", jar, "--command", "java -jar x.jar")
    assert two[0] == EXIT_INPUT and "not --command and --jar" in two[1]


def test_a_jar_that_is_not_there_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """``--jar /nope/app.jar`` wrote a starter that validate then refused (issue 32, item 11)."""
    path = tmp_path / "scenario.yaml"
    missing = tmp_path / "nope" / "app.jar"
    code, output = init(path, "--jar", missing)
    assert code == EXIT_INPUT, output
    assert str(missing) in output.replace("\n", "")
    folder = init(path, "--jar", tmp_path)
    assert folder[0] == EXIT_INPUT, folder[1]
    assert list(tmp_path.iterdir()) == []


def _mappings(folder: Path, mapping: object) -> Path:
    (folder / "mappings").mkdir(parents=True)
    (folder / "mappings" / "m.json").write_text(json.dumps(mapping))
    return folder / "mappings"


VISITS = {"request": {"method": "GET", "urlPath": "/visits"}, "response": {"status": 200}}


@pytest.mark.parametrize("kind", ["command", "image", "url"])
def test_a_starter_from_wiremock_mappings_plays_each_folder_as_a_dependency(
    tmp_path: Path, kind: str
) -> None:
    visits = _mappings(tmp_path / "wiremock" / "visits", VISITS)
    owners = _mappings(tmp_path / "wiremock" / "Owners API", {"mappings": [VISITS]})
    path = tmp_path / "s.yaml"
    code, output = init(path, *KIND_ARGS[kind], "--mappings", visits, "--mappings", owners)
    assert code == EXIT_OK, output
    written = yaml.safe_load(path.read_text())
    assert list(written["dependencies"]) == ["visits", "owners-api"]
    assert written["dependencies"]["visits"]["mappings"] == "wiremock/visits/mappings"
    assert "pg" not in written and "outage" in str(written["dependencies"]["visits"]["phases"])
    assert any("dependencies.visits.per_request[outage]" in g["expr"] for g in written["gates"])
    checked = subprocess.run(  # with its folders: the mappings are read as a run reads them
        [sys.executable, "-m", "harness", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_mappings_outside_the_subset_or_for_the_shop_write_nothing(tmp_path: Path) -> None:
    proxied = {"request": {"urlPath": "/x"}, "response": {"proxyBaseUrl": "http://example.com"}}
    folder = _mappings(tmp_path / "vendor", proxied)
    code, output = init(tmp_path / "s.yaml", *KIND_ARGS["command"], "--mappings", folder)
    assert code == EXIT_INPUT and "proxyBaseUrl" in output, output
    ok = _mappings(tmp_path / "visits", VISITS)
    code, output = init(tmp_path / "s.yaml", "--preset", "shop", "--mappings", ok)
    assert code == EXIT_INPUT and "reference shop" in output, output
    assert not (tmp_path / "s.yaml").exists()
