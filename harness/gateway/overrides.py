"""Live overrides: a fault given to ``PUT /__admin/fault`` or the ``X-Harness-Fault`` header.

Validated by the scenario's own fault models, so an override means exactly
what the same fault means in ``pg.phases``; errors name the field and speak
as ``harness validate`` does (``harness.core.yamlmodel.describe_error``).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from harness.core.yamlmodel import describe_error
from harness.scenario.faults import FAULT_TYPES, Fault, FaultOverride

FAULT_HEADER = "X-Harness-Fault"
"""A request header that forces a fault (JSON) on that one call."""


class OverrideError(ValueError):
    """A fault given to the admin API or the override header is not valid."""


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
    msg = describe_error(error)
    return f"{'.'.join(shown)}: {msg}" if shown else msg


def parse_override(data: Any, *, allow_refuse: bool) -> list[Fault]:
    """Validate an override: a fault object, or ``{"faults": [...]}``; JSON text is parsed first."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise OverrideError(f"not JSON ({exc})") from None
    single = not (isinstance(data, dict) and "faults" in data and "type" not in data)
    try:
        override = FaultOverride.model_validate({"faults": [data]} if single else data)
    except ValidationError as exc:
        raise OverrideError("; ".join(_error_text(e, single) for e in exc.errors())) from None
    if not allow_refuse and any(f.type == "refuse" for f in override.faults):
        raise OverrideError(
            "refuse takes the listener down: force it with PUT /__admin/fault on a gateway "
            "with a control listener (--control-port/--control-fd), not on one call or "
            "through the listener it closes"
        )
    return override.faults


def fault_json(fault: Fault) -> dict[str, Any]:
    """A fault as the scenario would write it (kebab-case keys, no unset options)."""
    return {"type": fault.type, **fault.model_dump(mode="json", by_alias=True, exclude_none=True)}
