"""The time line: phases in order, no overlaps, unique names."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.core.timeline import ordered_phases


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
