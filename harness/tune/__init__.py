"""``harness tune``: candidates over one build's settings, run as builds of one scenario,
ranked by an objective under constraints, with their Pareto front and a recommendation."""
