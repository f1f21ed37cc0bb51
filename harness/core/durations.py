"""Durations as people write them in scenario files: ``180s``, ``3m``, ``500ms``, ``1m30s``.

Inside the harness every time is seconds as a float; this module is the only
place that reads the human spelling.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: object) -> float:
    """Return seconds for a duration such as ``"180s"``, ``"3m"``, ``"1m30s"`` or a plain number.

    Plain numbers are seconds. Raises ``ValueError`` with the accepted forms
    when the text is not a duration.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 30s, 3m or 1h, got a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ValueError(
                    f"expected a duration such as 500ms, 30s, 3m, 1m30s or 1h, got {value!r}"
                )
            seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    else:
        raise ValueError(f"expected a duration such as 500ms, 30s or 3m, got {value!r}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds compactly for tables (``850ms``, ``7.21s``, ``3m``)."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60 or seconds % 60:
        return f"{seconds:.3g}s"
    return f"{seconds / 60:g}m"


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""A pydantic field type: seconds, accepting ``180s``, ``3m``, ``500ms`` or a number."""
