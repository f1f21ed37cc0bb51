"""A Toxiproxy-style TCP fault proxy: toxics (what and when), relay (one connection, which
reaches its host through the small ``relay.Host`` protocol), server (``Proxy``), main (the
process's command line). Schedule format and toxics: docs/proxy.md.

Runs in its own process (``python -m harness.proxy``, ``harness proxy``); imports only
``harness.core`` and ``harness.scenario``.
"""
