"""The docs a newcomer reads first stay short and their links lead somewhere.

README.md is the front door (what it is, the commands, a scenario and a report in short,
links); the detail lives under docs/. Every relative link in README.md and docs/ must name a
file that exists, and a ``#fragment`` into a Markdown file must name one of its headings (as
GitHub makes anchors of them), so moving a section breaks a test rather than a reader's click.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 260
"""README.md's budget: a front door, not the manual (issue 18 asks for about 250)."""

_LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _prose(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a Markdown file (a repeated one gets ``-1``, ``-2``...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _prose(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: target: why`` for each relative link of ``path`` that leads nowhere."""
    problems = []
    for number, line in _prose(path.read_text(encoding="utf-8")):
        for match in _LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, fragment = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                problems.append(f"{where}: no such file {linked.relative_to(root)}")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                problems.append(f"{where}: no heading with that anchor in {linked.name}")
    return problems


@pytest.mark.parametrize("path", _docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(path: Path) -> None:
    assert broken_links(path) == []


def test_readme_is_a_front_door_not_the_manual() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


def test_the_checker_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    """The check itself can fail: a link to a file that is not there, or to a heading
    the file does not have, is reported with its line; one inside a code block is not."""
    doc = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## `pg.phases[]`: the schedule\n")
    doc.write_text(
        "# Page\n"
        "[ok](other.md#pgphases-the-schedule) [self](#page)\n"
        "[gone](missing.md) [no heading](other.md#nowhere)\n"
        "```\n[in code](missing.md)\n```\n"
    )
    assert broken_links(doc, tmp_path) == [
        "page.md:3: missing.md: no such file missing.md",
        "page.md:3: other.md#nowhere: no heading with that anchor in other.md",
    ]


def test_slug_matches_githubs_anchors() -> None:
    assert (
        slug("`builds.<name>`: a variant of the service") == "buildsname-a-variant-of-the-service"
    )
    assert slug("Load workers: `harness run --workers N`") == "load-workers-harness-run---workers-n"
    assert slug("Seed 003 reproduced") == "seed-003-reproduced"
