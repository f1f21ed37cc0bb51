"""Live overrides: a fault given to ``PUT /__admin/fault`` or the ``X-Harness-Fault`` header.

Validated by the scenario's own fault models, so an override means exactly
what the same fault means in ``pg.phases``; errors name the field and speak
as ``harness validate`` does (``harness.core.yamlmodel.describe_error``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from harness.core.yamlkeys import keys_at
from harness.core.yamlmodel import describe_error
from harness.scenario.faults import FAULT_TYPES, Fault, FaultOverride

FAULT_HEADER = "X-Harness-Fault"
"""A request header that forces a fault (JSON) on that one call."""


class OverrideError(ValueError):
    """A fault given to the admin API or the override header is not valid."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(text: str | bytes) -> Any:
    """Parse strict JSON sent by a client; anything malformed is a ``ValueError``.

    That includes bytes that are not UTF-8, ``NaN``/``Infinity`` and numbers
    too large for a float (which would be echoed back as invalid JSON), and
    nesting too deep for the parser (``RecursionError``): every route answers
    400, never 500.
    """
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_not_json)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _error_text(error: ErrorDetails, single: bool) -> str:
    """``field: message`` for one error, the field as the caller wrote it (no union tags)."""
    loc = list(error["loc"])
    if single and loc[:2] == ["faults", 0]:
        loc = loc[2:]
    # Drop the union tag pydantic puts after a list index (faults.0.error.status).
    shown = [
        str(p)
        for i, p in enumerate(loc)
        if not (p in FAULT_TYPES and (i == 0 or isinstance(loc[i - 1], int)))
    ]
    unknown_key = error["type"] == "extra_forbidden"
    known = keys_at(FaultOverride, error["loc"][:-1]) if unknown_key else None
    msg = describe_error(error, known=known)
    return f"{'.'.join(shown)}: {msg}" if shown else msg


def parse_override(data: Any, *, allow_refuse: bool, allow_brownout: bool = False) -> list[Fault]:
    """Validate an override: a fault object, or ``{"faults": [...]}``; JSON text is parsed first.

    ``allow_brownout``: the gateway has ``pg.capacity`` and this is not one call's header.
    """
    if isinstance(data, str | bytes):
        try:
            data = load_json(data)
        except ValueError as exc:
            raise OverrideError(f"not JSON ({exc})") from None
    single = not (isinstance(data, dict) and "faults" in data and "type" not in data)
    try:
        # by_name=False: one spelling per key, the scenario's (retry-after, never retry_after)
        override = FaultOverride.model_validate(
            {"faults": [data]} if single else data, by_alias=True, by_name=False
        )
    except ValidationError as exc:
        raise OverrideError("; ".join(_error_text(e, single) for e in exc.errors())) from None
    except RecursionError:
        raise OverrideError("nested too deeply") from None
    if not allow_refuse and any(f.type == "refuse" for f in override.faults):
        raise OverrideError(
            "refuse takes the listener down: force it with PUT /__admin/fault on a gateway "
            "with a control listener (--control-port/--control-fd), not on one call or "
            "through the listener it closes"
        )
    if not allow_brownout and any(f.type == "brownout" for f in override.faults):
        raise OverrideError(
            "brownout lowers pg.capacity for every call: force it with PUT /__admin/fault on "
            "a gateway with pg.capacity, not on one call or on a gateway without capacity"
        )
    return override.faults


def fault_json(fault: Fault) -> dict[str, Any]:
    """A fault as the scenario would write it (kebab-case keys, no unset options)."""
    return {"type": fault.type, **fault.model_dump(mode="json", by_alias=True, exclude_none=True)}
