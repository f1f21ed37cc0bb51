"""The ``recovery.png`` chart: per build, offered load, goodput and retries per second, the
trigger shaded and the verdict in the legend (a scenario's ``recovery:``).

Offered, goodput and the client's retries are counted as the verdict counts them
(``analysis.recovery.per_second``: by the second each was due); the target's own retries
to the gateway are the rate of its canonical ``retries`` counter between scrapes. Kept
apart from ``charts`` as the verdict's own chart (it counts as ``analysis.recovery``
does); its record, with its caption, is in ``charts.CHART_TABLE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from harness.analysis.recovery import Verdict, counted_endpoints, per_second, recovery_verdict
from harness.report.chart_data import Array, counter_rate
from harness.report.chart_style import Handle, Span, legend, new_figure, shared_rows, time_axes
from harness.report.tables import verdict_text
from harness.results.model import BuildResult
from harness.scenario.schema import Scenario

TRIGGER_STYLE: dict[str, Any] = {
    "facecolor": "none",
    "edgecolor": "#999999",
    "hatch": "//",
    "lw": 0.0,
}


class Drawn(Protocol):
    """A build as ``charts`` prepares it: its name, colour, label and canonical series."""

    name: str
    colour: str
    label: str

    def series(self, name: str) -> tuple[Array, Array]: ...


def draw_recovery(
    results: Sequence[BuildResult], builds: Sequence[Drawn], scenario: Scenario, span: Span
) -> Figure:
    """One row per build; ``results`` are the builds' results in the order of ``builds``."""
    settings = scenario.recovery
    fig, axes = new_figure(max(1, len(builds)), 2.6)
    eps = ", ".join(counted_endpoints(scenario))
    fig.suptitle(f"Recovery after the trigger: offered, goodput and retries ({eps})")
    trigger = settings.trigger_phase(scenario.phases) if settings is not None else None
    top = 1.0
    for ax, result, b in zip(axes, results, builds, strict=False):
        seconds = per_second(scenario, result.samples, result.t0, span.start, span.stop)
        edges = seconds.edges
        ax.stairs(seconds.offered, edges, fill=True, color="#bbbbbb", alpha=0.7)
        ax.stairs(seconds.goodput, edges, color=b.colour, lw=2.0)
        share = (settings.goodput if settings is not None else 100.0) / 100.0
        ax.stairs(seconds.offered * share, edges, color="#555555", lw=0.7)
        ax.stairs(seconds.retried, edges, color=b.colour, lw=1.3, ls="--")
        target_t, target = counter_rate(*b.series("retries"))
        ax.step(target_t, target, where="pre", color=b.colour, lw=1.3, ls=":")
        top = max([top, *seconds.offered, *seconds.goodput, *seconds.retried, *target])
        if trigger is not None:
            ax.axvspan(trigger.start, trigger.end, **TRIGGER_STYLE)
        verdict = recovery_verdict(scenario, result.samples, result.t0)
        said = "no verdict" if verdict is None else _said(verdict)
        ax.set_title(b.label, color=b.colour, loc="left", fontsize=10, fontweight="bold")
        ax.set_ylabel("requests/s")
        time_axes(ax, scenario, span, bottom=ax is axes[-1])
        handles: list[Handle] = [
            Patch(color="#bbbbbb", alpha=0.7, label="offered/s (first attempts due)"),
            Line2D([], [], color=b.colour, lw=2.0, label=f"goodput/s: {said}"),
            Line2D([], [], color="#555555", lw=0.7, label=f"{share:.0%} of offered"),
            Line2D([], [], color=b.colour, lw=1.3, ls="--", label="client retries/s"),
            Line2D([], [], color=b.colour, lw=1.3, ls=":", label="target retries/s (counter)"),
        ]
        if trigger is not None:
            handles.append(Patch(label=f"trigger: {trigger.name}", **TRIGGER_STYLE))
        legend(ax, handles)
    shared_rows(axes, top, scenario, span, drawn=bool(builds))
    return fig


def _said(verdict: Verdict) -> str:
    """The verdict as the tables say it."""
    build = {"timeline": verdict.figures, "not_reached": verdict.unreached}
    return verdict_text(build)  # type: ignore[arg-type]
