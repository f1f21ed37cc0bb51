"""Strict YAML into typed models, with every problem located at its file, line and column.

Scenarios and proxy schedules are read the same way: a pydantic model with
kebab-case keys that refuses unknown keys, validated from YAML whose node
positions are kept so that each pydantic error names a line. All problems are
reported at once, never just the first.

The reader is bounded before it builds anything: a file must be a regular
file of at most ``MAX_FILE_BYTES`` of UTF-8 text; the YAML is first read as a
stream of events (libyaml's, when present) that refuses nesting deeper than
``MAX_DEPTH`` and documents larger than ``MAX_NODES`` values with every alias
expanded (a "billion laughs" stops at the budget instead of filling memory);
only then is it composed and constructed. Floats must be finite everywhere.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails
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


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class StrictModel(BaseModel):
    """Strict base: unknown keys are errors, keys are kebab-case in YAML, floats are finite."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=_kebab, populate_by_name=True, allow_inf_nan=False
    )


YamlPath = tuple[str | int, ...]
"""Keys and list indices from the document's root to one node."""

_KEY = "\x00key"
"""Path suffix under which the index keeps a mapping key's own node (for unknown keys)."""


def short_repr(value: object, limit: int = 60) -> str:
    """``repr`` cut to ``limit`` characters; huge integers described, not converted."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"a {value.bit_length()}-bit integer"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_error(
    error: ErrorDetails, *, reference: str | None = None, quote_input: bool = False
) -> str:
    """One pydantic error in words for the person who wrote the input (without its location).

    Shared by YAML files and the gateway's live overrides, so both speak the
    same way. ``reference`` names the document listing the valid keys (an
    unknown key points there); ``quote_input`` appends the offending value
    when the message does not already show it.
    """
    if error["type"] == "extra_forbidden":
        return f"unknown key (check the spelling; see {reference})" if reference else "unknown key"
    if error["type"] == "missing":
        return "required key is missing"
    if error["type"] == "finite_number":
        return "must be a finite number (not .inf or .nan)"
    msg = str(error["msg"]).removeprefix("Value error, ")
    given = error.get("input")
    scalar = given is not None and not isinstance(given, dict | list)
    if quote_input and scalar and "got " not in msg:
        quoted = short_repr(given)
        if quoted not in msg:
            msg += f" (got {quoted})"
    return msg


def problem_at(file: str, node: yaml.Node | yaml.Event, field: str, message: str) -> Problem:
    """A problem located at ``node``'s first character (lines and columns count from 1)."""
    mark = node.start_mark
    if mark is None:
        return Problem(file, None, None, field, message)
    return Problem(file, mark.line + 1, mark.column + 1, field, message)


# ------------------------------------------------------------------ reading a file


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


class _Loader(_BaseLoader):  # type: ignore[misc]
    """YAML's safe loader (libyaml's when installed) whose constructors cannot crash.

    Any error a constructor raises (``!!bool maybe``, ``2024-02-30``, a
    5,000-digit integer) becomes a located ``ConstructorError``; timestamps
    stay strings (no scenario key is a date, and a date is not JSON).
    """

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


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    if len(str(node.value)) > MAX_NUMBER_CHARS:
        raise ConstructorError(
            None,
            None,
            f"a number of {len(str(node.value)):,} characters; at most {MAX_NUMBER_CHARS}",
            node.start_mark,
        )
    value: int = yaml.SafeLoader.construct_yaml_int(loader, node)
    return value


def _construct_timestamp(loader: _Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


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

    for event in yaml.parse(text, Loader=_Loader):
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


def _parse(text: str, file: str, index: dict[YamlPath, yaml.Node], problems: list[Problem]) -> Any:
    """The document's data, its nodes indexed by path; ``ScenarioError`` for what YAML refuses.

    Indexed before construction, which merges ``<<`` keys into the mapping nodes themselves.
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
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None
            _index_nodes(root, (), index, problems, file)
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


def _key_text(node: yaml.Node) -> str:
    # A key that is itself a list or a mapping: name its kind, never render it (it may be huge).
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    return "<mapping>" if isinstance(node, yaml.MappingNode) else "<list>"


def _index_nodes(
    node: yaml.Node,
    path: YamlPath,
    index: dict[YamlPath, yaml.Node],
    problems: list[Problem],
    file: str,
) -> None:
    """Map each key path to its YAML node, so errors can name a line; flag duplicate keys."""
    index[path] = node
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = _key_text(key_node)
            if key == "<<":
                continue
            if key in seen:
                problems.append(
                    problem_at(
                        file,
                        key_node,
                        ".".join(str(p) for p in (*path, key)),
                        "duplicate key (YAML would silently keep only the last one)",
                    )
                )
            seen.add(key)
            index[(*path, key, _KEY)] = key_node
            _index_nodes(value_node, (*path, key), index, problems, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_nodes(item, (*path, i), index, problems, file)


def _locate(loc: YamlPath, index: dict[YamlPath, yaml.Node]) -> tuple[YamlPath, yaml.Node]:
    """Follow a pydantic error location through the YAML; skip union tags absent from the file."""
    path: YamlPath = ()
    for part in loc:
        if (*path, part) in index:
            path = (*path, part)
    return path, index.get(path, index[()])


M = TypeVar("M", bound=BaseModel)


@dataclass
class Validated(Generic[M]):
    """A model validated from YAML, with the file's node index and problems found beside it."""

    model: M
    index: dict[YamlPath, yaml.Node]
    problems: list[Problem]

    def node(self, *paths: YamlPath) -> yaml.Node:
        """The node of the first path the file has, else the document's root."""
        return next((self.index[p] for p in paths if p in self.index), self.index[()])


def validate_yaml(
    model: type[M], text: str, file: str, *, expected: str, reference: str = "docs/scenario.md"
) -> Validated[M]:
    """Parse YAML into ``model``; raise ``ScenarioError`` listing every problem with its line.

    Shared by scenarios and proxy schedules. Duplicate keys are returned as
    ``problems`` (not raised) so callers can add checks of their own first.
    """
    problems: list[Problem] = []
    index: dict[YamlPath, yaml.Node] = {}
    data = _parse(text, file, index, problems)
    if not isinstance(data, dict):
        raise ScenarioError([Problem(file, 1, 1, "", f"expected {expected}")])
    try:
        validated = model.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            path, node = _locate(loc, index)
            if error["type"] == "extra_forbidden":
                node = index.get((*path, _KEY), node)
            missing_key = error["type"] == "missing"
            field = ".".join(str(p) for p in (path + loc[-1:] if missing_key else path))
            message = describe_error(error, reference=reference, quote_input=True)
            problems.append(problem_at(file, node, field, message))
        raise ScenarioError(problems) from None
    return Validated(validated, index, problems)
