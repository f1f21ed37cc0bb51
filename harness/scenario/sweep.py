"""The ``sweep:`` section: which settings of one build ``harness tune`` varies, and to what end.

Only its shape is checked here (so ``harness validate`` reads a sweep file); each candidate
is made and checked through its build kind's own schema by ``harness.tune.plan``, where
an axis over a setting the build does not have is said at the axis's line.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from harness.core.durations import parse_duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import MAX_GATE_NAME_CHARS

MAX_AXIS_VALUES = 100
"""Values of one axis of a grid."""
MAX_CANDIDATES = 1000
"""Candidates a sweep may describe (a grid's product, a sample's budget); how many run for
real is capped apart (``harness.tune.plan.MAX_REAL_RUNS``)."""


def _finite(value: Any) -> Any:
    """A value an axis sets: a float in it is finite (a candidate is written as YAML and run:
    ``.nan`` and ``.inf`` are no setting). Said at the value's own line."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number (not .inf or .nan)")
    return value


def _bound(value: Any) -> Any:
    """A sampled range's bound: a finite number or a duration (``1s``), nothing else."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("a range's bound is a number or a duration such as 1s")
    if isinstance(value, str):
        parse_duration(value)
    return _finite(value)


AxisValue = Annotated[Any, AfterValidator(_finite)]
RangeBound = Annotated[Any, AfterValidator(_bound)]


class Sample(StrictModel):
    """A seeded Latin hypercube over ranges: ``budget`` points, each axis cut in ``budget``
    strata, one point per stratum (McKay et al. 1979)."""

    budget: int = Field(ge=1, le=MAX_CANDIDATES)
    seed: int = Field(0, ge=0, lt=2**63)
    ranges: dict[str, list[RangeBound]] = Field(min_length=1, max_length=20)
    """Setting path -> ``[low, high]``: integers stay integers, durations (``1s``) durations;
    each bound finite (``.nan``, ``.inf`` refused at its line)."""


class Objective(StrictModel):
    """One expression of figures (gate grammar, no build prefix) to minimise or maximise."""

    minimize: str | None = Field(None, min_length=1, max_length=MAX_GATE_NAME_CHARS)
    maximize: str | None = Field(None, min_length=1, max_length=MAX_GATE_NAME_CHARS)

    @model_validator(mode="after")
    def _one(self) -> Objective:
        if (self.minimize is None) == (self.maximize is None):
            raise ValueError("give exactly one of minimize or maximize")
        return self

    @property
    def expr(self) -> str:
        return self.minimize if self.minimize is not None else str(self.maximize)

    @property
    def sense(self) -> str:
        return "minimize" if self.minimize is not None else "maximize"


class Screen(StrictModel):
    """With the simulator: how many of the best simulated candidates run for real."""

    best: int = Field(6, ge=1, le=100)
    others: int = Field(2, ge=0, le=100)
    """Besides the best: spread over the rest of the simulated ranking, to measure the
    simulator's error where it ranks a candidate badly too."""


class Refine(StrictModel):
    """After the first pass: more repetitions for the recommended candidate and the
    neighbours it is not told apart from by noise (docs/tune.md#refinement)."""

    repeats: int = Field(2, ge=1, le=10)
    """Extra rounds for each one picked (each round as many repetitions as ``--repeat``)."""
    within: float | str = Field("10%")
    """Without an interval (one repetition): objectives closer than this share of the
    recommended candidate's are within noise (``10%`` or 0.1)."""
    front: bool = False
    """Also the recommended candidate's front neighbours within noise on either score."""

    @property
    def tolerance(self) -> float:
        """``within`` as a fraction."""
        text = str(self.within).strip()
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)

    @model_validator(mode="after")
    def _within(self) -> Refine:
        try:
            value = self.tolerance
        except ValueError:
            raise ValueError(f"within: a share such as 10% or 0.1, not {self.within!r}") from None
        if not 0 < value < 1:
            raise ValueError(f"within: between 0 and 100%, not {self.within!r}")
        return self


class Sweep(StrictModel):
    """Candidates over one build's settings, an objective and constraints (docs/tune.md)."""

    base: str = Field(min_length=1, description="the build whose settings are varied")
    include: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="other builds of the scenario taken whole as named candidates",
    )
    points: dict[str, dict[str, AxisValue]] = Field(
        default_factory=dict, max_length=100, description="named candidates: path -> value"
    )
    grid: dict[str, list[AxisValue]] = Field(
        default_factory=dict, max_length=20, description="path -> values; every combination"
    )
    sample: Sample | None = None
    abbrev: dict[str, str] = Field(
        default_factory=dict, description="path -> the short word naming its values"
    )
    objective: Objective
    subject_to: list[str] = Field(default_factory=list, alias="subject-to", max_length=50)
    front: list[str] = Field(
        default_factory=lambda: ["blocked_pct_healthy", "protected_p99"],
        min_length=2,
        max_length=2,
        description="the two scores of the Pareto front chart, both minimised",
    )
    screen: Screen = Field(default_factory=Screen)
    refine: Refine | None = None
    """Off unless given (or ``harness tune --refine N``)."""

    @model_validator(mode="after")
    def _shape(self) -> Sweep:
        for path, values in self.grid.items():
            if not values:
                raise ValueError(f"grid axis {path!r} has no values")
            if len(values) > MAX_AXIS_VALUES:
                raise ValueError(f"grid axis {path!r}: at most {MAX_AXIS_VALUES} values")
        if self.sample is not None:
            for path, bounds in self.sample.ranges.items():
                if len(bounds) != 2:
                    raise ValueError(f"sample range {path!r} is [low, high], not {bounds!r}")
        return self
