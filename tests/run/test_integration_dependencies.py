"""Integration: a service with two HTTP dependencies on their own APIs, played as named
stubs (issue 29, parts 1, 2 and 5), through the real ``harness run``.

``tests/run/data/two_deps_service.py`` was not written for the harness: it is told its
dependencies' base URLs through its own environment and calls them on their own paths,
query strings and auth header. One dependency hangs for a phase while the other stays
healthy. Checked: each dependency's figures equal its ledger and the service's own
counters; the hanging one's calls in its phase are all errors and the other's none;
calls to a path nobody stubbed are answered 404, kept in the ledger as unmatched with
method and path, and said in the report. About 25 s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.scenario_runs import assert_nothing_left, only_run, run_harness

pytestmark = pytest.mark.integration

SERVICE = Path(__file__).resolve().parent / "data" / "two_deps_service.py"

SCENARIO = """\
name: two-dependencies
seed: 3
warmup: 1s
duration: 9s
metrics: {{interval: 1s}}
traffic:
  owner:
    path: /owners/{{id}}
    params: {{id: [1, 50]}}
    rate: 8
    timeout: 4s
dependencies:
  owners:
    routes:
      - name: owner
        request: {{method: GET, path: "/api/owners/{{ownerId}}", query: {{expand: pets}}}}
        response:
          headers: {{Content-Type: application/json}}
          body: {{id: "{{{{request.path.ownerId}}}}", name: Jean}}
  visits:
    routes:
      - name: visits
        request:
          method: GET
          path: /visits
          query: {{petId: {{matches: "[0-9]+"}}}}
          headers: {{Authorization: {{matches: "Bearer .+"}}}}
        response: {{body: {{items: [{{date: "2026-01-01"}}]}}}}
    phases:
      - {{name: visits-hang, start: 3s, duration: 3s, fault: {{type: timeout}}}}
      - {{name: healthy-end, start: 6s, duration: 3s, fault: {{type: healthy}}}}
builds:
  app:
    command: [{python}, {service}, "{{port}}"]
    metrics: {{path: null}}
    env:
      OWNERS_URL: "{{dep.owners.url}}"
      VISITS_URL: "{{dep.visits.url}}"
      COUNTS_FILE: "{{run_dir}}/{{build}}/counts.json"
gates:
  - "app.dependencies.visits.errors[visits-hang] >= 1"
  - "app.dependencies.visits.errors[healthy-end] == 0"
  - "app.dependencies.owners.errors == 0"
  - "app.dependencies.owners.unmatched >= 1"
"""


def test_two_stubbed_dependencies_one_hanging(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO.format(python=sys.executable, service=SERVICE))
    done = run_harness(["run", str(scenario), "--results", str(tmp_path / "results")], 240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run_dir = only_run(tmp_path / "results")
    assert_nothing_left(run_dir)
    bdir = run_dir / "app"
    own = json.loads((bdir / "counts.json").read_text())
    owners = pd.read_parquet(bdir / "dep-owners.parquet")
    visits = pd.read_parquet(bdir / "dep-visits.parquet")
    report = json.loads((run_dir / "report.json").read_text())
    build = report["builds"]["app"]
    figures = build["dependencies"]

    # Every call the service made is in its dependency's ledger, and nothing else is.
    assert len(owners) == own["owners"] + own["photo"] > 0
    assert len(visits) == own["visits"] > 0
    assert (owners["route"] == "owner").sum() == own["owners"]
    photo = owners[owners["route"] == "unmatched"]
    assert len(photo) == own["photo"]
    assert set(photo["method"]) == {"GET"} and photo["path"].str.endswith("/photo").all()
    assert set(photo["status"]) == {404}
    assert (visits["route"] == "visits").all()

    # The figures equal the ledgers (measured window: by arrival from t0).
    t0 = build["t0"]
    window = lambda f, a, b: f[(f["arrival"] >= t0 + a) & (f["arrival"] < t0 + b)]  # noqa: E731
    assert figures["owners"]["calls"] == len(window(owners, 0, 9))
    assert figures["visits"]["calls"] == len(window(visits, 0, 9))
    hang = window(visits, 3, 6)
    assert figures["visits"]["calls_fault"] == len(hang) > 0
    assert set(hang["fault"]) == {"timeout"}
    assert figures["visits"]["errors_fault"] == len(hang)  # each hung until the caller left
    assert figures["owners"]["errors"] == 0
    assert figures["owners"]["unmatched"] == len(window(photo, 0, 9))
    healthy = pd.concat([window(visits, 0, 3), window(visits, 6, 9)])
    assert set(healthy["status"]) == {200} and set(healthy["fault"]) == {"healthy"}
    # The service's fallback kicked in exactly for the hung calls (its own counter).
    assert own["visits_failed"] == (visits["status"] != 200).sum()
    # The unmatched path is said where a newcomer looks first.
    assert any("/photo" in w and "owners" in w for w in build.get("warnings", []))
    assert "owners unmatched calls" in (run_dir / "report.md").read_text()
    # Gates read the figures per dependency, per phase too.
    phase = build["phases"]["healthy-end"]["dependencies"]["visits"]
    assert phase["calls"] == len(window(visits, 6, 9)) and phase["errors"] == 0
    assert "4 gates" in done.stdout or "4/4" in done.stdout, done.stdout[-2000:]
