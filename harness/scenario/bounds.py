"""What a scenario may ask of one machine: every bound of the schema, and the string checks.

A scenario is input from anyone, so each number is finite (``StrictModel``
refuses ``.inf`` and ``.nan``) and bounded here by what a run on one machine
can do; strings that become folder names or URLs are checked once, here.
Each message says the bound. docs/scenario.md lists them all ("Bounds").
"""

from __future__ import annotations

import json
import re
from typing import Annotated, TypeVar

from pydantic import AfterValidator

# ---------------------------------------------------------------- time (seconds)

MAX_WARMUP_S = 3600.0
"""``warmup`` at most 1 h."""
MAX_DURATION_S = 24 * 3600.0
"""``duration`` at most 24 h; also bounds every phase, repeat and breaker wait."""
MAX_TIMEOUT_S = 600.0
"""Client timeouts, the target's connect/read timeouts, ``drain`` and retry waits: 10 min."""

# ---------------------------------------------------------------- load

MAX_ENDPOINT_RATE = 10_000.0
"""Requests per second of one endpoint."""
MAX_TOTAL_RATE = 100_000.0
"""Requests per second of all endpoints together."""
MAX_PLANNED_REQUESTS = 50_000_000
"""Requests one build sends (rates x (warmup + duration)); about 4 GB of samples."""
MIN_EXPECTED_REQUESTS = 1
"""Requests an endpoint is expected to send in the measured window (its mean rate x duration):
below one it sends nothing to measure (``rate: 0.000000001`` ran to an empty table)."""
MIN_SCRAPES = 3
"""The measured window lasts at least this many ``metrics.interval``: a counter's growth needs
two scrapes, a gauge's statistics more than one reading."""
MAX_STAGES = 1000
"""Stages of one endpoint's ramping rate."""
MAX_ENDPOINTS = 100
MAX_BUILDS = 20
MAX_GATES = 1000
MAX_PHASES = 10_000
MAX_FAULTS_PER_PHASE = 20
MAX_MIX_COMPONENTS = 100
MAX_WEIGHT = 1e6
"""A weight of a latency ``mix`` or a status mix (their sum must stay finite)."""
MAX_SIGMA = 10.0
"""``sigma`` of a lognormal delay (larger overflows ``exp``)."""
MIN_REPEAT_EVERY_S = 0.01
"""A repeating fault switches on at most 100 times a second."""
MAX_IN_FLIGHT = 100_000
"""An endpoint's ``max-in-flight`` (the load generator holds that many requests open)."""
MAX_CLIENT_ATTEMPTS = 10
"""A client retry's ``max-attempts`` (the first included): the load generator may send each
planned request up to this many times."""
MAX_REPLICAS = 16
"""Shop processes of one build (``replicas``), each with its own pool, behind one nginx."""
MAX_WINDOW = 100_000
"""A breaker's ``sliding-window-size``, ``minimum-number-of-calls`` and half-open calls."""
MAX_SEED = 2**63
"""``seed`` is in ``[0, 2**63)``."""
MAX_PARAM = 2**63
"""A path parameter's range is within ``(-2**63, 2**63)``."""

# ---------------------------------------------------------------- strings

MAX_NAME_CHARS = 100
"""Names of the scenario, builds, endpoints and phases (folder and file names)."""
MAX_PATH_CHARS = 2000
"""An endpoint's path (URLs beyond about 2,000 characters are refused by many servers)."""
MAX_TEXT_CHARS = 10_000
"""Free text: ``description``."""
MAX_GATE_NAME_CHARS = 200

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_KEY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def check_name(name: str, *, dots: bool = True) -> str:
    """A name that is safe as a folder name: a slug of at most ``MAX_NAME_CHARS``.

    Letters, digits, ``_``, ``-`` (and ``.`` where ``dots``), not starting with
    ``.`` or ``-``, no ``..``: so ``.``, ``..``, ``../x``, ``a/b`` and ``-rf``
    are all refused. Builds and endpoints take no dots: a gate separates a
    figure's parts with them.
    """
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"a name has at most {MAX_NAME_CHARS} characters, this one {len(name):,}")
    allowed = "letters, digits, '_', '-'" + (" and '.'" if dots else "")
    pattern = _NAME if dots else _KEY_NAME
    if not pattern.fullmatch(name) or ".." in name:
        shown = name if len(name) <= 40 else name[:37] + "..."
        raise ValueError(
            f"name {shown!r} must be 1-{MAX_NAME_CHARS} characters of {allowed}, "
            f"starting with a letter, digit or '_'" + (" (no '..')" if dots else "")
        )
    return name


SafeName = Annotated[str, AfterValidator(check_name)]
"""A scenario's or phase's name (dots allowed)."""


def check_printable(text: str, what: str) -> str:
    """Refuse control characters (they break terminals, logs and XML); tabs and newlines pass."""
    for i, c in enumerate(text):
        if not c.isprintable() and c not in "\t\n":
            raise ValueError(f"{what} contains the control character {c!r} (at character {i + 1})")
    return text


def check_path(path: str, params: dict[str, tuple[int, int]]) -> None:
    """An endpoint path that becomes a URL as it is: ``/``, no spaces or control characters,
    placeholders ``{name}`` only, each given a range in ``params``."""
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"path has {len(path):,} characters; at most {MAX_PATH_CHARS}")
    if not path.startswith("/"):
        raise ValueError(f"path {path[:40]!r} must start with '/'")
    for i, c in enumerate(path):
        if c.isspace() or not c.isprintable():
            raise ValueError(
                f"path contains {c!r} at character {i + 1}; spaces and control characters "
                "are not allowed in a URL (write %20 for a space)"
            )
    stray = _PLACEHOLDER.sub("", path)
    if "{}" in path:
        raise ValueError(
            "path has an empty placeholder '{}'; name it, e.g. {id}, and give "
            "params: {id: [1, 1000]}"
        )
    if "{" in stray or "}" in stray:
        raise ValueError(
            "path has a '{' or '}' that is not a placeholder; a placeholder is {name} "
            "(letters, digits, '_', not starting with a digit)"
        )
    missing = sorted(set(_PLACEHOLDER.findall(path)) - set(params))
    if missing:
        raise ValueError(f"path {path[:60]!r} uses {missing} but params gives no range for it")
    for name, (low, high) in params.items():
        if not -MAX_PARAM < low <= high < MAX_PARAM:
            if low > high:
                raise ValueError(f"params.{name}: low {low} is greater than high {high}")
            raise ValueError(f"params.{name}: the range must lie within (-2**63, 2**63)")


J = TypeVar("J")


def check_json(value: J, what: str) -> J:
    """A value sent as JSON must be plain JSON: mappings, lists, text, finite numbers, bools."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        reason = "a number is .inf or .nan" if "out of range float" in str(exc) else str(exc)
        raise ValueError(
            f"{what} must be plain JSON (mappings, lists, text, finite numbers, "
            f"true/false/null): {reason}"
        ) from None
    return value
