"""A sweep's candidates: the base build, included builds, named points, a grid and a Latin
hypercube sample, each a build mapping named by its values."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.core.durations import parse_duration
from harness.scenario.bounds import MAX_NAME_CHARS
from harness.scenario.sweep import Sample, Sweep
from harness.tune.paths import MISSING, get_path, set_path

Origin = str
"""Where a candidate came from: ``current`` (the base build), ``include``, ``point``,
``grid``, ``sample``."""


@dataclass
class Candidate:
    """One build the tune runs: its name, the values of the sweep's axes, its mapping."""

    name: str
    origin: Origin
    values: dict[str, Any]
    """Axis path -> the value set (``None``: the build does not write it; its default)."""
    build: dict[str, Any]
    source: tuple[str | int, ...] = ()
    """The YAML path of what made it (an axis, a point), where its problems are said."""
    aliases: list[str] = field(default_factory=list)
    """Other candidates with the very same build (one of them is run)."""

    @property
    def current(self) -> bool:
        return self.origin == "current"


def axes_of(sweep: Sweep) -> list[str]:
    """Every path the sweep varies, in the order the file gives them."""
    paths = list(sweep.grid) + (list(sweep.sample.ranges) if sweep.sample else [])
    for point in sweep.points.values():
        paths += list(point)
    return list(dict.fromkeys(paths))


def abbreviation(path: str) -> str:
    """``failure-rate-threshold`` -> ``frt``, ``ERROR_THRESHOLD`` -> ``et``, ``resetTimeout``
    -> ``rt``, ``command.3`` -> ``command3``: the word naming an axis's values."""
    parts = path.split(".")
    last = parts[-1] if not parts[-1].isdigit() else parts[-2] + parts[-1]
    words = [w for w in re.split(r"[-_]|(?<=[a-z])(?=[A-Z])", last) if w]
    if len(words) == 1:
        return words[0].lower()[:8]
    return "".join(w[0] for w in words).lower()


def value_text(value: Any) -> str:
    """A value as it may stand in a build's name (``A-Z a-z 0-9 _ -``)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    elif isinstance(value, dict | list):
        text = "x"
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9_-]", "_", text.replace(".", "p"))


def candidate_name(values: dict[str, Any], abbrev: dict[str, str]) -> str:
    """``{failure-rate-threshold: 50, sliding-window-size: 100}`` -> ``frt50-sws100``."""
    return "-".join(f"{abbrev[p]}{value_text(v)}" for p, v in values.items())[:MAX_NAME_CHARS]


def latin_hypercube(sample: Sample, base: dict[str, Any]) -> list[dict[str, Any]]:
    """``sample.budget`` points: each axis cut in ``budget`` equal strata, each stratum used
    once, a seeded uniform draw inside it. Integer bounds give integers, durations
    durations (whole milliseconds), anything else floats (3 significant decimals)."""
    rng = np.random.default_rng(sample.seed)
    n = sample.budget
    columns: dict[str, list[Any]] = {}
    for path, (lo, hi) in sample.ranges.items():
        u = (rng.permutation(n) + rng.random(n)) / n
        if isinstance(lo, str) or isinstance(hi, str):
            a, b = parse_duration(lo), parse_duration(hi)
            columns[path] = [f"{round((a + x * (b - a)) * 1000)}ms" for x in u]
        elif isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool):
            columns[path] = [int(min(hi, lo + int(x * (hi - lo + 1)))) for x in u]
        else:
            # float(): numpy's float64 is no value the generated scenario's YAML can write
            columns[path] = [float(round(float(lo) + x * (float(hi) - float(lo)), 3)) for x in u]
    return [{p: columns[p][i] for p in columns} for i in range(n)]


def expand(
    sweep: Sweep, builds: dict[str, dict[str, Any]], abbrev: dict[str, str]
) -> list[Candidate]:
    """Every candidate of the sweep, the base first; one build per distinct mapping (a
    grid point equal to the base is the base, named in ``aliases``)."""
    base = builds[sweep.base]
    axes = axes_of(sweep)
    current = {p: _plain(get_path(base, p)) for p in axes}
    out = [Candidate(sweep.base, "current", current, base, ("sweep", "base"))]
    for name in sweep.include:
        mapping = builds.get(name, {})
        values = {p: _plain(get_path(mapping, p)) for p in axes}
        out.append(Candidate(name, "include", values, mapping, ("sweep", "include")))
    for name, point in sweep.points.items():
        out.append(_made(name, "point", base, point, ("sweep", "points", name)))
    if sweep.grid:
        paths = list(sweep.grid)
        for combo in itertools.product(*(sweep.grid[p] for p in paths)):
            values = dict(zip(paths, combo, strict=True))
            name = candidate_name(values, abbrev)
            out.append(_made(name, "grid", base, values, ("sweep", "grid")))
    if sweep.sample is not None:
        for values in latin_hypercube(sweep.sample, base):
            name = candidate_name(values, abbrev)
            out.append(_made(name, "sample", base, values, ("sweep", "sample", "ranges")))
    return _distinct(out, axes, current)


def _made(
    name: str, origin: Origin, base: dict[str, Any], values: dict[str, Any], source: Any
) -> Candidate:
    build = base
    for path, value in values.items():
        with contextlib.suppress(KeyError):  # said by plan._check_axes at the axis's line
            build = set_path(build, path, value)
    return Candidate(name, origin, dict(values), build, tuple(source))


def _plain(value: Any) -> Any:
    return None if value is MISSING else value


def _distinct(found: list[Candidate], axes: list[str], current: dict[str, Any]) -> list[Candidate]:
    """One candidate per distinct build mapping; later ones become the first's aliases.
    Every candidate's ``values`` are completed with the base's for the axes it leaves.

    Names are unique by construction: a name an earlier candidate (or alias) already has,
    for another build, gets ``-2``, ``-3``... (``a.b`` and ``apb``, ``a/b`` and ``a_b``,
    25 and 25.0, values cut to one prefix all name alike), so what runs under a name is
    that candidate's build and nothing else. The base, included builds and points come
    first, so a name the sweep gives is kept and a made one moves aside."""
    seen: dict[str, Candidate] = {}
    taken: set[str] = set()
    for candidate in found:
        for path in axes:
            if path not in candidate.values:
                candidate.values[path] = current[path]
        key = json.dumps(candidate.build, sort_keys=True, default=str)
        first = seen.get(key)
        if first is not None and candidate.name in (first.name, *first.aliases):
            continue  # the very same build under the very same name: nothing new
        candidate.name = _free(candidate.name, taken)
        taken.add(candidate.name)
        if first is not None:
            first.aliases.append(candidate.name)
        else:
            seen[key] = candidate
    return list(seen.values())


def _free(name: str, taken: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... the first no other candidate has (cut to
    ``MAX_NAME_CHARS`` with the suffix kept)."""
    if name not in taken:
        return name
    n = 2
    while True:
        suffix = f"-{n}"
        free = name[: MAX_NAME_CHARS - len(suffix)] + suffix
        if free not in taken:
            return free
        n += 1
