"""Orchestration of a run: processes, scraper, targets (the Target seam), experiment, manifest."""
