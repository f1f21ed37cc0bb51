"""A corpus of hostile scenarios, each through `harness validate` as a subprocess (issue 12).

Every file must end in exit 0 or 2 with a located one-line problem, never a
traceback, within 30 s and 4 GB of address space. The files are in
``scenarios/``; what cannot be committed (a 2 MB file, 100,000 phases, a FIFO,
a symlink to /dev/zero, a directory) is made at test time. Each case also says
what the answer must contain, so a refusal for the wrong reason fails too.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

HERE = Path(__file__).parent / "scenarios"
TIMEOUT_S = 120
"""A hang guard, not a speed bound: the 10,001-phase file takes ~4 s of CPU to refuse (PyYAML
composes ~1 MB with its marks), and with the machine loaded to 7 it took 24 s (one run beside
every other unit test past 30 s); a file that blocks (a FIFO, /dev/zero) would never end."""
ADDRESS_SPACE = 4 * 1024**3

# file -> (exit code, a fragment the output must contain)
EXPECTED: dict[str, tuple[int, str]] = {
    "valid-anchors-and-unicode.yaml": (0, "ok — 2 endpoint(s)"),
    "utf8-bom.yaml": (0, "ok"),
    "crlf-line-endings.yaml": (0, "ok"),
    "body-date.yaml": (0, "ok"),
    "name-dotdot.yaml": (2, ":1:7: name: name '..' must be 1-100 characters"),
    "name-dot.yaml": (2, "name: name '.' must be"),
    "name-traversal.yaml": (2, "name: name '../../../tmp/escaped' must be"),
    "name-absolute.yaml": (2, "name: name '/etc' must be"),
    "name-300-chars.yaml": (2, "name: a name has at most 100 characters, this one 300"),
    "name-leading-dash.yaml": (2, "name: name '-rf' must be"),
    "name-hangul.yaml": (2, "must be 1-100 characters"),
    "build-name-slash.yaml": (2, "builds: name 'a/b' must be"),
    "phase-name-dotdot.yaml": (2, "pg.phases.0.name: name '..'"),
    "warmup-100000h.yaml": (2, "warmup: Input should be less than or equal to 3600"),
    "warmup-inf.yaml": (2, "warmup: a duration must be finite"),
    "drain-inf.yaml": (2, "drain: a duration must be finite"),
    "duration-400-digits.yaml": (2, "duration: a duration must be finite"),
    "timeout-inf.yaml": (2, "traffic.products.timeout: a duration must be finite"),
    "read-timeout-inf.yaml": (2, "pg-client.read-timeout: a duration must be finite"),
    "phase-start-nan.yaml": (2, "pg.phases.0.start: a duration must be finite"),
    "rate-1e9.yaml": (2, "traffic.products.rate: Input should be less than or equal to 10000"),
    "rate-overflow.yaml": (2, "traffic.products.rate: must be a finite number"),
    "seed-5000-digits.yaml": (2, ":3:7: not valid YAML: a number of 5,000 characters; at most 100"),
    "seed-hex-huge.yaml": (2, "at most 100"),
    "seed-negative.yaml": (2, "seed: Input should be greater than or equal to 0"),
    "workers-million.yaml": (2, "workers: Input should be less than or equal to 2000"),
    "window-billion.yaml": (2, "sliding-window-size: Input should be less than or equal to 100000"),
    "retry-backoff-overflow.yaml": (2, "set exponential-max-wait-duration"),
    "lognormal-sigma-huge.yaml": (2, "sigma: Input should be less than or equal to 10"),
    "status-weights-inf.yaml": (2, "status: must be a finite number"),
    "repeat-every-nanosecond.yaml": (
        2,
        "repeat.every: Input should be greater than or equal to 0.01",
    ),
    "path-empty-placeholder.yaml": (2, "path has an empty placeholder '{}'"),
    "path-positional-placeholder.yaml": (2, "that is not a placeholder"),
    "path-crlf.yaml": (2, "path contains '\\r' at character 19"),
    "path-stray-brace.yaml": (2, "that is not a placeholder"),
    "path-not-absolute.yaml": (2, "must start with '/'"),
    "body-nan.yaml": (2, "body must be plain JSON"),
    "body-binary.yaml": (2, "body must be plain JSON"),
    "gate-name-control.yaml": (2, "gates.0.name: a gate's name contains the control character"),
    "gate-deep-parens.yaml": (2, "gates.0: a gate has at most 1000 characters"),
    "gate-deep-minus.yaml": (2, "gates.0: parentheses and minus signs nested more than 32 deep"),
    "gate-huge-number.yaml": (2, "is too large"),
    "deep-flow-nesting.yaml": (2, "nested more than 64 levels deep"),
    "deep-list-nesting.yaml": (2, "nested more than 64 levels deep"),
    "deep-block-nesting.yaml": (2, "nested more than 64 levels deep"),
    "billion-laughs.yaml": (2, "more than 250,000 values (aliases expanded)"),
    "merge-key-bomb.yaml": (2, "more than 250,000 values (aliases expanded)"),
    "recursive-alias.yaml": (2, "alias *loop refers to a value that contains it"),
    "recursive-alias-list.yaml": (2, "alias *l refers to a value that contains it"),
    "alias-chain-deep.yaml": (2, "nests values more than 64 levels deep"),
    "undefined-alias.yaml": (2, "found undefined alias"),
    "duplicate-keys.yaml": (2, ":17:1: name: duplicate key"),
    "tabs-for-indent.yaml": (2, ":10:1: not valid YAML"),
    "bool-maybe.yaml": (2, "cannot read 'maybe' as bool"),
    "timestamp-garbage.yaml": (2, "duration: expected a duration"),
    "python-object-tag.yaml": (2, "could not determine a constructor"),
    "custom-tag.yaml": (2, "could not determine a constructor for the tag '!secret'"),
    "complex-key.yaml": (2, "found unhashable key"),
    "not-a-mapping.yaml": (2, ":1:1: expected a mapping of scenario keys"),
    "scalar-document.yaml": (2, "expected a mapping"),
    "empty.yaml": (2, "expected a mapping"),
    "only-comments.yaml": (2, "expected a mapping"),
    "multi-document.yaml": (2, "expected a single document"),
    "control-char-raw.yaml": (2, ":1:11: not valid YAML: control characters are not allowed"),
    "nul-bytes.yaml": (2, "contains a NUL byte (line 17"),
    "invalid-utf8.yaml": (2, "is not UTF-8 text (byte 0xff at line 1, byte 11)"),
    "latin1.yaml": (2, "is not UTF-8 text (byte 0xe9"),
    "utf16-bom.yaml": (2, "is UTF-16 text (it starts with a byte-order mark)"),
    "utf16be-no-bom.yaml": (2, "looks like UTF-16 or UTF-32 text"),
    "utf32-bom.yaml": (2, "is UTF-32 text"),
    "unknown-keys-everywhere.yaml": (2, "nmae: unknown key"),
    "types-swapped.yaml": (2, "problem(s) found"),
    "many-problems.yaml": (2, "2003 problem(s) found"),
}


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _validate(path: Path) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "harness", "validate", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=TIMEOUT_S,
        preexec_fn=_limits,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def _check(path: Path, code: int, fragment: str) -> float:
    got, output, elapsed = _validate(path)
    assert "Traceback" not in output, output
    assert got == code, output
    assert fragment in output, output
    if code == 2:
        assert "problem(s) found" in output, output
    return elapsed


def test_every_file_has_an_expectation() -> None:
    assert sorted(p.name for p in HERE.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_file(name: str) -> None:
    _check(HERE / name, *EXPECTED[name])


def _phases_file(path: Path, count: int) -> Path:
    text = (HERE / "valid-anchors-and-unicode.yaml").read_text()
    head, _, tail = text.partition("pg:\n  phases:\n")
    rest = tail.split("\n", 1)[1]  # drop the one outage phase
    phases = "".join(
        f"    - {{name: p{i}, start: {i}ms, duration: 1ms, fault: {{type: healthy}}}}\n"
        for i in range(count)
    )
    path.write_text(head + "pg:\n  phases:\n" + phases + rest.replace("[outage]", ""))
    return path


def test_made_at_test_time(tmp_path: Path) -> None:
    big = tmp_path / "two-megabytes.yaml"
    big.write_text("name: big\ndescription: |\n" + "  lorem ipsum dolor sit amet\n" * 75_000)
    assert big.stat().st_size > 2_000_000
    _check(big, 2, "is 2,175,025 bytes; a scenario file may be at most 1 MiB")

    many = _phases_file(tmp_path / "phases-100000.yaml", 100_000)
    _check(many, 2, "a scenario file may be at most 1 MiB (1,048,576 bytes)")
    over = _phases_file(tmp_path / "phases-10001.yaml", 10_001)
    assert over.stat().st_size < 1024 * 1024
    _check(over, 2, "pg.phases: List should have at most 10000 items")

    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")
    _check(zero, 2, "is a device, not a regular scenario file")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert _check(fifo, 2, "is a FIFO (named pipe), not a regular scenario file") < TIMEOUT_S
    _check(tmp_path, 2, "is a directory, not a scenario file")
    _check(tmp_path / "missing.yaml", 2, "cannot read: No such file or directory")

    # Printed as it is, not read as rich markup ("[/b]" closes a tag never opened).
    (tmp_path / "a[").mkdir()
    markup = tmp_path / "a[" / "b].yaml"
    markup.write_bytes((HERE / "utf8-bom.yaml").read_bytes())
    _check(markup, 0, "a[/b].yaml: ok")


def test_proxy_schedules_are_read_the_same_way(tmp_path: Path) -> None:
    from harness.core.errors import ScenarioError
    from harness.proxy.toxics import load_schedule

    fifo = tmp_path / "schedule.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ScenarioError, match="is a FIFO"):
        load_schedule(fifo)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_bytes((HERE / "billion-laughs.yaml").read_bytes())
    with pytest.raises(ScenarioError, match="aliases expanded"):
        load_schedule(bomb)
