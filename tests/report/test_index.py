"""``harness index``: one page over several runs, and ``make seeds`` that ends with it.

Runs are copies of the quickstart run of the test data laid out as
``harness run`` lays them out (``<results>/<scenario>/<run id>``); a real run
on the index: ``test_integration_seed_claims``. ``make seeds`` is run
from the real Makefile in a scratch folder with seed scenarios of its own and
a stand-in ``harness`` that records its calls (the runs themselves take an
hour), to check the loop: every scenario in order, past a failure, then the
index, and the exit status.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from tests.conftest import ROOT

V1 = ROOT / "tests" / "data" / "run-quickstart-v1"
RUN_ID = "20261130T000558Z-389cd7"

SEED_GATE = """
  - name: "saturated | before"
    expr: "before.busy_workers.max[outage] >= before.max_workers"
    seed: "200 of 200"
  - name: false on purpose
    expr: "after.blocked.total <= 0"
    seed: "none blocked"
"""


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """results/quickstart/<run id>/ with seed gates (one false), its scenario file, and a
    second run folder without a report."""
    results = tmp_path / "results"
    run_dir = results / "quickstart" / RUN_ID
    shutil.copytree(V1, run_dir)
    text = (V1 / "scenario.yaml").read_text().rstrip() + "\n" + SEED_GATE
    (run_dir / "scenario.yaml").write_text(text)
    scenario_file = tmp_path / "scenarios" / "quick.yaml"
    scenario_file.parent.mkdir()
    scenario_file.write_text(text)
    assert CliRunner().invoke(app, ["report", str(run_dir)]).exit_code == 0
    broken = tmp_path / "elsewhere" / "20261130T010000Z-aaaaaa"
    shutil.copytree(V1, broken)
    (broken / "report.json").unlink()
    return scenario_file, run_dir, broken


def _index(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["index", *args])
    return result.exit_code, " ".join(result.output.split())


def test_the_index_lists_each_run_with_verdict_link_and_claims(
    tmp_path: Path, layout: tuple[Path, Path, Path]
) -> None:
    scenario_file, run_dir, broken = layout
    out = tmp_path / "site" / "seeds" / "index.html"
    code, output = _index(
        str(scenario_file),
        str(broken),
        "--results",
        str(tmp_path / "results"),
        "--out",
        str(out),
        "--title",
        "Seed <experiments>",
    )
    assert code == 0, output
    assert "(0/2 pass every gate)" in output
    assert "6/7 gates pass" in output and "no report.json" in output
    page = out.read_text()
    assert "<title>Seed &lt;experiments&gt;</title>" in page
    # The link is relative to the page, and leads to the run's report.
    (href,) = re.findall(r'href="([^"#]+)"', page)
    assert not href.startswith("/")
    assert (out.parent / html.unescape(href)).resolve() == (run_dir / "report.html").resolve()
    assert "PG hangs for 40 s; retry-only vs retry + circuit breaker" in page
    assert RUN_ID in page and "completed" in page
    assert "saturated | before" in page and "200 of 200" in page and "none blocked" in page
    assert 'class="text verdict-fail">6/7 gates pass' in page
    # The Markdown beside it: every run, then every claim with its scenario.
    md = (out.parent / "index.md").read_text()
    assert f"| quickstart | {RUN_ID} | 6/7 gates pass | [report.html]({href}) |" in md
    assert "| quickstart | 20261130T010000Z-aaaaaa | no report.json" in md
    claims = md.split("## Seed claims", 1)[1]
    assert r"| quickstart | saturated \| before | 200 of 200 |" in claims
    assert "| false on purpose | none blocked | after.blocked.total = " in claims
    assert claims.rstrip().endswith("| fail |")


def test_check_since_and_bad_paths(tmp_path: Path, layout: tuple[Path, Path, Path]) -> None:
    scenario_file, run_dir, _ = layout
    results = str(tmp_path / "results")
    out = str(tmp_path / "index.html")
    code, output = _index(str(scenario_file), "--results", results, "--out", out, "--check")
    assert code == 1, output  # a gate fails
    # Only runs started since the stamp: the old one does not stand in for a missing one.
    code, output = _index(
        str(scenario_file), "--results", results, "--out", out, "--since", "20261130T000600Z"
    )
    assert code == 0 and "not run (no run under" in output and "started since" in output
    code, output = _index(str(scenario_file), "--out", out, "--since", "yesterday")
    assert code == 2 and "expected a UTC stamp like 20261130T031500Z" in output
    code, output = _index(str(tmp_path / "nope.yaml"), "--out", out)
    assert code == 2 and "no such scenario file" in output
    code, output = _index(str(tmp_path), "--out", out)
    assert code == 2 and "not a run folder" in output
    # An invalid scenario file is a row saying so (make seeds still writes its page).
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\n")
    code, output = _index(str(bad), str(run_dir), "--out", out)
    assert code == 0 and "invalid: " in output and "6/7 gates pass" in output
    # A page that cannot be written: exit 3, saying where.
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, output = _index(str(run_dir), "--out", str(blocker / "index.html"))
    assert code == 3 and "cannot" in output
    # A file the index did not write is never replaced: the Markdown beside --out, or --out.
    readme = tmp_path / "README.md"
    readme.write_text("# my project\n")
    code, output = _index(str(run_dir), "--out", str(tmp_path / "README.html"))
    assert code == 2 and "README.md (the Markdown written beside --out" in output, output
    assert readme.read_text() == "# my project\n" and not (tmp_path / "README.html").exists()
    page = tmp_path / "page.html"
    page.write_text("<html>mine</html>\n")
    code, output = _index(str(run_dir), "--out", str(page))
    assert code == 2 and "was not written by harness index" in output
    assert page.read_text() == "<html>mine</html>\n"
    # Its own pages it replaces, run after run.
    code, output = _index(str(run_dir), "--out", out)
    assert code == 0 and (tmp_path / "index.md").read_text().startswith("<!-- written by")


SEED_SCENARIO = """\
name: {name}
duration: 10s
traffic:
  products: {{path: /p, rate: 1}}
