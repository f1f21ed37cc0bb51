"""Seed claims: the gates that carry a seed article's own figure, with ours beside it.

A gate may say ``seed: "7.21 s"``: what the seed measured for the claim the
gate encodes. The gate decides the verdict (it encodes the claim's
direction); the report only puts the seed's number beside the figures the
gate read, so a reader sees how close the reproduction came, not only whether
it went the same way. Evaluated here, from ``report.json`` as written, without
a baseline run (a ``baseline.`` figure reads as not measured).
"""

from __future__ import annotations

from harness.analysis.format import Unit, figure, number
from harness.analysis.model import Report, SeedClaim
from harness.core.catalogue import unit_of
from harness.gates.evaluate import evaluate
from harness.scenario.gates import GateSyntaxError, parse_gate
from harness.scenario.schema import Scenario


def seed_claims(scenario: Scenario, report: Report) -> list[SeedClaim]:
    """One entry per gate with ``seed:``, in the scenario's order (empty when none has)."""
    claims: list[SeedClaim] = []
    for spec in scenario.gate_specs():
        if spec.seed is None:
            continue
        try:
            gate = parse_gate(spec.expr, spec.name)
        except GateSyntaxError as exc:  # checked at load; a hand-edited run folder may differ
            claims.append(_broken(spec.name or spec.expr, spec.expr, spec.seed, str(exc)))
            continue
        result = evaluate(gate, report)
        claims.append(
            {
                "gate": result.name,
                "expr": result.text,
                "seed": spec.seed,
                "figures": dict(result.figures),
                "measured": result.left,
                "op": result.op,
                "limit": result.right,
                "verdict": result.verdict,
                "detail": result.detail,
            }
        )
    return claims


def _broken(name: str, expr: str, seed: str, why: str) -> SeedClaim:
    return {
        "gate": name,
        "expr": expr,
        "seed": seed,
        "figures": {},
        "measured": None,
        "op": "",
        "limit": None,
        "verdict": "error",
        "detail": why,
    }


def figure_unit(name: str) -> Unit:
    """The unit of a figure named in a gate, for display: the catalogue's
    (``core.catalogue.unit_of``): seconds, percent or none."""
    return unit_of(name)


def ours(claim: SeedClaim) -> str:
    """The figures a claim's gate read, ``name = value`` each, joined by ``; ``."""
    return "; ".join(f"{n} = {figure(v, figure_unit(n))}" for n, v in claim["figures"].items())


def check(claim: SeedClaim) -> str:
    """The gate's two sides as the gates table shows them: ``2.43 s <= 3.55 s``."""
    if claim["measured"] is None and claim["limit"] is None:
        return "-"
    units = {figure_unit(name) for name in claim["figures"]}
    unit = units.pop() if len(units) == 1 else ""

    def side(value: float | None) -> str:  # in the figures' unit: 7 ms <= 1.83 s
        return figure(value, unit) if unit else number(value)

    return f"{side(claim['measured'])} {claim['op']} {side(claim['limit'])}"


def verdict(claim: SeedClaim) -> str:
    """``pass``, ``fail``, or ``error (why)``."""
    detail = claim["detail"]
    return claim["verdict"] + (f" ({detail})" if detail else "")


CLAIM_HEADER = ["claim (gate)", "seed", "ours", "measured vs limit", "verdict"]
"""Columns of the Seed claims table (report.md, report.html, the index page)."""


def claim_row(claim: SeedClaim) -> list[str]:
    """One row of the Seed claims table."""
    return [claim["gate"], claim["seed"], ours(claim), check(claim), verdict(claim)]
