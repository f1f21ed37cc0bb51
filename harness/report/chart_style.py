"""The look shared by every chart: colours, the time axis with its shaded phases, notes, legends.

``charts`` decides what each chart plots; this module decides how a figure
is laid out and saved, so the five charts stay alike. Figures use the
object-oriented API on an Agg canvas: no pyplot global state, no display.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.transforms import blended_transform_factory

from harness.analysis.format import seconds_tick
from harness.core.timeline import fault_windows
from harness.results.io import write_file_atomic
from harness.scenario.faults import Phase
from harness.scenario.schema import Scenario

Handle = Line2D | Patch

BUILD_COLOURS = ("#1f77b4", "#e66100", "#5e3c99", "#1b9e77", "#d62728", "#8c564b")
"""Blue and orange first: they stay apart for colour-blind readers."""

FAULT_SHADE = "#f4cccc"
OUTSIDE_SHADE = "#e8e8e8"
STATE_STYLE: dict[int, tuple[str, str]] = {
    0: ("closed", "#4daf4a"),
    1: ("open", "#e41a1c"),
    2: ("half-open", "#ffb000"),
    3: ("disabled", "#999999"),
    4: ("forced open", "#800000"),
    5: ("metrics only", "#80b1d3"),
}
UNKNOWN_STATE = ("unknown", "#dddddd")

DPI = 110
WIDTH_IN = 11.0
LABEL_STYLE: dict[str, Any] = {"fontsize": 7, "color": "#555555", "va": "top", "clip_on": True}
FAULT_LABEL_STYLE: dict[str, Any] = {**LABEL_STYLE, "fontsize": 8, "color": "#990000"}
NOTE_STYLE: dict[str, Any] = {"ha": "center", "va": "center", "fontsize": 10, "zorder": 5}
NOTE_STYLE["bbox"] = {"fc": "white", "ec": "#bbbbbb", "alpha": 0.9}
LEGEND_STYLE: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}
LEGEND_STYLE.update(fontsize=8, frameon=False)

MAX_BLIPS = 400
"""Blip windows drawn one by one up to this many per phase; past it, too thin to see apart."""


@dataclass(frozen=True)
class Span:
    """The shared time axis: warmup start (negative), measured window end, end of the drain."""

    start: float
    end: float
    stop: float


def state_style(code: int) -> tuple[str, str]:
    """Name and colour of a breaker state code."""
    return STATE_STYLE.get(code, UNKNOWN_STATE)


def new_figure(nrows: int, row_height: float, sharex: bool = True) -> tuple[Figure, list[Axes]]:
    """A figure with one column of axes, laid out by constrained layout on an Agg canvas."""
    fig = Figure(figsize=(WIDTH_IN, 1.2 + row_height * nrows), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(max(1, nrows), 1, sharex=sharex, squeeze=False)
    return fig, list(grid[:, 0])


def save(fig: Figure, path: Path) -> Path:
    """Render to a temporary name and rename, so a reader never sees half a PNG."""
    write_file_atomic(path, lambda tmp: fig.savefig(tmp, format="png", dpi=DPI))
    return path


def time_axes(ax: Axes, scenario: Scenario, span: Span, bottom: bool) -> None:
    """Shade warmup, drain and fault phases, name them, and fix the shared time range."""
    at = blended_transform_factory(ax.transData, ax.transAxes)
    for a, z, name in ((span.start, 0.0, "warmup"), (span.end, span.stop, "drain")):
        if z > a:
            ax.axvspan(a, z, color=OUTSIDE_SHADE, zorder=0, lw=0)
            if z - a > 0.03 * (span.stop - span.start):
                ax.text((a + z) / 2, 0.98, name, ha="center", transform=at, **LABEL_STYLE)
    for phase in scenario.phases:
        if not phase.faulty:  # a capped phase, a TCP dependency's toxics: shaded too
            ax.text(phase.start, 0.98, f" {phase.name}", transform=at, **LABEL_STYLE)
            continue
        for a, z in shaded_windows(phase):
            ax.axvspan(a, z, color=FAULT_SHADE, alpha=0.6, zorder=0, lw=0)
        label = f" {phase.name} ({phase.label})"
        if phase.repeat is not None:
            ax.axvspan(phase.start, phase.end, color=FAULT_SHADE, alpha=0.15, zorder=0, lw=0)
            label += f" {phase.repeat.for_:g}s every {phase.repeat.every:g}s"
        ax.text(phase.start, 0.98, label, transform=at, **FAULT_LABEL_STYLE)
    ax.set_xlim(span.start, span.stop)
    ax.grid(True, alpha=0.3)
    if bottom:
        ax.set_xlabel("time since the measured window's start (s)")


def shaded_windows(phase: Phase) -> list[tuple[float, float]]:
    """When a phase's faults are on: the whole phase, or each blip up to MAX_BLIPS of them."""
    repeat = phase.repeat
    if repeat is None:
        return fault_windows(phase.start, phase.duration)
    return fault_windows(
        phase.start, phase.duration, repeat.every, repeat.for_, max_windows=MAX_BLIPS
    )


def note(ax: Axes, text: str, y: float = 0.5) -> None:
    """Say on the chart itself what is missing, rather than leave the reader to guess."""
    ax.text(0.5, y, text, transform=ax.transAxes, **NOTE_STYLE)


def empty(ax: Axes, text: str, keep_x: bool = True) -> None:
    """An empty panel: say why, and drop the placeholder 0..1 ticks that would mislead."""
    note(ax, text)
    ax.set_yticks([])
    if not keep_x:
        ax.set_xticks([])


def shared_rows(
    axes: Sequence[Axes], top: float, scenario: Scenario, span: Span, drawn: bool
) -> None:
    """A chart of one row per build: every row's y axis up to ``top`` (plus room), and a
    first row that says so when there was no build to draw."""
    for ax in axes:
        ax.set_ylim(0, top * 1.15)
    if not drawn:
        empty(axes[0], "no builds in this run")
        time_axes(axes[0], scenario, span, bottom=True)


def legend(ax: Axes, handles: Sequence[Handle] | None = None) -> None:
    """Legend outside the plot on the right, so it never hides data; skipped if empty."""
    if handles is None:
        handles = [h for h in ax.get_legend_handles_labels()[0] if isinstance(h, Handle)]
    if handles:
        ax.legend(handles=list(handles), **LEGEND_STYLE)


def log_seconds_axis(ax: Axes) -> None:
    """Log latency axis labelled in ms / s at 1-2-5 steps (minor ticks unlabelled)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(seconds_tick))
    ax.yaxis.set_minor_formatter(NullFormatter())


def endpoint_title(ax: Axes, scenario: Scenario, ep: str) -> None:
    e = scenario.traffic[ep]
    ax.set_title(f"{ep} ({e.request_label()}, {e.shape()} offered)", loc="left", fontsize=10)
