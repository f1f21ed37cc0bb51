"""Charts: the five PNGs from runs with data missing, and blips shaded one by one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
from matplotlib.image import imread

from harness.report.chart_style import MAX_BLIPS, shaded_windows
from harness.report.charts import draw_charts, scenario_charts
from harness.results.io import SAMPLE_DTYPES
from harness.results.model import BuildResult, RunResult
from harness.scenario.loader import load_scenario_text
from harness.scenario.schema import Scenario

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pixels(path: Path) -> npt.NDArray[np.uint8]:
    """The image's RGB pixels as 0-255 integers, one row per pixel."""
    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path.name} is not a PNG"
    image = imread(path)
    assert image.ndim == 3 and image.shape[2] in (3, 4)
    height, width = image.shape[:2]
    assert 800 <= width <= 2000, f"{path.name}: width {width}"
    assert 250 <= height <= 2500, f"{path.name}: height {height}"
    rgb = np.asarray(image[..., :3], dtype=float)
    return np.asarray(np.round(rgb * 255), dtype=np.uint8).reshape(-1, 3)


def _has_colour(pixels: npt.NDArray[np.uint8], hex_colour: str, tolerance: int = 12) -> bool:
    want = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return bool((np.abs(pixels.astype(int) - want).max(axis=1) <= tolerance).any())


def _assert_not_blank(path: Path) -> npt.NDArray[np.uint8]:
    pixels = _pixels(path)
    assert len(np.unique(pixels, axis=0)) >= 8, f"{path.name} looks blank"
    assert path.stat().st_size > 10_000
    return pixels


SCENARIO = """\
name: tiny
seed: 1
warmup: 1s
duration: 10s
traffic:
  payments: {method: POST, path: /api/payments, rate: 2, calls-gateway: true}
  products: {path: /api/products, rate: 1}
pg:
  phases:
    - {name: calm, start: 0s, duration: 4s, fault: {type: healthy}}
    - {name: storm, start: 4s, duration: 6s, fault: {type: error}}
builds:
  only: {profile: retry-only, workers: 4}
"""


def _tiny_scenario() -> Scenario:
    return load_scenario_text(SCENARIO).scenario


def _samples(n: int, t0: float) -> pd.DataFrame:
    """``n`` payments one every 0.5 s from the warmup on; the last one never finished."""
    start = t0 - 1.0 + 0.5 * np.arange(n)
    end = start + 0.01
    if n:
        end[-1] = np.nan
    frame = pd.DataFrame(
        {
            "endpoint": ["payments"] * n,
            "index": np.arange(n),
            "intended_start": start,
            "actual_start": start,
            "end": end,
            "status": [200] * n,
            "error": [""] * n,
            "outcome": ["APPROVED"] * n,
        }
    )
    return frame.astype(SAMPLE_DTYPES)


NO_METRICS = pd.DataFrame(columns=["t", "source", "series", "labels", "value"])


@pytest.mark.parametrize("n_samples", [0, 1, 20])
def test_charts_without_metrics_do_not_raise(tmp_path: Path, n_samples: int) -> None:
    t0 = 1_800_000_000.0
    build = BuildResult("only", _samples(n_samples, t0), NO_METRICS, {"t0": t0})
    run = RunResult(tmp_path, {"status": "failed"}, {"only": build})

    paths = draw_charts(run, _tiny_scenario(), tmp_path / "charts")

    assert list(paths) == scenario_charts(_tiny_scenario())
    for path in paths.values():
        _assert_not_blank(path)


def test_charts_of_a_run_without_builds_or_t0(tmp_path: Path) -> None:
    """A run that died before any build started still gets charts that say so."""
    empty = RunResult(tmp_path, {}, {})
    paths = draw_charts(empty, _tiny_scenario(), tmp_path / "empty")
    assert all(p.exists() for p in paths.values())

    no_t0 = BuildResult("only", _samples(5, 1_800_000_000.0), NO_METRICS, {})
    paths = draw_charts(RunResult(tmp_path, {}, {"only": no_t0}), _tiny_scenario(), tmp_path)
    assert all(p.exists() for p in paths.values())


def test_blip_windows_are_shaded_one_by_one() -> None:
    scenario = load_scenario_text(
        """\
name: blips
duration: 60s
traffic:
  pay: {path: /pay, rate: 1, calls-gateway: true}
pg:
  phases:
    - {name: out, start: 10s, duration: 20s, fault: {type: timeout}}
    - name: blips
      start: 30s
      duration: 25s
      fault: {type: timeout}
      repeat: {every: 10s, for: 2s}
    - name: dense
      start: 55s
      duration: 5s
      fault: {type: timeout}
      repeat: {every: 0.01s, for: 0.005s}
builds:
  b: {profile: retry-only}
"""
    ).scenario
    out, blips, dense = scenario.pg.phases
    assert shaded_windows(out) == [(10.0, 30.0)]
    assert shaded_windows(blips) == [(30.0, 32.0), (40.0, 42.0), (50.0, 52.0)]
    assert MAX_BLIPS < 5 / 0.01 and shaded_windows(dense) == [(55.0, 60.0)]
