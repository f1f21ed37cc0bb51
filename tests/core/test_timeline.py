"""The time line: phases in order, no overlaps, unique names; phase lookup and the windows
in which a phase's faults are on (gateway and charts share them)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.core.timeline import blip_on, fault_windows, ordered_phases, phase_at


@dataclass
class Window:
    name: str
    start: float
    duration: float

    @property
    def end(self) -> float:
        return self.start + self.duration


def test_ordered_by_start() -> None:
    a, b = Window("a", 10, 5), Window("b", 0, 10)
    assert ordered_phases([a, b]) == [b, a]


def test_overlap_is_an_error() -> None:
    with pytest.raises(ValueError, match="phase 'b' starts before phase 'a' ends"):
        ordered_phases([Window("a", 0, 10), Window("b", 9, 5)])


def test_repeated_names_are_an_error() -> None:
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        ordered_phases([Window("a", 0, 1), Window("a", 1, 1), Window("c", 2, 1)])


def test_phase_at_is_half_open() -> None:
    a, b = Window("a", 0, 10), Window("b", 10, 5)
    assert phase_at([a, b], -0.1) is None
    assert phase_at([a, b], 0) is a and phase_at([a, b], 9.999) is a
    assert phase_at([a, b], 10) is b
    assert phase_at([a, b], 15) is None
    assert phase_at([], 1) is None


def test_blip_on_for_the_first_for_of_every_every() -> None:
    assert all(blip_on(t, 10, 30, 2) for t in (10, 11.999, 40, 41.5))
    assert not any(blip_on(t, 10, 30, 2) for t in (12, 25, 39.999, 42))


def test_fault_windows() -> None:
    assert fault_windows(10, 60) == [(10, 70)]
    assert fault_windows(10, 60, 30, 2) == [(10, 12), (40, 42)]
    # the last blip is cut at the window's end
    assert fault_windows(0, 5, 2, 1.5) == [(0, 1.5), (2, 3.5), (4, 5)]
    assert fault_windows(0, 100, 1, 0.5, max_windows=50) == [(0, 100)]
    assert len(fault_windows(0, 50, 1, 0.5, max_windows=50)) == 50
    blips = fault_windows(0.1, 0.3, 0.1, 0.05)  # 0.3 / 0.1 is 2.9999999999999996: three
    assert [a for a, _ in blips] == pytest.approx([0.1, 0.2, 0.3])
    assert [z for _, z in blips] == pytest.approx([0.15, 0.25, 0.35])
