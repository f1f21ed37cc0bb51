"""Orchestration of a run: targets (the Target seam), kinds (one sub-package per build kind,
registered once), processes (each under an orphan guard), load generator, scraper, events,
manifest, the experiment that composes them, and the cleanup that closes runs a crash left
open."""
