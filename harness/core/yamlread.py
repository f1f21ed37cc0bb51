"""Reading YAML text, bounded, by the YAML 1.2 core schema: file, events, nodes, data.

The reader is bounded before it builds anything: a file must be a regular
file of at most ``MAX_FILE_BYTES`` of UTF-8 text; the YAML is first read as a
stream of events (libyaml's, when present) that refuses nesting deeper than
``MAX_DEPTH`` and documents larger than ``MAX_NODES`` values with every alias
expanded (a "billion laughs" stops at the budget instead of filling memory);
only then is it composed and constructed.

Plain scalars are resolved as YAML 1.2's core schema says (``010`` is ten,
``yes`` and ``on`` are text, ``1e3`` is a number), not as PyYAML's YAML 1.1
would. Where the two readings of a value differ (``yes``, ``on``, ``010``,
``0b11``, ``1_000``, ``1:30``) it is refused with both meanings named
(``yaml11_difference``, said by ``harness.core.yamlmodel``), because a file
written for a YAML 1.1 tool would otherwise change a value without a word.
Keys are names and read as 1.2's text (``ON:`` in ``env`` is ``"ON"``).
Explicit tags (``!!str yes``) and quoted text are taken as written.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from harness.core.errors import Problem, ScenarioError

MAX_FILE_BYTES = 1024 * 1024
"""A scenario or schedule file may be at most 1 MiB (real ones are a few KB)."""
MAX_DEPTH = 64
"""Mappings and lists nested at most this deep, aliases expanded (a scenario needs about 8)."""
MAX_NODES = 250_000
"""At most this many values (keys, scalars, lists, mappings) with every alias expanded."""
MAX_NUMBER_CHARS = 100
"""An integer written with more characters than this is refused before Python converts it."""


def short_repr(value: object, limit: int = 60) -> str:
    """``repr`` cut to ``limit`` characters; huge integers described, not converted."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"a {value.bit_length()}-bit integer"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def problem_at(file: str, node: yaml.Node | yaml.Event, field: str, message: str) -> Problem:
    """A problem located at ``node``'s first character (lines and columns count from 1)."""
    mark = node.start_mark
    if mark is None:
        return Problem(file, None, None, field, message)
    return Problem(file, mark.line + 1, mark.column + 1, field, message)


def read_text_file(path: str | Path, *, what: str = "scenario") -> str:
    """The UTF-8 text of a regular file of at most ``MAX_FILE_BYTES``; else ``ScenarioError``.

    Refused before anything is parsed, each with one line naming the file: not a
    regular file (checked with ``stat`` before opening, so a FIFO cannot block
    and ``/dev/zero`` is never read), too large, UTF-16/32 (a byte-order mark),
    NUL bytes, or bytes that are not UTF-8. A UTF-8 byte-order mark is dropped.
    """
    name = display_name(path)

    def refuse(message: str) -> ScenarioError:
        return ScenarioError([Problem(name, None, None, "", message)])

    try:
        _check_regular(os.stat(path), what, refuse)
        # O_NONBLOCK: should the path be swapped for a FIFO after the stat, open still returns.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            _check_regular(os.fstat(fd), what, refuse)
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        reason = exc.strerror or os.strerror(exc.errno or errno.EIO)
        raise refuse(f"cannot read: {reason}") from None
    if len(data) > MAX_FILE_BYTES:
        raise refuse(f"the file grew past {_limit()} while being read")
    return decode_text(data, refuse)


def _limit() -> str:
    return f"{MAX_FILE_BYTES // 1024 // 1024} MiB ({MAX_FILE_BYTES:,} bytes)"


def _check_regular(st: os.stat_result, what: str, refuse: Any) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise refuse(f"is a directory, not a {what} file")
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "a socket"
            if stat.S_ISSOCK(st.st_mode)
            else "not a regular file"
        )
        raise refuse(f"is {kind}, not a regular {what} file")
    if st.st_size > MAX_FILE_BYTES:
        raise refuse(f"is {st.st_size:,} bytes; a {what} file may be at most {_limit()}")


_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}


def decode_text(data: bytes, refuse: Any) -> str:
    """Bytes to text, refusing what a YAML file of ours cannot be (see ``read_text_file``)."""
    for bom, encoding in _BOMS.items():
        if data.startswith(bom):
            raise refuse(f"is {encoding} text (it starts with a byte-order mark); save it as UTF-8")
    nul = data.find(b"\x00")
    if 0 <= nul < 4:
        raise refuse(
            "looks like UTF-16 or UTF-32 text (NUL bytes between letters); save it as UTF-8"
        )
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise refuse(f"contains a NUL byte (line {line}, byte {nul + 1}); is it a binary file?")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.start + 1].hex()
        raise refuse(
            f"is not UTF-8 text (byte 0x{bad} at line {line}, byte {exc.start + 1}); "
            "save it as UTF-8"
        ) from None


