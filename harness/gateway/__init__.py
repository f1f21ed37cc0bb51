"""The fault-injecting payment gateway, run in a process of its own.

- ``decide``: pure fault decisions (no I/O, no clock);
- ``capacity``: ``pg.capacity``'s decisions, pure (slots, the FIFO queue, the limit in force)
  and the queueing reference the tests hold it against (``fifo_waits``);
- ``queueing``: each call's wait and service on the event loop, outliving its connection;
- ``attempts``: the attempt count per Idempotency-Key;
- ``calls``: one call in progress, and the answers that write the socket themselves;
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
