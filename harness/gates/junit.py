"""Gate verdicts as JUnit XML, so CI systems list each gate as a test."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.gates.evaluate import GateResult


def junit_xml(results: list[GateResult], suite: str) -> str:
    """JUnit XML: one test case per gate, so CI systems list each gate as a test."""
    failures = sum(r.verdict == "fail" for r in results)
    errors = sum(r.verdict == "error" for r in results)
    root = ET.Element(
        "testsuites", tests=str(len(results)), failures=str(failures), errors=str(errors)
    )
    ts = ET.SubElement(
        root,
        "testsuite",
        name=f"harness gates: {suite}",
        tests=str(len(results)),
        failures=str(failures),
        errors=str(errors),
    )
    for r in results:
        case = ET.SubElement(
            ts, "testcase", classname=f"harness.gates.{suite}", name=r.name, time="0"
        )
        measured = f"{_num(r.left)} {r.op} {_num(r.right)}"
        if r.verdict == "fail":
            ET.SubElement(
                case, "failure", message=f"{r.text}: {measured} is false"
            ).text = f"gate: {r.text}\nmeasured: {measured}"
        elif r.verdict == "error":
            ET.SubElement(case, "error", message=r.detail).text = f"gate: {r.text}\n{r.detail}"
        ET.SubElement(case, "system-out").text = f"{r.text}\nmeasured: {measured}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"
