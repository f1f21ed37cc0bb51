"""Arrival rates over time: a piecewise-linear rate, its integral, and the integral's inverse.

An endpoint's traffic is a rate in requests per second that may ramp (k6's
``ramping-arrival-rate``): linear between knots ``(t, rate)``. The scenario
builds one per endpoint, the report takes its mean over a phase (the offered
rate) and draws it, and the load plan places arrivals with it: the i-th
uniform arrival is where the integral of the rate reaches ``i``, which for a
linear ramp is the root of a quadratic (``time_at``). Pure arithmetic, no
clock and no I/O.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

Knot = tuple[float, float]
"""``(t, rate)``: seconds, requests per second."""


@dataclass(frozen=True)
class RateProfile:
    """A rate that is linear between ``knots`` (strictly increasing times) and 0 outside them."""

    knots: tuple[Knot, ...]
    _times: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _cumulative: tuple[float, ...] = field(init=False, repr=False, compare=False)
    """The integral from the first knot to each knot."""

    def __post_init__(self) -> None:
        if len(self.knots) < 2:
            raise ValueError("a rate profile needs at least two knots")
        total = 0.0
        cumulative = [0.0]
        for (t0, r0), (t1, r1) in zip(self.knots, self.knots[1:], strict=False):
            if not t1 > t0:
                raise ValueError(f"knot times must increase: {t0:g} then {t1:g}")
            if r0 < 0 or r1 < 0 or not math.isfinite(r0 + r1 + t0 + t1):
                raise ValueError("rates and times must be finite, and rates not negative")
            total += (r0 + r1) / 2 * (t1 - t0)
            cumulative.append(total)
        object.__setattr__(self, "_times", tuple(t for t, _ in self.knots))
        object.__setattr__(self, "_cumulative", tuple(cumulative))

    @classmethod
    def constant(cls, rate: float, start: float, end: float) -> RateProfile:
        return cls(((start, rate), (end, rate)))

    @property
    def start(self) -> float:
        return self.knots[0][0]

    @property
    def end(self) -> float:
        return self.knots[-1][0]

    @property
    def total(self) -> float:
        """The integral over the whole profile: how many arrivals it holds."""
        return self._cumulative[-1]

    @property
    def peak(self) -> float:
        return max(r for _, r in self.knots)

    @property
    def is_constant(self) -> bool:
        return len({r for _, r in self.knots}) == 1

    def rate_at(self, t: float) -> float:
        """The rate at ``t`` (0 outside the profile)."""
        if not self.start <= t <= self.end:
            return 0.0
        j = min(bisect.bisect_right(self._times, t) - 1, len(self.knots) - 2)
        (t0, r0), (t1, r1) = self.knots[j], self.knots[j + 1]
        return r0 + (r1 - r0) * (t - t0) / (t1 - t0)

    def cumulative(self, t: float) -> float:
        """The integral of the rate from the profile's start to ``t``."""
        if t <= self.start:
            return 0.0
        if t >= self.end:
            return self.total
        j = bisect.bisect_right(self._times, t) - 1
        (t0, r0), (t1, r1) = self.knots[j], self.knots[j + 1]
        s = t - t0
        return self._cumulative[j] + r0 * s + (r1 - r0) / (t1 - t0) * s * s / 2

    def integral(self, a: float, b: float) -> float:
        """The integral of the rate over ``[a, b]``: arrivals expected in that window."""
        return self.cumulative(b) - self.cumulative(a) if b > a else 0.0

    def mean(self, a: float, b: float) -> float:
        """The mean rate over ``[a, b]`` (the offered rate of a window)."""
        return self.integral(a, b) / (b - a) if b > a else self.rate_at(a)

    def time_at(self, x: float) -> float:
        """The first time the integral reaches ``x`` (``0 <= x < total``) with arrivals due.

        Spans where the rate is 0 hold no arrival: an ``x`` at their edge lands
        where the rate rises again, not where it fell to 0. Within a ramp from
        ``r0`` with slope ``a``, ``r0 s + a s^2 / 2 = x`` is solved in the
        cancellation-free form ``s = 2x / (r0 + sqrt(r0^2 + 2 a x))``.
        """
        if not 0 <= x < self.total:
            raise ValueError(f"{x:g} is outside the profile's integral [0, {self.total:g})")
        # The last knot whose integral is <= x: past every zero-area span ending at x.
        j = bisect.bisect_right(self._cumulative, x) - 1
        (t0, r0), (t1, r1) = self.knots[j], self.knots[j + 1]
        rest = x - self._cumulative[j]
        if r0 == r1:
            s = rest / r0
        else:
            slope = (r1 - r0) / (t1 - t0)
            root = math.sqrt(max(0.0, r0 * r0 + 2 * slope * rest))
            s = 2 * rest / (r0 + root) if rest > 0 else 0.0
        return t0 + min(s, t1 - t0)

    def shifted(self, dt: float) -> RateProfile:
        """The same profile ``dt`` seconds later."""
        return RateProfile(tuple((t + dt, r) for t, r in self.knots))

    def drawn(self, lo: float, hi: float) -> tuple[list[float], list[float]]:
        """Times and rates to draw the profile over ``[lo, hi]``: its knots, clipped."""
        inside = [(t, r) for t, r in self.knots if lo < t < hi]
        ts = [lo, *(t for t, _ in inside), hi]
        return ts, [self.rate_at(t) for t in ts]


def peak_of_sum(profiles: Iterable[RateProfile]) -> float:
    """The highest rate of several profiles added together (a sum of ramps peaks at a knot)."""
    listed: Sequence[RateProfile] = list(profiles)
    times = sorted({t for p in listed for t, _ in p.knots})
    return max((sum(p.rate_at(t) for p in listed) for t in times), default=0.0)
