"""The ``shop`` kind: the reference shop alone (``target``; settings
``harness.scenario.builds.shop``)."""
