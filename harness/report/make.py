"""``make_report``: a run folder in, ``report.json``, ``report.md``, charts and ``report.html`` out.

The top of the report package: it runs the analysis and hands the result to
the renderers (tables, page, charts), none of which import it.
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis.figures import analyse
from harness.analysis.model import Report
from harness.gates.select import skipped_gates
from harness.report.claims import seed_claims
from harness.report.tables import markdown
from harness.results.io import write_json_atomic, write_text_atomic
from harness.results.model import load
from harness.scenario.loader import load_scenario


def make_report(run_dir: str | Path, charts: bool = True, write: bool = True) -> Report:
    """Analyse a run folder; write ``report.json``, ``report.md`` and (with charts) the
    PNG charts under ``charts/`` and a self-contained ``report.html``. Gates with ``seed:``
    are evaluated here too, for the Seed claims section. Without ``write``, nothing is
    written (a run still going on: ``harness.run.manifest.in_progress``)."""
    path = Path(run_dir)
    run = load(path)
    scenario = load_scenario(path / "scenario.yaml").scenario
    report = analyse(run, scenario)
    claims = seed_claims(scenario, report)
    if claims:  # only when a gate has seed: a report without them reads as before
        report["seed_claims"] = claims
    skipped = skipped_gates(scenario, report)
    if skipped:  # only when --build left out a build a gate names
        report["skipped_gates"] = skipped
    if not write:
        return report
    write_json_atomic(path / "report.json", report)
    write_text_atomic(path / "report.md", markdown(report))
    if charts and report["builds"]:
        from harness.report.charts import draw_charts
        from harness.report.page import write_html

        write_html(path, report, draw_charts(run, scenario, path / "charts"))
    return report
