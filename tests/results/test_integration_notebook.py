"""notebooks/explore-run.ipynb runs top to bottom on a real run and computes its figure.

The notebook is executed with nbclient in a kernel of *this* interpreter (the
venv's): a kernelspec pointing at ``sys.executable`` is written to a temporary
JUPYTER_PATH, so neither a user's kernels nor a ``python`` on PATH are used.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from ipykernel.kernelspec import install as install_kernelspec
from nbclient import NotebookClient

from tests.conftest import ROOT

pytestmark = pytest.mark.integration

NOTEBOOK = ROOT / "notebooks" / "explore-run.ipynb"
KERNEL = "harness-test-python3"


def _stdout(cell: Any) -> str:
    return "".join(o["text"] for o in cell["outputs"] if o.get("name") == "stdout")


def test_committed_notebook_has_no_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.id


def test_notebook_runs_on_a_real_run(
    short_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # jupyter_core warns (DeprecationWarning) unless told to use platformdirs' locations.
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    prefix = tmp_path / "jupyter"
    install_kernelspec(kernel_name=KERNEL, prefix=str(prefix))
    spec = json.loads((prefix / "share/jupyter/kernels" / KERNEL / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    monkeypatch.setenv("HARNESS_RUN_DIR", str(short_run))

    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name=KERNEL, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    cells = {c.get("id"): c for c in nb.cells if c.cell_type == "code"}
    outputs = [o for c in cells.values() for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    stderr = "".join(o["text"] for o in outputs if o.get("name") == "stderr")
    assert "Warning" not in stderr, stderr

    # The manifest summary names the run; the table agrees with report.json.
    manifest = json.loads((short_run / "manifest.json").read_text())
    assert manifest["run_id"] in _stdout(cells["load"])
    table_out = _stdout(cells["latency-table"])
    assert "p95 against report.json: largest difference" in table_out
    gap_ms = float(table_out.split("largest difference ")[1].split(" ms")[0])
    assert gap_ms < 1.0, table_out
    assert any("image/png" in o.get("data", {}) for o in cells["plot"]["outputs"])

    # The figure the report does not give: the last line of the result cell is JSON.
    result = json.loads(_stdout(cells["result"]).strip().splitlines()[-1])
    assert result["figure"] == "seconds_from_outage_start_to_pool_saturation"
    assert result["fault_window_s"] == [3.0, 21.0]  # the short scenario's outage
    saturation = result["builds"]
    assert set(saturation) == {"before", "after"}
    # Retry-only: 8 payments/s each holding a thread ~1.7 s fill the 8 threads within seconds.
    before = saturation["before"]
    assert before is not None and 0 <= before <= 8, result
    # With the breaker the pool may fill briefly before it opens, or never.
    assert saturation["after"] is None or 0 <= saturation["after"] <= 18, result
