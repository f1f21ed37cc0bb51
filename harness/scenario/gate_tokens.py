"""The gate language's words: how a name, a number with its unit and an operator are
spelled, the bounds on a gate's text, and the tokenizer the parser (``scenario.gates``)
reads; apart so the grammar's spelling is one short file."""

from __future__ import annotations

import re

MAX_GATE_CHARS = 1000
"""A gate's text; real gates are under 100 characters."""
MAX_GATE_TOKENS = 200
"""Numbers, names, operators and brackets of one gate."""
MAX_GATE_DEPTH = 32
"""Parentheses and unary minus nested in one gate."""

# ---------------------------------------------------------------- parsing

NAME_WORD = r"[A-Za-z_][A-Za-z0-9_-]*"
"""One part of a gate's name: how a build, an endpoint or a phase's part must be spelled."""
NAME_PATTERN = NAME_WORD + r"(?:\.(?:" + NAME_WORD + r"|\d+(?![A-Za-z0-9_-])))*"
"""A whole name: parts joined by dots, each a word or a replica's index."""
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d+)?)(?P<unit>ms|s|m|%)?(?![A-Za-z0-9_])"
    r"|(?P<cmp><=|>=|==|!=|<|>)"
    r"|(?P<op>[-+*/()\[\]])"
    r"|(?P<name>" + NAME_PATTERN + r"))"
)


class GateSyntaxError(ValueError):
    """The gate's text does not follow the grammar, or names something that does not exist."""


def tokens(text: str) -> list[tuple[str, str, str | None]]:
    """The gate's tokens: (kind, text, unit) with kind num, cmp, op or name; bounded."""
    out: list[tuple[str, str, str | None]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            rest = text[pos:] if len(text) - pos <= 40 else text[pos : pos + 37] + "..."
            raise GateSyntaxError(f"cannot read {rest!r} (at character {pos + 1})")
        pos = match.end()
        kind = match.lastgroup if match.lastgroup != "unit" else "num"
        if match.group("num") is not None:
            out.append(("num", match.group("num"), match.group("unit")))
        elif kind is not None:
            out.append((kind, match.group(kind), None))
        if len(out) > MAX_GATE_TOKENS:
            raise GateSyntaxError(
                f"a gate has at most {MAX_GATE_TOKENS} numbers, names and operators; "
                "split it into several gates"
            )
    return out
