"""The fault-injecting payment gateway, run in a process of its own.

- ``decide``: pure fault decisions (no I/O, no clock);
- ``overrides``: live faults from ``PUT /__admin/fault`` and the ``X-Harness-Fault`` header;
- ``ledger``: one CSV row per call received;
- ``server``: the gateway's state and its handlers (approve calls, product reads);
- ``admin``: ``/metrics``, ``/health`` and the admin API;
- ``listener``: the main listener that ``refuse`` closes and re-opens;
- ``connection``: aiohttp's connections, answering a client that half-closes;
- ``app``: the web applications and serving until signalled;
- ``main``: the command line (``python -m harness.gateway``, ``python -m harness.pg``,
  ``harness pg``).

Imports only ``harness.core`` and ``harness.scenario``.
"""
