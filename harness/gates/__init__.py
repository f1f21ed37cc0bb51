"""Gates: a scenario's claims checked against a run's report, with JUnit output."""
