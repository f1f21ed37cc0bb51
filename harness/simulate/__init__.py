"""``harness simulate``: a discrete-event model of a build, fed by the same scenario.

A screen, never the verdict: it ranks candidates in seconds, and the best are run for
real. ``simulate_run`` writes a run folder laid out as ``harness run``'s (manifest
``"simulated": true``), so reports, gates and ``harness.analysis.figures`` read it
unchanged. What is modelled and what is not, and the measured error: docs/simulate.md.

Modules, bottom up: ``clock`` (the event heap, a fair FIFO pool), ``services`` (which
builds are modelled, as the shop's own ``ShopConfig``), ``routes`` (the scenario's traffic
against the modelled service's routes), ``gateway`` (the scenario's
faults by the gateway's own rules, the ledger), ``layers`` (the resilience composition on
the simulated clock), ``shop`` (threads, accept queue, DB pool, routes, the client's
side), ``frames`` (samples, ledger, scrapes), ``run`` (``simulate_run``). Never imports
``harness.run``.
"""

from harness.simulate.run import modelled, simulate_build, simulate_run
from harness.simulate.services import NotModelled

__all__ = ["NotModelled", "modelled", "simulate_build", "simulate_run"]
