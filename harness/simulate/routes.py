"""Whether a model has a route for every request of the scenario's traffic.

A model answers the routes of the service it stands for (``Service.routes``: the shop's,
the Spring shop's, the Node gateway's) and 404 (or 405) to anything else. A build whose
traffic the real service answers on other routes is not that service, or not the
traffic the model was made for: its simulated figures would be a 404 storm reported as
the build's ("the gateway received no call while 2400 requests to orders were sent"), so
the build is refused instead, naming the request and the routes the model has.
"""

from __future__ import annotations

from harness.load.plan import LoadPlan
from harness.load.requests import Requests
from harness.simulate.services import NotModelled, Service

ROUTES_CHECKED = 200
"""Requests of each endpoint whose method and path are checked against a model's routes:
its first ones, drawn as the simulator draws them (a path's parameters included)."""


def sent(plan: LoadPlan) -> dict[str, list[tuple[str, str]]]:
    """Each endpoint's first ``ROUTES_CHECKED`` requests as ``simulate_build`` sends them
    (``Requests.target``: a mix's requests each with its own method and path), and each
    request of a mix however rare, its path parameters at their lows: ``(method, path)``,
    each once."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name, ep in plan.endpoints.items():
        requests = Requests(plan.seed, name, ep)
        count = min(ROUTES_CHECKED, plan.planned_count(name))
        lows = {param: low for param, (low, _) in ep.params.items()}
        sent = [requests.target(i) for i in range(count)]
        sent += [(k.method, _filled(k.path, lows)) for k in requests.kinds]
        found[name] = list(dict.fromkeys(sent))
    return found


def _filled(path: str, values: dict[str, int]) -> str:
    """``path`` with its parameters filled as ``Requests.target`` fills them."""
    try:
        return path.format(**values) if values else path
    except (KeyError, IndexError, ValueError):  # a path the load generator fills otherwise
        return path


def unrouted(service: Service, requests: dict[str, list[tuple[str, str]]]) -> NotModelled | None:
    """The refusal of ``service``'s build when an endpoint sends a request its model has no
    route for (``requests``: ``sent``'s), else None."""
    missing = []
    for name, said in requests.items():
        wrong = [(m, p) for m, p in said if not any(r.serves(m, p) for r in service.routes)]
        if wrong:
            missing.append(f"traffic.{name} sends {wrong[0][0]} {wrong[0][1]}")
    if not missing:
        return None
    routes = ", ".join(r.shown for r in service.routes)
    return NotModelled(
        service.name,
        f"{'; '.join(missing)}: not a route of {service.model}, the service it is modelled "
        f"as (its routes: {routes}); the model would answer 404 where the service answers",
    )