builds:
  after: {{profile: retry-circuit-breaker}}
"""


def test_make_seeds_runs_every_seed_scenario_past_failures_then_the_index(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    seeds = tmp_path / "scenarios" / "seeds"
    seeds.mkdir(parents=True)
    for name in ("003-c", "001-a", "002-b"):
        (seeds / f"{name}.yaml").write_text(SEED_SCENARIO.format(name=name))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "harness"
    fake.write_text(
        '#!/bin/sh\necho "$@" >> calls.log\ncase "$2" in *002-b*) exit 1;; esac\nexit 0\n'
    )
    fake.chmod(0o755)
    make = ["make", "-s", "-f", str(ROOT / "Makefile"), "-o", ".venv/.installed", "seeds"]
    done = subprocess.run(
        [*make, f"BIN={bin_dir}"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0, done.stdout + done.stderr  # 002-b failed
    assert "seeds: scenarios/seeds/002-b.yaml failed" in done.stdout
    calls = (tmp_path / "calls.log").read_text().splitlines()
    files = [f"scenarios/seeds/{n}.yaml" for n in ("001-a", "002-b", "003-c")]
    assert calls[:3] == [f"run {f} --results results/seeds" for f in files]
    index = calls[3]
    assert index.startswith("index " + " ".join(files) + " --results results/seeds --since ")
    assert re.search(r"--since \d{8}T\d{6}Z --out results/seeds/index.html", index)
    # Every run passing: exit 0.
    (tmp_path / "calls.log").unlink()
    (seeds / "002-b.yaml").rename(seeds / "002-ok.yaml")
    done = subprocess.run(
        [*make, f"BIN={bin_dir}"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert len((tmp_path / "calls.log").read_text().splitlines()) == 4
