"""Hand-off files: each says its kind and version, and is refused by a reader of another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

import pytest

from harness.core.errors import RunError
from harness.core.handoff import Handoff, HandoffError


class Payload(TypedDict):
    name: str
    port: int


V2: Handoff[Payload] = Handoff("thing", 2, ("name", "port"))


def _file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "thing.json"
    path.write_text(json.dumps(document))
    return path


def test_a_payload_round_trips_with_its_schema_first(tmp_path: Path) -> None:
    path = tmp_path / "thing.json"
    path.write_text(V2.text({"name": "a", "port": 5}))
    assert list(json.loads(path.read_text())) == ["schema", "name", "port"]
    assert json.loads(path.read_text())["schema"] == "harness.thing/2"
    assert V2.read(path) == {"name": "a", "port": 5}


@pytest.mark.parametrize(
    ("schema", "said"),
    [
        ("harness.thing/1", "written by an older harness (harness.thing/1), and this one reads"),
        ("harness.thing/3", "written by a newer harness (harness.thing/3), and this one reads"),
        ("harness.other/2", "a harness.other/2 hand-off, where harness.thing/2 was expected"),
        (None, "not a harness.thing/2 hand-off (no schema key: written by an older harness)"),
    ],
)
def test_another_kind_or_version_is_refused_saying_which(
    tmp_path: Path, schema: str | None, said: str
) -> None:
    document = {"name": "a", "port": 5} | ({} if schema is None else {"schema": schema})
    path = _file(tmp_path, document)
    with pytest.raises(HandoffError) as caught:
        V2.read(path)
    assert str(caught.value).startswith(f"{path}: {said}")
    assert isinstance(caught.value, RunError)  # exit 3 where the CLI sees it


def test_a_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cut.json").write_text('{"schema": "harness.thing/2", "na')
    with pytest.raises(HandoffError, match="cut.json: not JSON"):
        V2.read(tmp_path / "cut.json")
    with pytest.raises(HandoffError, match="expected a JSON object, not a list"):
        V2.read(_file(tmp_path, [1]))
    with pytest.raises(HandoffError, match="harness.thing/2 without port"):
        V2.read(_file(tmp_path, {"schema": "harness.thing/2", "name": "a"}))
    with pytest.raises(HandoffError, match="cannot read it"):
        V2.read(tmp_path / "missing.json")


def test_a_payload_cannot_carry_its_own_schema_key() -> None:
    with pytest.raises(ValueError, match="must not have a 'schema' key"):
        Handoff[dict[str, str]]("thing", 1).text({"schema": "x"})
