"""Durations as people write them in scenario files: ``180s``, ``3m``, ``500ms``, ``1m30s``.

Inside the harness every time is seconds as a float; this module is the only
place that reads the human spelling.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, GetJsonSchemaHandler
from pydantic_core import CoreSchema

_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def parse_duration(value: object) -> float:
    """Return seconds for a duration such as ``"180s"``, ``"3m"``, ``"1m30s"`` or a plain number.

    Plain numbers are seconds. Raises ``ValueError`` with the accepted forms
    when the text is not a duration, and for negative or non-finite values
    (``.inf``, ``.nan``, or more digits than a float holds); upper bounds are
    the schema's, per field.
    """
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 500ms, 30s, 3m or 1h, got a boolean")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond any float
            seconds = math.inf
    elif isinstance(value, str):
        text = value.strip().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ValueError(
                    f"expected a duration such as 500ms, 30s, 3m, 1m30s or 1h, got {_short(value)}"
                )
            seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    else:
        raise ValueError(f"expected a duration such as 500ms, 30s or 3m, got {_short(value)}")
    if not math.isfinite(seconds):
        raise ValueError(f"a duration must be finite, got {_short(value)}")
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative, got {_short(value)}")
    return seconds


def _short(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 200:
        return "a huge integer"  # repr would raise for more than 4,300 digits
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def format_duration(seconds: float) -> str:
    """Render seconds compactly for tables (``850ms``, ``7.21s``, ``3m``)."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60 or seconds % 60:
        return f"{seconds:.3g}s"
    return f"{seconds / 60:g}m"


DURATION_PATTERN = r"^\s*(\d+(\.\d+)?|(\d+(\.\d+)? *(ms|s|m|h) *)+)\s*$"
"""The spellings ``parse_duration`` reads, as a JSON Schema ``pattern`` (for editors)."""


class _SpelledOrSeconds:
    """JSON Schema of a duration: seconds (the field's bounds kept) or text such as ``30s``."""

    @staticmethod
    def __get_pydantic_json_schema__(
        schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        seconds = handler(schema)
        if "minimum" not in seconds and "exclusiveMinimum" not in seconds:
            seconds["minimum"] = 0
        return {"anyOf": [seconds, {"type": "string", "pattern": DURATION_PATTERN}]}


Duration = Annotated[float, BeforeValidator(parse_duration), _SpelledOrSeconds()]
"""A pydantic field type: seconds, accepting ``180s``, ``3m``, ``500ms`` or a number."""
