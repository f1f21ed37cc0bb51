"""Run folders: where a run writes, and the typed run/build model that reads it back."""

from harness.results.model import BuildResult, RunResult, latest, load

__all__ = ["BuildResult", "RunResult", "latest", "load"]
