"""Everything people read: make_report, tables, markdown, the HTML page, charts, compare."""

from harness.report.make import make_report
from harness.report.tables import terminal_table

__all__ = ["make_report", "terminal_table"]
