"""A Toxiproxy-style TCP fault proxy: toxics (what and when), relay (one connection), server.

Runs in its own process (``python -m harness.proxy``, ``harness proxy``); imports only
``harness.core`` and ``harness.scenario``.
"""
