"""The ``url`` kind: a service already running (``target``, with its remote check; settings
``harness.scenario.builds.url``)."""
