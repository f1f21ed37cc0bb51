"""The ``replicas`` kind: a shop build with ``replicas`` above 1, its shops behind nginx
(``target``, ``balancer``; settings ``harness.scenario.builds.shop``)."""
