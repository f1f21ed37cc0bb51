"""What an endpoint's requests carry beyond a method and a path: the requests a real client sends.

``traffic.<ep>`` may give (all optional; without them an endpoint sends what it
always did):

- ``headers``: name -> value; a value is text (a template, ``harness.scenario.templating``)
  or ``{env: NAME}`` (``prefix`` before it, e.g. ``"Bearer "``): a secret read by the load
  generator from its own environment when it sends. Only the variable's name is
  written anywhere (scenario copy, ``plan.json``, manifest, report); a variable not
  set is refused before any load;
- ``query``: name -> value of the query string (text, a template, a number, true/false,
  or ``{env: NAME}``);
- ``requests``: a weighted mix of requests instead of one ``path``: each its own
  ``path`` and maybe ``method``, ``body``, ``headers`` and ``query`` (the endpoint's
  own apply where it gives none; its headers and query are merged over the
  endpoint's). Which one a request is comes from the seeded per-request draw;
- ``data``: rows of a CSV file (its first line names the columns, relative to the
  scenario file's folder) taken ``cycle`` (row ``index mod rows``) or ``random``
  (seeded); each column is a template variable.

One model for both sides, as ``ClientRetry``: the load plan carries
``RequestShape`` itself (``harness.load.plan.EndpointPlan.shape``, ``model_dump`` into
``plan.json`` and ``model_validate`` back), and the rows of the data file beside it.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator

from harness.core.yamlmodel import StrictModel
from harness.scenario.bounds import MAX_WEIGHT, check_json, check_path
from harness.scenario.templating import BUILTINS, is_template, names_used

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
YamlPath = tuple[str | int, ...]

MAX_VARIANTS = 100
"""Requests in one endpoint's mix."""
MAX_HEADERS = 100
"""Headers (or query parameters) of one request."""
MAX_VALUE_CHARS = 8192
"""A header or query value, as written."""
MAX_DATA_BYTES = 8 * 1024 * 1024
"""A data file: its rows are copied into each build's ``plan.json`` and sent to every worker."""
MAX_DATA_ROWS = 100_000

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""A header name (RFC 9110's token)."""
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
"""Headers the load generator's HTTP client writes itself (framing and connection reuse)."""


def _env_name(name: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(
            f"env {name[:40]!r} is not an environment variable's name (letters, digits and "
            "'_', not starting with a digit)"
        )
    return name


def _one_line(text: str) -> str:
    """A header or query value as written: one line, no control characters."""
    if len(text) > MAX_VALUE_CHARS:
        raise ValueError(f"a value has at most {MAX_VALUE_CHARS} characters, this one {len(text)}")
    for i, c in enumerate(text):
        if not c.isprintable() and c != "\t":
            raise ValueError(f"contains the control character {c!r} (at character {i + 1})")
    return text


class FromEnv(StrictModel):
    """A value read from the load generator's environment when it sends (a token, a key):
    the scenario and everything the run writes hold the variable's name, never its value."""

    env: Annotated[str, AfterValidator(_env_name)] = Field(
        description="the environment variable's name; harness run refuses to start when it "
        "is not set"
    )
    prefix: Annotated[str, AfterValidator(_one_line)] = Field(
        "", description='written before the value, e.g. "Bearer "'
    )


Text = Annotated[str, AfterValidator(_one_line)]
HeaderValue = Text | FromEnv
QueryValue = Text | bool | int | float | FromEnv


def _check_headers(headers: dict[str, Any]) -> dict[str, Any]:
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} headers, not {len(headers)}")
    seen: set[str] = set()
    for name in headers:
        if not _TOKEN.fullmatch(name):
            raise ValueError(f"header name {name[:40]!r}: letters, digits and !#$%&'*+.^_`|~- only")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(
                f"header {name}: the load generator's HTTP client writes it itself (Host, "
                "Content-Length, Transfer-Encoding and Connection are not given)"
            )
        if name.lower() in seen:
            raise ValueError(f"header {name} given twice (names are case-insensitive)")
        seen.add(name.lower())
    return headers


def _check_query(query: dict[str, Any]) -> dict[str, Any]:
    if len(query) > MAX_HEADERS:
        raise ValueError(f"at most {MAX_HEADERS} query parameters, not {len(query)}")
    for name in query:
        _one_line(name)
    return query


Headers = Annotated[dict[str, HeaderValue], AfterValidator(_check_headers)]
Query = Annotated[dict[str, QueryValue], AfterValidator(_check_query)]


class Variant(StrictModel):
    """One request of an endpoint's weighted mix (``requests:``)."""

    weight: float = Field(1.0, gt=0, le=MAX_WEIGHT, description="its share of the requests")
    method: Method | None = Field(None, description="default: the endpoint's method")
    path: str = Field(description="its path; placeholders are the endpoint's params")
    headers: Headers = Field(
        default_factory=dict, description="merged over the endpoint's headers (same name: this)"
    )
    query: Query = Field(default_factory=dict, description="merged over the endpoint's query")
    body: dict[str, Any] | None = Field(None, description="default: the endpoint's body")

    @field_validator("body")
    @classmethod
    def _body_is_json(cls, body: dict[str, Any] | None) -> dict[str, Any] | None:
        return check_json(body, "body")


class DataFile(StrictModel):
    """Rows of a CSV file whose columns are template variables, one row per request."""

    file: str = Field(
        min_length=1, description="a CSV file (first line: the columns), relative to the "
        "scenario file's folder"
    )  # fmt: skip
    order: Literal["cycle", "random"] = Field(
        "cycle", description="cycle: row (request index mod rows); random: a seeded draw"
    )


class RequestShape(StrictModel):
    """Headers, query, a mix of requests and a data file: an endpoint's keys that make the
    requests a real client sends (``harness.scenario.schema.Endpoint`` has them all)."""

    headers: Headers = Field(
        default_factory=dict,
        description="header name -> text (a template) or {env: NAME, prefix: ...}, a secret "
        "read from the load generator's environment",
    )
    query: Query = Field(
        default_factory=dict, description="query-string parameters: name -> value (a template)"
    )
    requests: list[Variant] | None = Field(
        None,
        min_length=1,
        max_length=MAX_VARIANTS,
        description="a weighted mix of requests instead of one path (seeded per request)",
    )
    data: DataFile | None = Field(
        None, description="rows of a CSV file; its columns are template variables"
    )

    @property
    def shaped(self) -> bool:
        """Whether any key of the shape is given (else the endpoint sends as it always did)."""
        return bool(self.headers or self.query or self.requests or self.data)

    def env_names(self) -> Iterator[tuple[YamlPath, str]]:
        """Every ``{env: NAME}`` of the shape: where it is (under the endpoint) and its name."""
        for at, value in self._values():
            if isinstance(value, FromEnv):
                yield (*at, "env"), value.env

    def _values(self) -> Iterator[tuple[YamlPath, Any]]:
        """Every header and query value, with its path under the endpoint."""
        for key, values in (("headers", self.headers), ("query", self.query)):
            for name, value in values.items():
                yield (key, name), value
        for i, variant in enumerate(self.requests or ()):
            for key, values in (("headers", variant.headers), ("query", variant.query)):
                for name, value in values.items():
                    yield ("requests", i, key, name), value


def template_texts(
    shape: RequestShape, body: Any
) -> Iterator[tuple[YamlPath, str]]:  # fmt: skip
    """Every template of an endpoint (header, query and body values), with its path."""
    for at, value in shape._values():
        if isinstance(value, str) and is_template(value):
            yield at, value
    yield from _body_templates(("body",), body)
    for i, variant in enumerate(shape.requests or ()):
        yield from _body_templates(("requests", i, "body"), variant.body)


def _body_templates(at: YamlPath, value: Any) -> Iterator[tuple[YamlPath, str]]:
    if isinstance(value, str) and is_template(value):
        yield at, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _body_templates((*at, key), item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _body_templates((*at, i), item)


def shape_problems(
    shape: RequestShape,
    *,
    path: str | None,
    params: Mapping[str, Any],
    body: Any,
    idempotency_key: bool,
    columns: Collection[str] | None,
) -> list[tuple[YamlPath, str]]:
    """An endpoint's shape checked against its path, params and body: (path under the
    endpoint, message). ``columns``: the data file's, or None when it was not read (then a
    name no param or builtin gives is left for ``file_problems`` to check)."""
    found: list[tuple[YamlPath, str]] = []
    if shape.requests is not None:
        if path is not None:
            found.append(
                (("path",), "path and requests both given: give path (one request) or "
                 "requests (a weighted mix, each with its path), not both")
            )  # fmt: skip
        for i, variant in enumerate(shape.requests):
            try:
                check_path(variant.path, dict(params))
            except ValueError as exc:
                found.append((("requests", i, "path"), str(exc)))
    elif path is None:
        found.append((("path",), "give path (or requests: a weighted mix of requests)"))
    keyed = [
        at
        for at, _ in (
            *((("headers", n), v) for n, v in shape.headers.items()),
            *(
                (("requests", i, "headers", n), v)
                for i, r in enumerate(shape.requests or ())
                for n, v in r.headers.items()
            ),
        )
        if str(at[-1]).lower() == "idempotency-key"
    ]
    if idempotency_key and keyed:
        found += [
            (at, "idempotency-key: true sends this header already; drop one of the two")
            for at in keyed
        ]
    taken = sorted(set(params) & set(BUILTINS))
    if taken:
        found.append(
            (("params",), f"params {taken} shadow the template names {list(BUILTINS)}: rename")
        )
    return found + template_problems(shape, params=params, body=body, columns=columns)


def template_problems(
    shape: RequestShape, *, params: Mapping[str, Any], body: Any, columns: Collection[str] | None
) -> list[tuple[YamlPath, str]]:
    """Templates that do not parse or use a name nothing gives (``columns`` None: the data
    file was not read, so a name might be a column and is left for ``data_problems``)."""
    found: list[tuple[YamlPath, str]] = []
    known = set(params) | set(BUILTINS) | set(columns or ())
    for at, text in template_texts(shape, body):
        try:
            used = names_used(text)
        except ValueError as exc:
            found.append((at, str(exc)))
            continue
        unknown = sorted(used - known)
        if unknown and (columns is not None or shape.data is None):
            found.append((at, _unknown_message(unknown, params, columns, shape.data)))
    return found


def _unknown_message(
    unknown: list[str],
    params: Mapping[str, Any],
    columns: Collection[str] | None,
    data: DataFile | None,
) -> str:
    have = [*params, *(columns or ()), *BUILTINS]
    where = f"columns of {data.file}, " if data is not None else ""
    return (
        f"the template uses {', '.join(unknown)}, which nothing gives; it may use the "
        f"endpoint's params, the {where}and {', '.join(BUILTINS)} (known here: "
        f"{', '.join(have)})"
    )


def environment_problems(
    shape: RequestShape, environ: Mapping[str, str] | None = None
) -> list[tuple[YamlPath, str]]:
    """Each ``{env: NAME}`` whose variable is not set (or empty) in ``environ`` (this
    process's): the load generator, started from here, would have nothing to send."""
    environ = os.environ if environ is None else environ
    found = []
    for at, name in shape.env_names():
        value = environ.get(name)
        if not value:
            state = "is not set" if value is None else "is empty"
            found.append(
                (
                    at,
                    f"the environment variable {name} {state}: set it where harness runs "
                    "(the load generator reads it when it sends; its value is never written)",
                )
            )
        elif any(c in value for c in "\r\n\0"):
            found.append((at, f"the environment variable {name} holds a line break or NUL"))
    return found


Rows = tuple[tuple[str, ...], ...]


def read_data(data: DataFile, base_dir: Path) -> tuple[tuple[str, ...], Rows]:
    """The data file's columns and rows; ``ValueError`` saying what is wrong with it."""
    path = base_dir / data.file
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ValueError(f"{data.file}: not a file")
        if size > MAX_DATA_BYTES:
            raise ValueError(
                f"{data.file}: {size:,} bytes; a data file has at most {MAX_DATA_BYTES:,}"
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{data.file}: no such file (relative to {base_dir})") from None
    except OSError as exc:
        raise ValueError(f"{data.file}: cannot be read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{data.file}: not UTF-8 text (byte {exc.start + 1})") from None
    try:
        lines = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        raise ValueError(f"{data.file}: not CSV: {exc}") from None
    lines = [line for line in lines if line]  # blank lines
    if not lines:
        raise ValueError(f"{data.file}: empty; its first line names the columns")
    columns = tuple(c.strip() for c in lines[0])
    if len(set(columns)) != len(columns) or "" in columns:
        raise ValueError(f"{data.file}: column names must be given and differ: {list(columns)}")
    rows = lines[1:]
    if not rows:
        raise ValueError(f"{data.file}: no rows under its column names")
    if len(rows) > MAX_DATA_ROWS:
        raise ValueError(f"{data.file}: {len(rows):,} rows; at most {MAX_DATA_ROWS:,}")
    for n, row in enumerate(rows, start=2):
        if len(row) != len(columns):
            raise ValueError(
                f"{data.file}: row {n} has {len(row)} fields, the first line {len(columns)}"
            )
    return columns, tuple(tuple(row) for row in rows)


def data_problems(
    shape: RequestShape, *, params: Mapping[str, Any], body: Any, base_dir: Path
) -> list[tuple[YamlPath, str]]:
    """The data file read from ``base_dir``: missing, unreadable, or short of a column a
    template uses; its columns clashing with the params or the builtin names."""
    if shape.data is None:
        return []
    try:
        columns, _ = read_data(shape.data, base_dir)
    except ValueError as exc:
        return [(("data", "file"), str(exc))]
    clash = sorted(set(columns) & (set(params) | set(BUILTINS)))
    if clash:
        return [
            (
                ("data", "file"),
                f"{shape.data.file}: columns {clash} have the names of params or of "
                f"{', '.join(BUILTINS)}: rename them",
            )
        ]
    return [
        (at, message)
        for at, message in template_problems(shape, params=params, body=body, columns=columns)
        if "the template uses" in message  # a syntax error is said without the file
    ]
