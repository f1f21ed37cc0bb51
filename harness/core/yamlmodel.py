"""Strict YAML into typed models, with every problem located at its file, line and column.

Scenarios and proxy schedules are read the same way: a pydantic model with
kebab-case keys that refuses unknown keys, validated from YAML whose node
positions are kept so that each pydantic error names a line. All problems are
reported at once, never just the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from harness.core.errors import Problem, ScenarioError


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class StrictModel(BaseModel):
    """Strict base: unknown keys are errors, keys are kebab-case in YAML."""

    model_config = ConfigDict(extra="forbid", alias_generator=_kebab, populate_by_name=True)


YamlPath = tuple[str | int, ...]
"""Keys and list indices from the document's root to one node."""

_KEY = "\x00key"
"""Path suffix under which the index keeps a mapping key's own node (for unknown keys)."""


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
    msg = str(error["msg"]).removeprefix("Value error, ")
    given = error.get("input")
    scalar = given is not None and not isinstance(given, dict | list)
    if quote_input and scalar and repr(given) not in msg:
        msg += f" (got {given!r})"
    return msg


def problem_at(file: str, node: yaml.Node, field: str, message: str) -> Problem:
    """A problem located at ``node``'s first character (lines and columns count from 1)."""
    return Problem(file, node.start_mark.line + 1, node.start_mark.column + 1, field, message)


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
            key = str(key_node.value)
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
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        col = mark.column + 1 if mark is not None else None
        raise ScenarioError(
            [Problem(file, line, col, "", f"not valid YAML: {exc.problem}")]
        ) from None
    if root is None or not isinstance(data, dict):
        raise ScenarioError([Problem(file, 1, 1, "", f"expected {expected}")])

    problems: list[Problem] = []
    index: dict[YamlPath, yaml.Node] = {}
    _index_nodes(root, (), index, problems, file)
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
