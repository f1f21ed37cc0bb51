"""The typed manifest: what the harness writes conforms to it, and old run folders still load."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest

from harness.core.errors import InputError
from harness.load.plan import LoadPlan
from harness.results.io import RunFolder
from harness.results.manifest import (
    SCHEMA,
    BuildRecord,
    KindRecord,
    ManifestRecord,
    build_record,
    read_manifest,
    start_defaults,
)
from harness.results.model import load
from harness.run.kinds.shop.target import SHOP_CONFIG
from harness.run.manifest import Manifest
from harness.scenario.loader import load_scenario
from tests.analysis.test_model import _conforms
from tests.conftest import ROOT

V1 = ROOT / "tests" / "data" / "run-quickstart-v1"
"""A quickstart run made before the manifest was typed (no kind, map, breaker, orchestrator)."""


def test_an_old_manifest_loads_with_the_defaults_of_what_it_lacks() -> None:
    raw = json.loads((V1 / "manifest.json").read_text())
    assert not {"kind", "metrics_map", "breaker"} & set(raw["builds"]["before"])
    assert sorted(_conforms(raw["builds"]["before"], BuildRecord, "before")) == [
        "before.breaker: missing",
        "before.kind: missing",
        "before.metrics_map: missing",
    ]  # only what it predates: every key it has is in the model, with its type
    manifest = read_manifest(V1 / "manifest.json")
    assert _conforms(manifest, ManifestRecord, "manifest") == []
    before = manifest["builds"]["before"]
    assert (before["kind"], before["metrics_map"], before["breaker"]) == ("shop", {}, None)
    run = load(V1)
    assert run.builds["after"].info["kind"] == "shop" and run.builds["after"].preset == "shop"
    assert run.builds["after"].t0 == raw["builds"]["after"]["t0"]


def test_a_manifest_the_run_writes_round_trips_through_its_type(tmp_path: Path) -> None:
    loaded = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    manifest = Manifest.begin(loaded, "run-1")
    manifest.builds["before"] = {
        "build": "before",
        "repetition": 1,
        "status": "completed",
        "started_at": "2026-12-01T00:00:00Z",
        "kind": "shop",
        "preset": "shop",
        "metrics_map": {},
        "breaker": None,
        "pg_url": "http://127.0.0.1:1",
        "processes": {"pg": 1, "target": 2, "load": 3},
        "t0": 105.5,
        "samples": 10,
        "pg_calls": 12,
        "ended_at": "2026-12-01T00:01:00Z",
    }
    manifest.end("completed", None)
    folder = RunFolder.create(tmp_path, "quickstart")
    manifest.save(folder)
    folder.close()
    path = folder.path / "manifest.json"
    written = json.loads(path.read_text())
    assert list(written)[0] == "schema" and written["schema"] == SCHEMA
    assert _conforms(written, ManifestRecord, "manifest") == []
    assert read_manifest(path) == manifest.record  # nothing filled in, nothing lost


def test_a_partial_record_gets_the_start_defaults_and_keeps_its_own() -> None:
    record = build_record("after.r2", {"build": "after", "repetition": 2, "t0": 1.0})
    assert record == {**start_defaults("after.r2"), "build": "after", "repetition": 2, "t0": 1.0}
    assert build_record("after", {})["build"] == "after"  # before --repeat: the key is the name


def test_the_start_defaults_are_the_required_keys_the_run_writes_later_or_not_at_all() -> None:
    required = BuildRecord.__required_keys__
    assert set(start_defaults("b")) | {"status", "started_at"} == required


def test_a_manifest_of_another_schema_or_shape_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "harness.manifest/2", "builds": {}}))
    with pytest.raises(InputError, match=r"schema 'harness.manifest/2', and this harness reads"):
        read_manifest(path)
    path.write_text(json.dumps({"builds": {"b": 3}}))
    with pytest.raises(InputError, match="builds: expected an object of build records"):
        read_manifest(path)
    path.write_text("{")
    with pytest.raises(InputError, match="not JSON"):
        load(tmp_path)


def _documented_keys(section: str) -> list[str]:
    """The keys of one table of docs/report.md's ``manifest.json`` section, in order."""
    text = (ROOT / "docs" / "report.md").read_text()
    body = text.split(f"<!-- {section} -->", 1)[1].split("\n\n", 1)[0]
    return [k for line in body.splitlines()[2:] for k in re.findall(r"^\| `([a-z0-9_]+)`", line)]


@pytest.mark.parametrize(
    ("section", "model"),
    [("manifest keys", ManifestRecord), ("build keys", BuildRecord)],
)
def test_the_docs_list_every_key_of_the_manifest_in_its_order(
    section: str, model: type[object]
) -> None:
    hints = list(typing.get_type_hints(model))
    if model is BuildRecord:  # the kind's own keys come after the build's
        kind = list(typing.get_type_hints(KindRecord))
        hints = [k for k in hints if k not in kind] + kind
    assert _documented_keys(section) == hints


@pytest.mark.integration
def test_a_real_runs_manifest_and_hand_offs_conform_to_their_types(short_run: Path) -> None:
    raw = json.loads((short_run / "manifest.json").read_text())
    assert raw["status"] == "completed" and set(raw["builds"]) == {"before", "after"}
    assert _conforms(raw, ManifestRecord, "manifest") == []
    assert read_manifest(short_run / "manifest.json") == raw  # a current one needs no default
    for key in raw["builds"]:
        assert (
            LoadPlan.read(short_run / key / "plan.json").base_url
            == raw["builds"][key]["target_url"]
        )
        assert (
            SHOP_CONFIG.read(short_run / key / "target.json")["pg-url"]
            == raw["builds"][key]["pg_url"]
        )
