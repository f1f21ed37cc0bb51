"""A call's fate: the same number for the same inputs, a different one if any input differs."""

from harness.core.fate import fate


def test_fate_is_repeatable_and_depends_on_every_input() -> None:
    assert fate(1, "k", 1) == fate(1, "k", 1)
    variants = {
        fate(1, "k", 1),
        fate(2, "k", 1),
        fate(1, "j", 1),
        fate(1, "k", 2),
        fate(1, "k", 1, "x"),
    }
    assert len(variants) == 5
    assert all(0 <= fate(3, str(i), 1) < 1 for i in range(100))


def test_fate_values_do_not_drift() -> None:
    """Runs recorded before a refactor must meet the same failures: pin two values."""
    assert fate(42, "pay-1", 1) == 0.6705789662074981
    assert fate(0, "1", 1, "rng") == 0.7185197902908602
