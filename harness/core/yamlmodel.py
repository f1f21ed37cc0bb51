"""Strict YAML into typed models, with every problem located at its file, line and column.

Scenarios and proxy schedules are read the same way: a pydantic model with
kebab-case keys that refuses unknown keys, validated from YAML whose node
positions are kept so that each pydantic error names a line. All problems are
reported at once, in the file's order, never just the first. Reading the text
(bounded, by YAML 1.2's core schema) is ``harness.core.yamlread``.

One spelling per key and one type per value: a file's keys are the
kebab-case aliases only (``read_timeout`` is an unknown key, with "did you
mean ``read-timeout``?"), and a number is a number: ``true`` is not 1, ``"3"``
is not 3, ``1`` is not true (``StrictModel``'s numbers and booleans are
pydantic-strict wherever the models live). Floats are finite everywhere.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler, ValidationError
from pydantic_core import CoreSchema, ErrorDetails

from harness.core.errors import Problem, ScenarioError
from harness.core.yamlkeys import keys_at
from harness.core.yamlread import (
    DIFFERS_TAG,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_NODES,
    MAX_NUMBER_CHARS,
    decode_text,
    display_name,
    parse_yaml,
    problem_at,
    read_text_file,
    short_repr,
    yaml11_difference,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "MAX_NUMBER_CHARS",
    "StrictModel",
    "Validated",
    "decode_text",
    "describe_error",
    "display_name",
    "in_file_order",
    "problem_at",
    "read_text_file",
    "short_repr",
    "validate_yaml",
]


def _kebab(name: str) -> str:
    return name.replace("_", "-")


_STRICT_TYPES = frozenset({"int", "float", "bool"})


def _strict_scalars(schema: Any, seen: set[int]) -> None:
    """Mark every int, float and bool of a core schema strict (a mapping's keys excepted:
    JSON keys are text, so ``{"503": 1}`` from a live override stays a status code)."""
    if id(schema) in seen:
        return
    seen.add(id(schema))
    if isinstance(schema, dict):
        kind = schema.get("type")  # a schema's kind; in a mapping of fields, maybe a field
        if isinstance(kind, str) and kind in _STRICT_TYPES:
            schema["strict"] = True
        for key, value in schema.items():
            if not (key == "keys_schema" and kind == "dict"):
                _strict_scalars(value, seen)
    elif isinstance(schema, list):
        for value in schema:
            _strict_scalars(value, seen)


class StrictModel(BaseModel):
    """Strict base: unknown keys are errors, keys are kebab-case in YAML, floats are finite,
    and numbers and booleans are only what they say (``true`` is not 1, ``"3"`` is not 3)."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=_kebab, populate_by_name=True, allow_inf_nan=False
    )

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[BaseModel], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        # Pydantic's lax mode reads True as 1 and "3" as 3; a scenario's numbers are numbers.
        # Strict for these types only: strict mode would also refuse a YAML list as a tuple.
        schema = handler(source)
        _strict_scalars(schema, set())
        return schema


YamlPath = tuple[str | int, ...]
"""Keys and list indices from the document's root to one node."""

_KEY = "\x00key"
"""Path suffix under which the index keeps a mapping key's own node (for unknown keys)."""

_STRICT_MESSAGES = {
    "int_type": "expected an integer (a whole number)",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "string_type": "expected text",
}


def describe_error(
    error: ErrorDetails,
    *,
    reference: str | None = None,
    quote_input: bool = False,
    known: list[str] | None = None,
) -> str:
    """One pydantic error in words for the person who wrote the input (without its location).

    Shared by YAML files and the gateway's live overrides, so both speak the
    same way. ``reference`` names the document listing the valid keys (an
    unknown key points there); ``known``: the keys allowed where an unknown
    key was found (the closest is suggested); ``quote_input`` appends the
    offending value when the message does not already show it.
    """
    if error["type"] == "extra_forbidden":
        return _unknown_key(str(error["loc"][-1]) if error["loc"] else "", known, reference)
    if error["type"] == "missing":
        return "required key is missing"
    if error["type"] == "finite_number":
        return "must be a finite number (not .inf or .nan)"
    given = error.get("input")
    if error["type"] in _STRICT_MESSAGES and isinstance(given, bool | str | float | int):
        return _wrong_type(error["type"], given)
    msg = str(error["msg"]).removeprefix("Value error, ")
    scalar = given is not None and not isinstance(given, dict | list)
    if quote_input and scalar and "got " not in msg:
        quoted = short_repr(given)
        if quoted not in msg:
            msg += f" (got {quoted})"
    return msg


