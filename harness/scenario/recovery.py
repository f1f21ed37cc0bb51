"""The scenario's ``recovery:``: what "did it come back by itself?" means for this run.

After the trigger (a phase) ends, goodput (requests answered 2xx/3xx, by the second they
were due) must come back to at least ``goodput`` of the offered load (first attempts due
that second, sent or not) and stay there for ``hold``, starting within ``within`` of the
trigger's end; else the build is ``stuck``. The figures are ``recovered`` and
``recovered_after_s`` (``harness.analysis.recovery``). The trigger defaults to the last
phase with a fault other than ``healthy`` (a brownout is one), or with a cap on the target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, Field, GetJsonSchemaHandler
from pydantic_core import CoreSchema

from harness.core.durations import Duration, format_duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import MAX_DURATION_S, SafeName

if TYPE_CHECKING:
    from harness.scenario.faults import Phase


def _percentage(value: Any) -> Any:
    """``90%`` -> 90.0; a bare number is already a percentage."""
    if isinstance(value, str):
        text = value.strip()
        if not text.endswith("%"):
            raise ValueError(f"goodput {value!r}: write a percentage of the offered load, e.g. 90%")
        try:
            return float(text[:-1])
        except ValueError:
            raise ValueError(f"goodput {value!r} is not a percentage such as 90%") from None
    return value


class _PercentOrNumber:
    """JSON Schema of a percentage: a number (the field's bounds kept) or text such as ``90%``."""

    @staticmethod
    def __get_pydantic_json_schema__(
        schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        text = {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*%\s*$"}
        return {"anyOf": [handler(schema), text]}


Percentage = Annotated[float, BeforeValidator(_percentage), _PercentOrNumber()]
"""``90%`` or ``90``: a percentage."""


class RecoverySettings(StrictModel):
    """``recovery:``: the trigger, and how much goodput, how soon and for how long."""

    trigger: SafeName | None = Field(
        None,
        description="the phase whose end recovery is timed from; default: the last phase with "
        "a non-healthy fault or a target cap",
    )
    goodput: Percentage = Field(
        90.0, gt=0, le=100, description="% of the offered load answered 2xx/3xx, each second"
    )
    within: Duration = Field(
        30.0, ge=0, le=MAX_DURATION_S, description="the held span must start this soon"
    )
    hold: Duration = Field(5.0, ge=1, le=MAX_DURATION_S, description="how long it must hold")

    def trigger_phase(self, phases: list[Phase]) -> Phase | None:
        """The phase recovery is timed from: the named one, or the default (None: none)."""
        if self.trigger is not None:
            return next((p for p in phases if p.name == self.trigger), None)
        return default_trigger(phases)


def default_trigger(phases: list[Phase]) -> Phase | None:
    """The last phase (by start) with a fault other than ``healthy``, a TCP dependency's
    toxics, or a target cap."""
    found = [
        p
        for p in phases
        if any(f.type != "healthy" for f in p.faults)
        or getattr(p, "target", None) is not None
        or getattr(p, "toxics", None)
    ]
    return max(found, key=lambda p: p.start, default=None)


def recovery_problems(
    settings: RecoverySettings | None, phases: list[Phase], duration: float
) -> list[tuple[tuple[str | int, ...], str]]:
    """(YAML path, message) of a ``recovery:`` that cannot be measured in this scenario."""
    if settings is None:
        return []
    names = ", ".join(p.name for p in phases) or "none"
    phase = settings.trigger_phase(phases)
    if phase is None:
        if settings.trigger is not None:
            return [(("recovery", "trigger"), f"no phase {settings.trigger!r} (phases: {names})")]
        return [
            (
                ("recovery",),
                "no phase has a fault (or a target cap) to recover from: name the trigger "
                f"phase (phases: {names})",
            )
        ]
    needed = phase.end + settings.within + settings.hold
    if needed > duration + 1e-9:
        return [
            (
                ("recovery", "within"),
                f"trigger {phase.name!r} ends at {format_duration(phase.end)}; within "
                f"{format_duration(settings.within)} + hold {format_duration(settings.hold)} "
                f"need the measured window to last {format_duration(needed)}, and duration is "
                f"{format_duration(duration)}",
            )
        ]
    return []
