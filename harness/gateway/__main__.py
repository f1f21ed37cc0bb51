"""``python -m harness.gateway``: the gateway as a process of its own."""

from harness.gateway.main import main

main()