def display_name(path: str | Path) -> str:
    """A path as text that can always be printed (undecodable bytes shown as ``\\xNN``)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


# ------------------------------------------------------------------ parsing, bounded

_BaseLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_T = "tag:yaml.org,2002:"
_CORE = re.compile(
    r"(?P<null>~|null|Null|NULL|)"
    r"|(?P<bool>true|True|TRUE|false|False|FALSE)"
    r"|(?P<int>[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)"
    r"|(?P<float>[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)"
    r"|\.(nan|NaN|NAN))"
)
"""YAML 1.2's core schema: which plain scalars are not text (the group names their tag)."""
_CORE_FIRST = frozenset("~nNtTfF-+.0123456789")
DIFFERS_TAG = "tag:harness,2026:yaml-1.1-differs"
"""Given to a plain scalar that YAML 1.1 and 1.2 read as different values (a problem)."""


def core_tag(value: str) -> str:
    """The tag YAML 1.2's core schema gives a plain scalar."""
    if value and value[0] not in _CORE_FIRST:
        return _T + "str"
    match = _CORE.fullmatch(value)
    return _T + (match.lastgroup or "str") if match else _T + "str"


def _core_int(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if digits[:2] in ("0o", "0x"):
        return sign * int(digits[2:], 8 if digits[1] == "o" else 16)
    return sign * int(digits, 10)


def _core_float(text: str) -> float:
    lowered = text.lower()
    if lowered.lstrip("+-") == ".inf":
        return -math.inf if lowered.startswith("-") else math.inf
    if lowered == ".nan":
        return math.nan
    return float(text)


def _core_bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise KeyError(text)  # YAML 1.2: true or false, nothing else
    return text.lower() == "true"


def _core_value(value: str) -> Any:
    """What YAML 1.2 reads a plain scalar as (the length of numbers is checked by the caller)."""
    tag = core_tag(value).removeprefix(_T)
    readers: dict[str, Callable[[str], Any]] = {
        "null": lambda _: None,
        "bool": _core_bool,
        "int": _core_int,
        "float": _core_float,
    }
    return readers.get(tag, str)(value)


_YAML11_RESOLVER = yaml.resolver.Resolver()
_YAML11_CONSTRUCTOR = yaml.constructor.SafeConstructor()
"""PyYAML's own YAML 1.1 readings, to compare with (they read no stream)."""


def _yaml11_value(value: str) -> tuple[bool, Any]:
    """(whether YAML 1.1 reads it as other than text, what it reads)."""
    tag = _YAML11_RESOLVER.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    if tag not in (_T + "null", _T + "bool", _T + "int", _T + "float"):
        return False, value
    construct = _YAML11_CONSTRUCTOR.yaml_constructors[tag]
    try:
        return True, construct(_YAML11_CONSTRUCTOR, yaml.ScalarNode(tag, value))
    except (ValueError, OverflowError):  # 0b_ or 0x_: PyYAML's own reader fails on it
        return False, value


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def yaml11_difference(value: str) -> str | None:
    """Why a plain scalar is refused: YAML 1.1 reads it as another value than 1.2 (else None).

    Only where 1.1 reads a value that is not text: a plain ``09`` or ``1e3`` is
    text in 1.1 and a number in 1.2, which a number field reads alike and a
    text field refuses either way.
    """
    if len(value) > MAX_NUMBER_CHARS:
        return None  # refused by its length when it is constructed
    typed, old = _yaml11_value(value)
    if not typed:
        return None
    new = _core_value(value)
    if _same(old, new):
        return None
    was = str(old).lower() if isinstance(old, bool) else repr(old)
    now = f"the text {value!r}" if isinstance(new, str) else repr(new)
    how = " (base 60)" if ":" in value else " (octal)" if isinstance(new, int) else ""
    said = f"`{value}` is {was}{how} in YAML 1.1 but {now} in YAML 1.2 (which the harness reads)"
    if isinstance(old, bool):
        hint = "write true or false"
    elif isinstance(old, int) and isinstance(new, int):  # a leading zero: octal in 1.1
        hint = f"write {new} (decimal) or 0o{value.lstrip('+-0')} (octal {old})"
    else:
        hint = f"write {was}" + (" or a duration such as 1m30s" if ":" in value else "")
    return f"{said}: {hint}, or quote it for text"


class Loader(_BaseLoader):  # type: ignore[misc]
    """YAML's safe loader (libyaml's when installed), YAML 1.2 core schema, that cannot crash.

    Any error a constructor raises (``!!bool maybe``, a 5,000-digit integer)
    becomes a located ``ConstructorError``; timestamps stay strings (no
    scenario key is a date, and a date is not JSON).
    """

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0] and value != "<<":
            return DIFFERS_TAG if yaml11_difference(value) else core_tag(value)
        return str(super().resolve(kind, value, implicit))

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            value = short_repr(node.value) if isinstance(node, yaml.ScalarNode) else "this"
            tag = node.tag.rsplit(":", 1)[-1]
            raise ConstructorError(
                None, None, f"cannot read {value} as {tag} ({exc})", node.start_mark
            ) from None


