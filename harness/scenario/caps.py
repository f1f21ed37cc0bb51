"""Resource caps on the target for a phase (``pg.phases[].target``): CPU and memory.

A phase's ``target: {cpus: 0.5, memory: 256MiB}`` takes capacity away from every
build's service for the phase and gives it back at its end: the trigger of an
overload that may outlive it (issue 21). What applies it is ``harness.run.caps``
(a cgroup of the build's own, or the Docker Engine's live update).

Sizes are bytes or a number with a unit: ``KiB``/``MiB``/``GiB`` (or ``Ki``/``Mi``/``Gi``)
are powers of 1024, ``KB``/``MB``/``GB`` powers of 1000. A bare ``M`` is refused:
Docker reads ``256m`` as MiB and Kubernetes ``256M`` as 10^6 bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from harness.core.yamlmodel import StrictModel

MIN_CPUS = 0.01
"""The smallest CPU cap: 1 ms of CPU every 100 ms period, the kernel's least CFS quota."""
MAX_CPUS = 1024.0
"""The largest (a quota of 1024 periods): more than any machine the harness runs on."""
MIN_MEMORY_BYTES = 16 * 1024**2
"""The smallest memory cap, 16 MiB: a Python interpreter with the shop's libraries holds
about 25 MiB and a JVM far more, so less only kills the target at once (no overload to
watch); Docker's own floor is 6 MiB."""
MAX_MEMORY_BYTES = 2**50
"""The largest memory cap (1 PiB): a bound for the number, not a machine."""

_UNITS = {
    "": 1,
    "b": 1,
    "kib": 1024,
    "ki": 1024,
    "mib": 1024**2,
    "mi": 1024**2,
    "gib": 1024**3,
    "gi": 1024**3,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)")
SIZE_PATTERN = r"^\s*\d+(\.\d+)?\s*([KMG]i?B|[KMG]i|B)?\s*$"
"""The spellings ``parse_bytes`` reads, as a JSON Schema ``pattern`` (for editors)."""


def parse_bytes(value: object) -> int:
    """Bytes for a size such as ``256MiB``, ``1GiB``, ``512MB`` or a plain number of bytes."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 256MiB or 1GiB, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a size such as 256MiB or 1GiB, got {value!r}")
    match = _SIZE.fullmatch(value.strip())
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        hint = ""
        if match is not None and unit in ("k", "m", "g"):
            hint = (
                f": {unit.upper()} alone is ambiguous (Docker reads 256m as MiB, Kubernetes "
                "256M as 10^6 bytes); write MiB (1024^2) or MB (1000^2)"
            )
        raise ValueError(f"expected a size such as 256MiB, 1GiB or 512MB, got {value!r}{hint}")
    return int(float(match.group(1)) * _UNITS[unit])


ByteSize = Annotated[
    int,
    BeforeValidator(parse_bytes),
    WithJsonSchema({"anyOf": [{"type": "integer"}, {"type": "string", "pattern": SIZE_PATTERN}]}),
]


def format_bytes(n: int) -> str:
    """A size as the scenario would write it: ``256MiB``, ``1.5GiB``, ``1000B``."""
    for unit, size in (("PiB", 1024**5), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n}B"


_RANGES: dict[str, tuple[float, float, Callable[[float], str], str]] = {
    "cpus": (
        MIN_CPUS,
        MAX_CPUS,
        lambda n: f"{n:g}",
        "1 ms of CPU every 100 ms, the kernel's smallest quota; in cores",
    ),
    "memory": (
        MIN_MEMORY_BYTES,
        MAX_MEMORY_BYTES,
        lambda n: format_bytes(int(n)),
        "less kills the target at once",
    ),
}
"""Each cap's bounds, how its values print, and why the floor."""


class TargetCap(StrictModel):
    """A phase's caps on every build's target: CPU (cores) and memory, either or both."""

    cpus: float | None = Field(
        None,
        description="CPU the target may use, in cores (0.5: half of one core), as "
        "docker run --cpus; at least 0.01",
    )
    memory: ByteSize | None = Field(
        None, description="memory the target may hold (256MiB), swap included; at least 16MiB"
    )

    @field_validator("cpus", "memory")
    @classmethod
    def _in_range(cls, value: float | None, info: ValidationInfo) -> float | None:
        low, high, show, why = _RANGES[info.field_name or ""]
        if value is not None and not low <= value <= high:
            raise ValueError(
                f"{info.field_name} must be from {show(low)} ({why}) to {show(high)}, "
                f"got {show(value)}"
            )
        return value

    @model_validator(mode="after")
    def _something(self) -> TargetCap:
        if self.cpus is None and self.memory is None:
            raise ValueError("a target cap needs cpus, memory or both (e.g. {cpus: 0.5})")
        return self

    @property
    def label(self) -> str:
        """The cap in a few words: ``cpus 0.5, memory 256MiB``."""
        parts = [] if self.cpus is None else [f"cpus {self.cpus:g}"]
        if self.memory is not None:
            parts.append(f"memory {format_bytes(self.memory)}")
        return ", ".join(parts)