def _wrong_type(kind: str, given: bool | str | float | int) -> str:
    expected = _STRICT_MESSAGES[kind]
    if kind == "string_type":  # YAML 1.2 reads a plain 09 or 1e3 as a number, true as true
        shown = str(given).lower() if isinstance(given, bool) else f"a number ({short_repr(given)})"
        return f"{expected}, got {shown}: quote it for text"
    if isinstance(given, bool):
        return f"{expected}, got {str(given).lower()} (a yes/no value is not a number)"
    if isinstance(given, str):
        quoted = short_repr(given)
        return f"{expected}, got the text {quoted}" + (
            " (a number is written without quotes)" if kind != "bool_type" else ""
        )
    return f"{expected}, got {short_repr(given)}"


def _unknown_key(key: str, known: list[str] | None, reference: str | None) -> str:
    """``unknown key``, the closest allowed spelling when there is one, and where to look."""
    text = "unknown key"
    close = difflib.get_close_matches(key, known or [], n=1, cutoff=0.6)
    if not close and known and key.replace("_", "-") in known:
        close = [key.replace("_", "-")]
    if close:
        text += f"; did you mean `{close[0]}`?"
    if reference:
        text += f" (check the spelling; see {reference})" if not close else f" (see {reference})"
    return text


def in_file_order(problems: list[Problem]) -> list[Problem]:
    """Problems by line and column (those without a line first: they are about the file)."""
    return sorted(problems, key=lambda p: (p.line is not None, p.line or 0, p.column or 0))


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
    """Map each key path to its YAML node, so errors can name a line; flag duplicate keys
    and values YAML 1.1 reads otherwise (``harness.core.yamlread.yaml11_difference``)."""
    index[path] = node
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = _key_text(key_node)
            if key == "<<":
                continue
            field = ".".join(str(p) for p in (*path, key))
            if key in seen:
                problems.append(
                    problem_at(
                        file,
                        key_node,
                        field,
                        "duplicate key (YAML would silently keep only the last one)",
                    )
                )
            seen.add(key)
            index[(*path, key, _KEY)] = key_node
            _index_nodes(value_node, (*path, key), index, problems, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_nodes(item, (*path, i), index, problems, file)
    else:
        _flag_yaml11(node, ".".join(str(p) for p in path), problems, file)


def _flag_yaml11(node: yaml.Node, field: str, problems: list[Problem], file: str) -> None:
    # Values only: a key is a name (``on:``, ``ON:`` in env), and YAML 1.2's text is meant.
    if isinstance(node, yaml.ScalarNode) and node.tag == DIFFERS_TAG:
        message = yaml11_difference(node.value) or "YAML 1.1 reads it otherwise"
        problems.append(problem_at(file, node, field, message))


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
        """The node of the first path the file has, else of the first path's nearest
        ancestor in the file (a default the file does not write is said at its parent)."""
        found = next((self.index[p] for p in paths if p in self.index), None)
        if found is not None:
            return found
        nearest = paths[0] if paths else ()
        while nearest and nearest not in self.index:
            nearest = nearest[:-1]
        return self.index.get(nearest, self.index[()])

    def key_node(self, path: YamlPath) -> yaml.Node:
        """The node of the key that ends ``path`` (a mapping's key: an endpoint's, a build's
        name), else ``node(path)``."""
        return self.index.get((*path, _KEY)) or self.node(path)


def validate_yaml(
    model: type[M], text: str, file: str, *, expected: str, reference: str = "docs/scenario.md"
) -> Validated[M]:
    """Parse YAML into ``model``; raise ``ScenarioError`` listing every problem with its line.

    Shared by scenarios and proxy schedules. Duplicate keys are returned as
    ``problems`` (not raised) so callers can add checks of their own first.
    """
    problems: list[Problem] = []
    index: dict[YamlPath, yaml.Node] = {}
    data = parse_yaml(text, file, lambda root: _index_nodes(root, (), index, problems, file))
    if not isinstance(data, dict):
        raise ScenarioError([Problem(file, 1, 1, "", f"expected {expected}")])
    try:
        # by_name=False: the file's keys are the aliases only (read-timeout, never read_timeout)
        validated = model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        # A value refused for its YAML 1.1 reading is said once, not again as a wrong type.
        said = {
            (n.start_mark.line + 1, n.start_mark.column + 1)
            for n in index.values()
            if isinstance(n, yaml.ScalarNode) and n.tag == DIFFERS_TAG
        }
        for error in exc.errors():
            loc = tuple(error["loc"])
            path, node = _locate(loc, index)
            known = None
            if error["type"] == "extra_forbidden":
                node = index.get((*path, _KEY), node)
                known = keys_at(model, loc[:-1])
            missing_key = error["type"] == "missing"
            field = ".".join(str(p) for p in (path + loc[-1:] if missing_key else path))
            message = describe_error(error, reference=reference, quote_input=True, known=known)
            problem = problem_at(file, node, field, message)
            if (problem.line, problem.column) not in said or missing_key:
                problems.append(problem)
        raise ScenarioError(in_file_order(problems)) from None
    return Validated(validated, index, problems)
