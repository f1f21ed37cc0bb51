"""Setting checks the shop's configs share, each naming the field it rejects."""

from __future__ import annotations

ExceptionTypes = tuple[type[BaseException], ...]


def require_int_at_least(field_name: str, value: object, minimum: int) -> None:
    """Reject anything but an int >= ``minimum`` (``True`` is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field_name} must be an integer >= {minimum}, got {value!r}")


def require_seconds(field_name: str, value: float, *, positive: bool = False) -> None:
    """Reject a negative duration, or zero too when ``positive`` (NaN either way)."""
    if not (value > 0.0 if positive else value >= 0.0):
        bound = ">" if positive else ">="
        raise ValueError(f"{field_name} must be {bound} 0 seconds, got {value!r}")


def exception_types(field_name: str, value: object) -> ExceptionTypes:
    """``value`` (a list or tuple of exception classes) as a tuple, so it can be matched
    with ``isinstance`` and the frozen config stays hashable."""
    if not isinstance(value, list | tuple):
        raise ValueError(f"{field_name} must be a tuple of exception classes, got {value!r}")
    for item in value:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise ValueError(f"{field_name} must list exception classes, got {item!r}")
    return tuple(value)
