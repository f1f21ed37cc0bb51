"""Toxics and schedules of the TCP fault proxy: what damage to do, and when.

Toxiproxy's toxics (https://github.com/Shopify/toxiproxy#toxics) as typed
models: latency, bandwidth, slow-close, timeout, reset-peer, slicer,
limit-data, each with a ``toxicity`` (share of connections hit) and a
``stream``: ``upstream`` is client -> dependency, ``downstream`` (the default)
dependency -> client. A schedule turns sets of toxics on and off by phase,
like a scenario's ``pg.phases``. Every key and what a client sees: docs/proxy.md.

The models live here, in the scenario's layer, because a scenario declares a
TCP dependency's phases with them (``dependencies.<name>.tcp``: a phase's
``toxics``); the proxy (``harness.proxy``, a layer above) imports them, and
reads its own ``--schedule`` file with ``load_schedule`` as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from harness.core.durations import Duration
from harness.core.errors import InputError, ScenarioError
from harness.core.timeline import ordered_phases, phase_at
from harness.core.yamlkeys import keys_at
from harness.core.yamlmodel import StrictModel as _Model
from harness.core.yamlmodel import describe_error, display_name, read_text_file, validate_yaml

Direction = Literal["upstream", "downstream"]
Stream = Literal["upstream", "downstream", "both"]

HOLD_LIMIT_S = 600.0
"""Every wait is bounded: a ``timeout: 0`` blackhole closes after this, delays are capped by it."""


class ProxyConfigError(InputError, ValueError):
    """A toxic the proxy refuses (addresses: ``harness.core.net.AddressError``); exit 2."""


# ---------------------------------------------------------------- toxics


class _Toxic(_Model):
    """What every toxic has: the chance it hits a connection and the direction it damages."""

    toxicity: float = Field(1.0, ge=0, le=1, description="probability per connection")
    stream: Stream = "downstream"

    def directions(self) -> tuple[Direction, ...]:
        return ("upstream", "downstream") if self.stream == "both" else (self.stream,)


class LatencyToxic(_Toxic):
    """Each chunk leaves ``latency`` +/- ``jitter`` after it arrived (pipelined, like Toxiproxy)."""

    type: Literal["latency"]
    latency: Duration = Field(ge=0, le=HOLD_LIMIT_S)
    jitter: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)


class BandwidthToxic(_Toxic):
    """Throughput capped at ``rate`` KB/s (1 KB = 1000 bytes, as Toxiproxy), 100 ms slices."""

    type: Literal["bandwidth"]
    rate: float = Field(ge=1, description="KB/s")


class SlowCloseToxic(_Toxic):
    """The close (EOF) of this stream is passed on ``delay`` late."""

    type: Literal["slow-close"]
    delay: Duration = Field(ge=0, le=HOLD_LIMIT_S)


class TimeoutToxic(_Toxic):
    """No data passes; the connection is closed ``timeout`` after the toxic came into force.

    ``timeout: 0`` is a blackhole that holds the connection open, bounded by
    ``HOLD_LIMIT_S``. Held data flows again if the toxic goes before the close.
    """

    type: Literal["timeout"]
    timeout: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)


class ResetPeerToxic(_Toxic):
    """At the first chunk of this stream: hold it, and RST both sockets ``timeout`` later."""

    type: Literal["reset-peer"]
    timeout: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)


class SlicerToxic(_Toxic):
    """Data cut into ``average-size`` +/- ``size-variation`` byte writes, ``delay`` apart."""

    type: Literal["slicer"]
    average_size: int = Field(ge=1, le=1 << 20)
    size_variation: int = Field(0, ge=0)
    delay: Duration = Field(0.0, ge=0, le=HOLD_LIMIT_S)

    @model_validator(mode="after")
    def _variation_below_average(self) -> SlicerToxic:
        if self.size_variation >= self.average_size:
            raise ValueError("size-variation must be smaller than average-size")
        return self


class LimitDataToxic(_Toxic):
    """The connection is closed once ``bytes`` bytes passed on this stream."""

    type: Literal["limit-data"]
    bytes: int = Field(ge=0)


Toxic = Annotated[
    LatencyToxic
    | BandwidthToxic
    | SlowCloseToxic
    | TimeoutToxic
    | ResetPeerToxic
    | SlicerToxic
    | LimitDataToxic,
    Field(discriminator="type"),
]


def one_per_type_and_stream(toxics: list[Toxic]) -> list[Toxic]:
    """Refuse two toxics of one type on one stream (Toxiproxy chains are not modelled)."""
    seen: set[tuple[str, str]] = set()
    for toxic in toxics:
        for direction in toxic.directions():
            if (toxic.type, direction) in seen:
                raise ValueError(f"two {toxic.type} toxics on the {direction} stream")
            seen.add((toxic.type, direction))
    return toxics


class ToxicSet(_Model):
    """Toxics in force together: at most one of each type per stream (no Toxiproxy chains)."""

    toxics: list[Toxic] = Field(default_factory=list)

    @field_validator("toxics")
    @classmethod
    def _one_per_type_and_stream(cls, toxics: list[Toxic]) -> list[Toxic]:
        return one_per_type_and_stream(toxics)


def check_toxics(toxics: Sequence[Toxic | Mapping[str, Any]]) -> list[Toxic]:
    """Toxics given to ``Proxy.set_toxics``, checked as a schedule's are: kebab-case keys only
    (``average-size``; ``average_size`` is refused with the right spelling)."""
    try:
        return ToxicSet.model_validate(
            {"toxics": list(toxics)}, by_alias=True, by_name=False
        ).toxics
    except ValidationError as exc:
        said = []
        for error in exc.errors():
            loc = error["loc"]
            known = keys_at(ToxicSet, loc[:-1]) if error["type"] == "extra_forbidden" else None
            where = ".".join(str(p) for p in loc)
            said.append(f"{where}: {describe_error(error, known=known, quote_input=True)}")
        raise ProxyConfigError(f"invalid toxics: {'; '.join(said)}") from None


class ProxyPhase(ToxicSet):
    """A named window of the proxy's time line with its toxics in force."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    start: Duration = Field(ge=0)
    duration: Duration = Field(gt=0)

    @property
    def end(self) -> float:
        return self.start + self.duration


class Schedule(_Model):
    """Phases counted from the proxy's start (or ``--t0``); outside every phase, no toxics."""

    phases: list[ProxyPhase] = Field(default_factory=list)

    @field_validator("phases")
    @classmethod
    def _no_overlap(cls, phases: list[ProxyPhase]) -> list[ProxyPhase]:
        return ordered_phases(phases)

    def phase_at(self, t_s: float) -> ProxyPhase | None:
        return phase_at(self.phases, t_s)


def load_schedule_text(text: str, file: str = "<schedule>") -> Schedule:
    """Validate schedule YAML; raise ``ScenarioError`` listing every problem (file:line:col)."""
    done = validate_yaml(
        Schedule, text, file, expected="a mapping with a phases: list", reference="docs/proxy.md"
    )
    if done.problems:
        raise ScenarioError(done.problems)
    return done.model


def load_schedule(path: str | Path) -> Schedule:
    """Read and validate a schedule file (a FIFO, a device or a huge file is refused unread)."""
    return load_schedule_text(read_text_file(path, what="schedule"), display_name(path))
