"""What classing an answer costs the load generator (``harness.scenario.outcomes``), per answer.

The work ``harness.load.wire`` adds to each answer it reads: the label header, and the
class from the endpoint's rules. Three endpoints: no rule of its own (the ``default``
preset: one set lookup), the shop's ``x-outcome`` (two header look-ups in the head's
bytes) and a JSONPath rule on the body (the body kept and parsed, the path evaluated).
Prints microseconds per answer and each one's ratio to the no-rule path; the generator
holds 15,000 answers/s on one core (``generator_ceiling.py``), 67 us each.

    .venv/bin/python benchmarks/outcome_rules.py
"""

from __future__ import annotations

import json
import time

from harness.scenario.outcomes import Outcomes

HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 212\r\n"
    b"Date: Sun, 07 Dec 2025 03:00:00 GMT\r\nX-Outcome: fresh\r\nConnection: keep-alive\r\n"
)
BODY = json.dumps(
    [{"id": i, "name": f"owner {i}", "pets": [{"name": "Rex", "visits": [{"id": i}]}]}
     for i in range(3)]
).encode()  # fmt: skip
RULES = {
    "no rule (default)": Outcomes(),
    "headers (x-outcome)": Outcomes(preset="x-outcome"),
    "JSONPath on the body": Outcomes.model_validate(
        {"degraded": {"status": "2xx", "body": {"path": "$[*].pets[*].visits", "empty": True}}}
    ),
}


def per_answer_us(outcomes: Outcomes, n: int = 20_000) -> float:
    classifier = outcomes.resolved().classifier()
    lower = HEAD.lower()
    body = BODY if classifier.reads_body else None
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            classifier.label(HEAD, lower)
            classifier.classify(200, HEAD, lower, body)
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def main() -> None:
    results = {name: per_answer_us(o) for name, o in RULES.items()}
    base = results["no rule (default)"]
    for name, us in results.items():
        print(f"{name:24} {us:8.2f} us/answer  x{us / base:6.1f}")


if __name__ == "__main__":
    main()
