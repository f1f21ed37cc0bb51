"""A dependency's HTTP API as data: stub routes and WireMock mappings (docs/stubs.md).

Above ``harness.core`` and below ``harness.scenario``: it imports only the core and
third-party libraries (pybars3 for WireMock's Handlebars subset, jsonpath-ng).
"""

from harness.stubs.model import (
    Matched,
    Route,
    RouteProblem,
    StubAnswer,
    StubRequest,
    StubRoute,
    StubRoutesError,
    Stubs,
    unmatched_answer,
)
from harness.stubs.wiremock import load_mappings

__all__ = [
    "Matched",
    "Route",
    "RouteProblem",
    "StubAnswer",
    "StubRequest",
    "StubRoute",
    "StubRoutesError",
    "Stubs",
    "load_mappings",
    "unmatched_answer",
]
