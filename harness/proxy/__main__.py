"""``python -m harness.proxy``: the TCP fault proxy as a process of its own."""

from harness.proxy.main import main

main()
