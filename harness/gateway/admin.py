"""The gateway's control routes: ``/metrics``, ``/health`` and the admin API.

Served on the main listener and, if there is one, on the control listener,
which ``refuse`` never closes, so scrapes and steering go on during it.
The admin API answers loopback callers only:

- ``POST /__admin/start {"t0": ...}``: where the measured time line starts;
- ``GET /__admin/status``: t0, elapsed, phase, headline fault, override, listening;
- ``GET``/``PUT /__admin/fault``: the phase in force, or install an override for every call;
- ``POST /__admin/reset[?counters=1]``: remove the override (and the attempt counts).

Malformed input is answered 400; every answer is strict JSON (no ``NaN``).
"""

from __future__ import annotations

import functools
import json
import math
import time
from typing import Any

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from harness.core.net import is_loopback
from harness.gateway.decide import fault_on
from harness.gateway.overrides import OverrideError, fault_json, load_json, parse_override
from harness.gateway.server import Gateway

_dumps = functools.partial(json.dumps, allow_nan=False)


def _json(data: Any, status: int = 200) -> web.Response:
    """A JSON answer that is valid JSON: a NaN or infinity raises instead of being sent."""
    return web.json_response(data, status=status, dumps=_dumps)


def _loopback_only(request: web.Request) -> None:
    if not is_loopback(request.remote):
        raise web.HTTPForbidden(text="the admin API answers loopback callers only")


def _t0(data: Any) -> float:
    """``t0`` from a ``/__admin/start`` body: finite Unix seconds (a number); now if absent."""
    if not isinstance(data, dict) or "t0" not in data:
        return time.time()
    value = data["t0"]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"t0 must be a number of Unix seconds, not {type(value).__name__}")
    try:
        t0 = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"t0 must be a number of Unix seconds, not {value!r}") from None
    if not math.isfinite(t0):
        raise ValueError(f"t0 must be a finite number of Unix seconds, not {value!r}")
    return t0


class Admin:
    """The control routes of one gateway."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def routes(self, app: web.Application) -> web.Application:
        """Add ``/metrics``, ``/health`` and ``/__admin/*`` to ``app``."""
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/health", self.health)
        app.router.add_post("/__admin/start", self.start)
        app.router.add_get("/__admin/status", self.status)
        app.router.add_get("/__admin/fault", self.get_fault)
        app.router.add_put("/__admin/fault", self.put_fault)
        app.router.add_post("/__admin/reset", self.reset)
        return app

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.gateway.registry),
            headers={"Content-Type": CONTENT_TYPE_LATEST},
        )

    async def health(self, request: web.Request) -> web.Response:
        return _json({"status": "UP"})

    async def start(self, request: web.Request) -> web.Response:
        _loopback_only(request)
        g = self.gateway
        try:
            g.t0 = _t0(load_json(await request.read()))
        except ValueError as exc:
            return _json({"error": f'body must be JSON such as {{"t0": 1.7e9}} ({exc})'}, 400)
        g.changed.set()
        return _json({"t0": g.t0})

    async def status(self, request: web.Request) -> web.Response:
        _loopback_only(request)
        g = self.gateway
        phase = g.current_phase()
        return _json(
            {
                "t0": g.t0,
                "elapsed_s": g.elapsed(),
                "phase": phase.name if phase else None,
                "fault": phase.fault.type if phase else "healthy",
                "override": g.override is not None,
                "listening": g.listening,
            }
        )

    async def get_fault(self, request: web.Request) -> web.Response:
        _loopback_only(request)
        g = self.gateway
        t = g.elapsed()
        phase = g.current_phase()
        return _json(
            {
                "t0": g.t0,
                "elapsed_s": t,
                "phase": phase.name if phase else None,
                "phase_start_s": phase.start if phase else None,
                "phase_end_s": phase.end if phase else None,
                "faults": [fault_json(f) for f in phase.faults] if phase else [],
                "repeat": phase.repeat.model_dump(by_alias=True)
                if phase and phase.repeat
                else None,
                "fault_on": bool(phase and t is not None and fault_on(phase, t)),
                "override": [fault_json(f) for f in g.override] if g.override else None,
                "override_since": g.override_since,
                "in_force": "override" if g.override else ("phase" if phase else "healthy"),
                "listening": g.listening,
            }
        )

    async def put_fault(self, request: web.Request) -> web.Response:
        _loopback_only(request)
        g = self.gateway
        try:
            data = load_json(await request.read())
        except ValueError as exc:
            return _json({"error": f"body must be JSON ({exc})"}, 400)
        try:
            faults = parse_override(
                data, allow_refuse=g.has_control, allow_brownout=g.capacity is not None
            )
        except OverrideError as exc:
            return _json({"error": str(exc)}, 400)
        g.override = faults
        g.override_since = time.time()
        g.changed.set()
        return _json({"override": [fault_json(f) for f in faults]})

    async def reset(self, request: web.Request) -> web.Response:
        _loopback_only(request)
        g = self.gateway
        counters = request.query.get("counters", "").lower() in ("1", "true", "yes")
        g.override = None
        g.override_since = None
        if counters:
            g.attempts.clear()
        g.changed.set()
        return _json({"override": None, "counters_cleared": counters})
