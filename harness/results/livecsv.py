"""Reading a CSV a live writer may have left cut short (the load generator's samples, the
gateway's ledger, the scraper's spool): malformed rows skipped, a cut last row dropped."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd


def read_live_csv(csv_path: Path) -> pd.DataFrame:
    """A live CSV as text columns, its malformed rows skipped. A writer stopped mid-row (a
    full disk, a kill) can leave a quoted field open at the end, which the C reader refuses
    outright ("EOF inside string"): then the cut last line is dropped and the rest read."""
    try:
        return pd.read_csv(csv_path, on_bad_lines="skip", keep_default_na=False, dtype=str)
    except pd.errors.ParserError:
        data = csv_path.read_bytes()
        whole = data[: data.rfind(b"\n") + 1]
        return pd.read_csv(io.BytesIO(whole), on_bad_lines="skip", keep_default_na=False, dtype=str)
