"""JUnit XML stays well-formed XML 1.0 whatever a gate's name or text holds (issue 12, item 4)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from harness.gates.evaluate import GateResult
from harness.gates.junit import junit_xml, xml_safe

HOSTILE = "".join(chr(c) for c in range(0x20)) + "\x7f\ud800\udcff\ufffe\uffff<&>\"']]>"


@pytest.mark.parametrize("verdict", ["pass", "fail", "error"])
def test_any_name_gives_well_formed_xml(verdict: str) -> None:
    result = GateResult(
        name=f"gate {HOSTILE}",
        text=f"after.pg.calls < 1 {HOSTILE}",
        left=2.0,
        op="<",
        right=1.0,
        verdict=verdict,  # type: ignore[arg-type]
        detail=f"detail {HOSTILE}",
    )
    xml = junit_xml([result], f"suite{HOSTILE}")
    xml.encode("utf-8")  # no lone surrogate left to fail the write
    root = ET.fromstring(xml)
    case = root.find("testsuite/testcase")
    assert case is not None
    name = case.get("name")
    assert name is not None and name.startswith("gate \\x00\\x01")
    assert "\\ud800\\udcff\\ufffe\\uffff<&>" in name


def test_what_xml_can_hold_is_kept() -> None:
    text = "tab\there\nnewline é 한국어 \U0001f600"
    assert xml_safe(text) == text
    assert xml_safe("a\x1bb") == "a\\x1bb"
