"""Delay distributions: the grammar a ``latency`` fault and ``pg.capacity.service`` share.

One place for the parameters (``fixed: delay``, ``uniform: min, max``, ...)
and their checks, so a service time is written exactly as a latency fault's
delay is; what the draws are lives in ``harness.gateway.decide.sample_delay``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.core.durations import Duration
from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import MAX_MIX_COMPONENTS, MAX_SIGMA, MAX_WEIGHT

HANG_LIMIT_S = 600.0
"""A hung call is released after this long even if the caller never gives up (bounded work).

Every delay a fault asks for is capped by it too, so no wait in the gateway is unbounded.
"""

DELAY_PARAMS = ("delay", "min", "max", "mean", "stddev", "median", "sigma")
_NEEDS = {
    "fixed": ("delay",),
    "uniform": ("min", "max"),
    "normal": ("mean", "stddev"),
    "lognormal": ("median", "sigma"),
}


class DelayParams(StrictModel):
    """Parameters of one delay distribution (``fixed``, ``uniform``, ``normal``, ``lognormal``)."""

    delay: Duration | None = Field(None, le=HANG_LIMIT_S, description="fixed")
    min: Duration | None = Field(None, le=HANG_LIMIT_S, description="uniform")
    max: Duration | None = Field(None, le=HANG_LIMIT_S, description="uniform")
    mean: Duration | None = Field(None, le=HANG_LIMIT_S, description="normal")
    stddev: Duration | None = Field(None, le=HANG_LIMIT_S, description="normal")
    median: Duration | None = Field(None, gt=0, le=HANG_LIMIT_S, description="lognormal")
    sigma: float | None = Field(None, gt=0, le=MAX_SIGMA, description="lognormal, of log(delay)")

    def _check_params(self, distribution: str) -> None:
        needs = _NEEDS[distribution]
        missing = [n for n in needs if getattr(self, n) is None]
        if missing:
            raise ValueError(f"distribution {distribution} needs {', '.join(missing)}")
        extra = [n for n in DELAY_PARAMS if n not in needs and getattr(self, n) is not None]
        if extra:
            raise ValueError(
                f"distribution {distribution} takes {', '.join(needs)}, not {', '.join(extra)}"
            )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g}s is greater than max {self.max:g}s")


class LatencyComponent(DelayParams):
    """One part of a ``mix``: chosen with probability ``weight`` / sum of weights."""

    weight: float = Field(gt=0, le=MAX_WEIGHT)
    distribution: Literal["fixed", "uniform", "normal", "lognormal"]

    @model_validator(mode="after")
    def _parameters_match(self) -> LatencyComponent:
        self._check_params(self.distribution)
        return self


Kind = Literal["fixed", "uniform", "normal", "lognormal", "mix"]


def check_distribution(
    params: DelayParams, distribution: str, mix: list[LatencyComponent] | None
) -> None:
    """A distribution's parameters hold together (``mix`` alone, or its own parameters)."""
    if distribution == "mix":
        if mix is None:
            raise ValueError(
                "distribution mix needs mix: a list of {weight, distribution, ...parameters}"
            )
        given = [n for n in DELAY_PARAMS if getattr(params, n) is not None]
        if given:
            raise ValueError(
                f"distribution mix takes its parameters inside each mix entry, "
                f"not {', '.join(given)}"
            )
    else:
        if mix is not None:
            raise ValueError(f"mix is only for distribution mix, not {distribution}")
        params._check_params(distribution)


class Distribution(DelayParams):
    """A delay distribution, a ``mix`` of them included (``pg.capacity.service``)."""

    distribution: Kind = "fixed"
    mix: list[LatencyComponent] | None = Field(None, min_length=1, max_length=MAX_MIX_COMPONENTS)

    @model_validator(mode="after")
    def _parameters_match(self) -> Distribution:
        check_distribution(self, self.distribution, self.mix)
        return self
