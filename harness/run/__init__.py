"""Orchestration of a run: targets (the Target seam), processes, load generator, scraper,
events, manifest, and the experiment that composes them."""
