"""Piecewise-linear rates: integral, mean, inverse (where the i-th uniform arrival lands)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.core.rates import RateProfile, peak_of_sum


def test_a_constant_rate_puts_the_ith_arrival_at_i_over_rate() -> None:
    p = RateProfile.constant(35.0, 0.0, 240.0)
    assert p.total == 35 * 240
    for i in (0, 1, 7, 8399):
        assert p.time_at(i) == i / 35.0  # bit for bit what the plan always did


def test_a_ramp_from_zero_solves_the_quadratic() -> None:
    p = RateProfile(((0.0, 0.0), (10.0, 100.0)))  # r(t) = 10 t, integral 5 t^2
    assert p.total == 500
    for i in (0, 1, 20, 499):
        assert p.time_at(i) == pytest.approx(math.sqrt(i / 5), abs=1e-12)
    assert p.rate_at(5.0) == 50.0
    assert p.mean(0.0, 10.0) == 50.0
    assert p.cumulative(4.0) == pytest.approx(80.0)


def test_spans_at_rate_zero_hold_no_arrival() -> None:
    # 5/s for 2 s, down to 0, nothing for 2.5 s, then a spike.
    p = RateProfile(((0, 5), (2, 5), (2.5, 0), (5, 0), (6, 10), (7, 0)))
    assert p.total == pytest.approx(21.25)
    at = p.time_at(11.25)  # exactly the integral before the gap: lands where the rate rises
    assert at == pytest.approx(5.0)
    assert all(not 2.5 < p.time_at(x) < 5.0 for x in range(22))


def test_outside_the_profile_the_rate_is_zero_and_the_inverse_refuses() -> None:
    p = RateProfile.constant(2.0, -5.0, 5.0)
    assert p.rate_at(-6) == 0 and p.rate_at(6) == 0
    assert p.integral(-100, 100) == 20
    with pytest.raises(ValueError, match="outside"):
        p.time_at(20)
    with pytest.raises(ValueError, match="increase"):
        RateProfile(((0, 1), (0, 2)))


def test_shift_and_peak_of_a_sum() -> None:
    a = RateProfile(((0, 0), (10, 100)))
    b = RateProfile(((0, 50), (10, 0)))
    assert peak_of_sum([a, b]) == 100  # at t=10: 100 + 0 (at t=0: 0 + 50)
    assert a.shifted(5).knots == ((5, 0), (15, 100))


@given(
    knots=st.lists(
        st.tuples(st.floats(0.01, 100), st.floats(0, 1000, allow_nan=False, allow_infinity=False)),
        min_size=1,
        max_size=8,
    )
)
def test_the_inverse_inverts_the_integral(knots: list[tuple[float, float]]) -> None:
    t, pts = 0.0, [(0.0, 1.0)]
    for dt, r in knots:
        t += dt
        pts.append((t, r))
    p = RateProfile(tuple(pts))
    for i in range(min(int(p.total), 200)):
        at = p.time_at(i)
        assert p.cumulative(at) == pytest.approx(i, abs=1e-6 * max(1.0, p.total))
        assert p.start <= at <= p.end
