"""The fault-injecting payment gateway: pure fault decisions, the ledger, the admin API, the server.

Runs in its own process (``python -m harness.gateway``, ``harness pg``); imports only
``harness.core`` and ``harness.scenario``.
"""
