"""The public face of ``harness.gates``: a deliberate, sorted list of names."""

import harness.gates


def test_gates_exports() -> None:
    assert harness.gates.__all__ == [
        "GateResult",
        "evaluate",
        "evaluate_all",
        "gates_of",
        "junit_xml",
    ]
    assert all(hasattr(harness.gates, name) for name in harness.gates.__all__)
