"""Run folders: never overwritten, atomic writes, loading back, finding the newest, one t0."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from harness.core.errors import InputError
from harness.results.io import METRICS_COLUMNS, new_run_dir, samples_from_csv, write_json_atomic
from harness.results.model import BuildResult, latest, load


def test_run_dirs_are_unique_and_latest_finds_the_newest(tmp_path: Path) -> None:
    first = new_run_dir(tmp_path, "s")
    second = new_run_dir(tmp_path, "s")
    assert first != second
    with pytest.raises(InputError, match="no run folders"):
        latest(tmp_path)
    for run in (first, second):
        write_json_atomic(run / "manifest.json", {"run_id": run.name, "builds": {}})
    assert latest(tmp_path) == max(first, second, key=lambda p: p.name)
    assert latest(tmp_path, "s") == latest(tmp_path)
    assert not list(tmp_path.rglob(".*.tmp"))


def test_load_falls_back_to_the_live_csv_of_an_interrupted_build(tmp_path: Path) -> None:
    run = new_run_dir(tmp_path, "s")
    (run / "before.r2").mkdir()
    (run / "before.r2" / "samples.csv").write_text(
        "endpoint,index,intended_start,actual_start,end,status,error,outcome\n"
        "p,0,10.0,10.001,10.2,200,,\n"
        "p,1,10.1,10.101,,0,Unfinished,\n"
        "p,2,10.2,10.2"  # cut mid-line by a kill
    )
    write_json_atomic(
        run / "manifest.json",
        {
            "status": "interrupted",
            "builds": {"before.r2": {"build": "before", "repetition": 2, "t0": 9.5}},
        },
    )
    result = load(run)
    build = result.builds["before.r2"]
    assert (build.build, build.repetition, build.t0) == ("before", 2, 9.5)
    assert len(build.samples) == 2
    assert build.samples["end"].isna().tolist() == [False, True]
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"


def test_empty_csv_gives_typed_empty_frame(tmp_path: Path) -> None:
    frame = samples_from_csv(tmp_path / "missing.csv")
    assert len(frame) == 0 and str(frame["intended_start"].dtype) == "float64"


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a run folder"):
        load(tmp_path)


def test_public_face() -> None:
    import harness

    assert harness.__all__ == sorted(harness.__all__)
    assert harness.load_run is load and harness.latest_run is latest
    for name in harness.__all__:
        assert getattr(harness, name) is not None


def _build(info: dict[str, object], starts: list[float], scrapes: list[float]) -> BuildResult:
    samples = pd.DataFrame({"intended_start": starts})
    metrics = pd.DataFrame({c: [0.0] * len(scrapes) for c in METRICS_COLUMNS}).assign(t=scrapes)
    return BuildResult("b", samples, metrics, dict(info), warmup_s=5.0)


def test_t0_comes_from_the_manifest_else_the_load_start_plus_warmup() -> None:
    assert _build({"t0": 107.0, "load_start": 100.0}, [100.0], [90.0]).t0 == 107.0
    assert _build({"load_start": 100.0}, [101.0], [90.0]).t0 == 105.0
    assert _build({}, [101.0, 100.0], [90.0]).t0 == 105.0  # the first intended start
    assert _build({}, [], [90.0, 95.0]).t0 == 95.0  # no request: the first scrape
    assert _build({}, [], []).t0 == 0.0


def test_load_reads_the_warmup_only_when_a_manifest_lacks_t0(tmp_path: Path) -> None:
    run = new_run_dir(tmp_path, "s")
    (run / "scenario.yaml").write_text(
        "name: s\nwarmup: 3s\nduration: 10s\ntraffic: {p: {path: /p, rate: 1}}\n"
        "pg: {phases: [{name: a, start: 0s, duration: 10s, fault: {type: healthy}}]}\n"
        "builds: {b: {profile: retry-only}}\n"
    )
    (run / "b").mkdir()
    (run / "b" / "samples.csv").write_text(
        "endpoint,index,intended_start,actual_start,end,status,error,outcome\n"
        "p,0,50.0,50.0,50.1,200,,\n"
    )
    write_json_atomic(run / "manifest.json", {"builds": {"b": {"build": "b"}}})
    assert load(run).builds["b"].t0 == 53.0
    write_json_atomic(run / "manifest.json", {"builds": {"b": {"build": "b", "t0": 60.0}}})
    (run / "scenario.yaml").write_text("not: a scenario\n")  # not read: t0 is recorded
    assert load(run).builds["b"].t0 == 60.0
