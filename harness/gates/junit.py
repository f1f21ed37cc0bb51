"""Gate verdicts as JUnit XML, so CI systems list each gate as a test.

Whatever a gate's name or text holds, the output is well-formed XML 1.0: a
character XML cannot carry (control characters other than tab, newline and
carriage return; lone surrogates; U+FFFE and U+FFFF) is written as a visible
``\\xNN`` / ``\\uNNNN`` escape instead.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from harness.gates.evaluate import GateResult

_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold replaced by a visible escape."""
    return _NOT_XML.sub(lambda m: ascii(m.group())[1:-1], text)


def junit_xml(results: list[GateResult], suite: str) -> str:
    """JUnit XML: one test case per gate, so CI systems list each gate as a test (a gate
    the run could not answer, ``--build``, as a skipped one)."""
    failures = sum(r.verdict == "fail" for r in results)
    errors = sum(r.verdict == "error" for r in results)
    skipped = sum(r.verdict == "skip" for r in results)
    suite = xml_safe(suite)
    counts = {
        "tests": str(len(results)),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
    }
    root = ET.Element("testsuites", counts)
    ts = ET.SubElement(root, "testsuite", {"name": f"harness gates: {suite}", **counts})
    for r in results:
        text, detail = xml_safe(r.text), xml_safe(r.detail)
        case = ET.SubElement(
            ts, "testcase", classname=f"harness.gates.{suite}", name=xml_safe(r.name), time="0"
        )
        measured = f"{r.show(r.left)} {r.op} {r.show(r.right)}"
        if r.verdict == "fail":
            ET.SubElement(
                case, "failure", message=f"{text}: {measured} is false"
            ).text = f"gate: {text}\nmeasured: {measured}"
        elif r.verdict == "error":
            ET.SubElement(case, "error", message=detail).text = f"gate: {text}\n{detail}"
        elif r.verdict == "skip":
            ET.SubElement(case, "skipped", message=detail)
            measured = "skipped"
        ET.SubElement(case, "system-out").text = f"{text}\nmeasured: {measured}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
