"""The ``command`` kind: a process of the user's the harness starts and stops (``target``; settings
``harness.scenario.builds.command``)."""