def _number(read: Callable[[str], Any]) -> Callable[[Loader, yaml.ScalarNode], Any]:
    def construct(loader: Loader, node: yaml.ScalarNode) -> Any:
        text = str(loader.construct_scalar(node))
        if len(text) > MAX_NUMBER_CHARS:
            raise ConstructorError(
                None,
                None,
                f"a number of {len(text):,} characters; at most {MAX_NUMBER_CHARS}",
                node.start_mark,
            )
        return read(text)

    return construct


def _construct_text(loader: Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


Loader.add_constructor(_T + "int", _number(_core_int))
Loader.add_constructor(_T + "float", _number(_core_float))
Loader.add_constructor(_T + "bool", lambda loader, node: _core_bool(loader.construct_scalar(node)))
Loader.add_constructor(_T + "timestamp", _construct_text)
# A value both YAMLs disagree on is a problem said at its line; as data it is its text.
Loader.add_constructor(DIFFERS_TAG, _construct_text)


@dataclass
class _Open:
    """A mapping or list still open in the event stream: its size and height so far."""

    anchor: str | None
    size: int = 1
    height: int = 0


def _check_shape(text: str, file: str) -> None:
    """Refuse deep nesting and alias bombs from the event stream, before any node is built.

    Each value's size (values inside it, aliases expanded) and height (levels
    below it) is kept for every anchor, so an alias counts what it would
    expand to without expanding it.
    """
    stack: list[_Open] = []
    anchors: dict[str, tuple[int, int]] = {}
    total = 0

    def refuse(event: yaml.Event, message: str) -> ScenarioError:
        return ScenarioError([problem_at(file, event, "", message)])

    for event in yaml.parse(text, Loader=Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append(_Open(event.anchor))
            total += 1
            if len(stack) > MAX_DEPTH:
                raise refuse(event, f"nested more than {MAX_DEPTH} levels deep")
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            done = stack.pop()
            size, height = done.size, done.height
            if done.anchor is not None:
                anchors[done.anchor] = (size, height)
        elif isinstance(event, yaml.AliasEvent):
            if any(o.anchor == event.anchor for o in stack):
                raise refuse(event, f"alias *{event.anchor} refers to a value that contains it")
            # An undefined alias is left to the composer, which says so with its line.
            size, height = anchors.get(str(event.anchor), (1, 0))
            total += size
            if len(stack) + height > MAX_DEPTH:
                raise refuse(
                    event,
                    f"alias *{event.anchor} nests values more than {MAX_DEPTH} levels deep",
                )
        elif isinstance(event, yaml.ScalarEvent):
            size, height = 1, 0
            total += 1
            if event.anchor is not None:
                anchors[event.anchor] = (size, height)
        else:
            continue
        if total > MAX_NODES:
            raise refuse(
                event,
                f"more than {MAX_NODES:,} values (aliases expanded); "
                "is an alias repeated on purpose?",
            )
        if stack:
            stack[-1].size += size
            stack[-1].height = max(stack[-1].height, height + 1)


def parse_yaml(text: str, file: str, visit: Callable[[yaml.Node], None]) -> Any:
    """The document's data; ``ScenarioError`` for what YAML refuses.

    ``visit`` sees the root node before construction, which merges ``<<`` keys
    into the mapping nodes themselves (so duplicate keys are still visible).
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        raise ScenarioError(
            [Problem(file, None, None, "", f"is {size:,} bytes; at most {_limit()}")]
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ScenarioError(
            [Problem(file, None, None, "", f"is not valid Unicode (character {exc.start + 1})")]
        ) from None
    if "\x00" in text:
        raise ScenarioError([Problem(file, None, None, "", "contains a NUL character")])
    try:
        _check_shape(text, file)
        loader = Loader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None
            visit(root)
            data = loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        what = exc.problem or exc.context or "cannot be read"
        if exc.problem and exc.context:
            what = f"{exc.problem} ({exc.context})"
        if "maximum nesting depth" in what:  # libyaml's own bound, 1,000: ours is lower
            what = f"nested more than {MAX_DEPTH} levels deep"
        raise ScenarioError([Problem(file, line, col, "", f"not valid YAML: {what}")]) from None
    except yaml.reader.ReaderError as exc:
        pos = max(0, min(exc.position, len(text)))
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise ScenarioError(
            [Problem(file, line, col, "", f"not valid YAML: {exc.reason} (character {pos + 1})")]
        ) from None
    except yaml.YAMLError as exc:
        raise ScenarioError([Problem(file, None, None, "", f"not valid YAML: {exc}")]) from None
    return data
