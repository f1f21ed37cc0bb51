"""A build's target series: one scrape source, or one per replica read apart and summed.

A build of one process is scraped as the one source ``target``, read through
its preset (``series.map_canonical``) exactly as always. A shop build with
``replicas: N`` (the manifest records ``replicas``) is N processes behind a
load balancer, each with its own pool and breaker, scraped as N sources:
``target.0`` ... ``target.<N-1>``. Each replica's canonical series are read
on their own, through the same preset; the build's series are their sums,
one reading per scrape round: at the moment the round's last replica was
read, every replica's latest reading at or before it (a replica whose scrape
failed in that round counts its previous reading). A canonical series that
any replica lacks is not measured for the build, and the reason names the
replica.

Two things are never summed. The breaker's state: every replica has its own,
so its figures are per replica, and the build's are read across them
(``figures.BuildSeries.states``). And counter figures: a build's count over a
window is the sum of its replicas' counts, each rounded to a whole count, so
the build's figure in ``report.json`` is exactly the sum of its replicas'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from harness.analysis.series import CANONICAL_SERIES, map_canonical, preset_for
from harness.results.manifest import BuildRecord

TARGET_SOURCE = "target"
"""The scrape source of a build of one process."""

_REPLICA_SOURCE = re.compile(r"target\.(\d+)")


def replica_source(index: int) -> str:
    """The scrape source of replica ``index`` (from 0): ``target.0``, ``target.1``, ..."""
    return f"{TARGET_SOURCE}.{index}"


def replica_count(info: BuildRecord) -> int:
    """How many target processes a build ran, as its manifest entry records it (1 when absent:
    a build without ``replicas``)."""
    return max(1, info.get("replicas", 1))


def target_sources(info: BuildRecord) -> list[str]:
    """The scrape sources of a build's target processes: ``target``, or one per replica."""
    n = replica_count(info)
    return [TARGET_SOURCE] if n == 1 else [replica_source(i) for i in range(n)]


def is_target_source(name: str) -> bool:
    """Whether a scrape source is a target process (``target`` or a replica's)."""
    return name == TARGET_SOURCE or _REPLICA_SOURCE.fullmatch(name) is not None


@dataclass
class TargetSeries:
    """The canonical series of a build's target, and why any of them is not measured."""

    series: dict[str, pd.Series]
    """Canonical name -> values indexed by scrape time; a replicated build's summed
    (``breaker_state`` is never summed: see ``replicas``)."""
    missing: dict[str, str] = field(default_factory=dict)
    """Canonical series -> why it is not measured."""
    replicas: list[dict[str, pd.Series]] = field(default_factory=list)
    """Each replica's own canonical series, in replica order; empty for one process."""
    warnings: list[str] = field(default_factory=list)
    """What was read but looks wrong (``series.Canonical.warnings``), a replica's named."""


def _by_name(frame: pd.DataFrame) -> dict[str, pd.Series]:
    return {
        str(name): pd.Series(rows["value"].to_numpy(), index=rows["t"].to_numpy(), dtype=float)
        for name, rows in frame.groupby("series")
    }


def target_series(metrics: pd.DataFrame, info: BuildRecord) -> TargetSeries:
    """The build's canonical target series through the preset its manifest entry records."""
    preset = preset_for(info)
    sources = target_sources(info)
    if len(sources) == 1:
        mapped = map_canonical(metrics, preset)
        return TargetSeries(_by_name(mapped.frame), mapped.missing, warnings=mapped.warnings)
    replicas: list[dict[str, pd.Series]] = []
    missing: dict[str, str] = {}
    warnings: list[str] = []
    for source in sources:
        mapped = map_canonical(metrics, preset, source)
        replicas.append(_by_name(mapped.frame))
        warnings += [f"{source}: {w}" for w in mapped.warnings]
        for name, why in mapped.missing.items():
            missing.setdefault(name, f"{source}: {why}")
    last = metrics.loc[metrics["source"] == sources[-1], "t"] if len(metrics) else pd.Series()
    rounds = pd.Index(last.unique()).sort_values()
    summed: dict[str, pd.Series] = {}
    for name in CANONICAL_SERIES:
        if name == "breaker_state" or name in missing:
            continue
        parts = [replica[name] for replica in replicas if name in replica]
        if len(parts) == len(replicas) and len(rounds):
            summed[name] = sum_at(parts, rounds)
    return TargetSeries(summed, missing, replicas, warnings)


def sum_at(parts: list[pd.Series], times: pd.Index) -> pd.Series:
    """The sum of ``parts`` at ``times``: each part's latest value at or before each time;
    a time before some part's first value is left out."""
    total = pd.Series(0.0, index=times)
    for part in parts:
        part = part[~part.index.duplicated(keep="last")].sort_index()
        total = total + part.reindex(part.index.union(times)).ffill().reindex(times)
    return total.dropna().astype(float)


def as_frame(series: Mapping[str, pd.Series]) -> pd.DataFrame:
    """Canonical series as a long frame (``t``, ``series``, ``value``), as ``canonical`` gives."""
    parts = [
        pd.DataFrame(
            {"t": s.index.to_numpy(dtype=float), "series": name, "value": s.to_numpy(dtype=float)}
        )
        for name, s in sorted(series.items())
    ]
    if not parts:
        return pd.DataFrame({"t": [], "series": [], "value": []})
    return pd.concat(parts, ignore_index=True)
