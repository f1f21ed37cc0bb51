import pytest

from harness.core.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("180s", 180.0),
        ("3m", 180.0),
        ("500ms", 0.5),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("2.5s", 2.5),
        (" 10s ", 10.0),
        ("42", 42.0),
        (7, 7.0),
        (0.25, 0.25),
    ],
)
def test_parses_the_forms_people_write(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "s", "10 sec", "3x", "1m30", "ms500", "-5s", True, None, [1]])
def test_rejects_what_is_not_a_duration(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


def test_negative_number_is_rejected() -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_duration(-1)


def test_format_is_compact() -> None:
    assert format_duration(0.85) == "850ms"
    assert format_duration(7.21) == "7.21s"
    assert format_duration(180) == "3m"


@pytest.mark.parametrize(
    "bad",
    [float("inf"), float("nan"), "9" * 400 + "h", "9" * 400, 10**5000, -(10**5000)],
    ids=["inf", "nan", "400-digit-hours", "400-digits", "huge-int", "huge-negative-int"],
)
def test_a_duration_is_finite(bad: object) -> None:
    # .inf in warmup/drain/timeouts gave an OverflowError traceback at the run's start.
    with pytest.raises(ValueError, match="a duration must be finite") as info:
        parse_duration(bad)
    assert len(str(info.value)) < 100
