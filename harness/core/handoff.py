"""Hand-offs: the one JSON file the orchestrator writes for each child process it starts.

A child reads its instructions from a file in the build's folder, and that
file is the contract between two programs that may not be the same version
(an old Locust process left over, a worker machine with another install). So
each file says what it is and which version of the contract it follows, in a
first key like ``report.json``'s and ``manifest.json``'s::

    {"schema": "harness.load-plan/4", "base_url": ..., ...}

and the child reads it through the same ``Handoff`` the orchestrator wrote it
with, which refuses another kind or version with a message that says so,
instead of a ``KeyError`` on the first key that moved. The payload stays the
child's own, flat after ``schema``, so a person reading the file sees the
same keys as before. The hand-offs:

==============  ============================  ============================================
file            child                         payload (its type, and where it is written)
==============  ============================  ============================================
``plan.json``   the load generator (Locust)   ``harness.load.plan.LoadPlan`` (``LOAD_PLAN``)
``target.json`` the reference shop            the build's settings (``SHOP_CONFIG`` in
                                              ``harness.run.kinds.shop.target``; the shop
                                              checks the schema itself: it never imports
                                              the harness)
``target.json`` a docker build's runner       ``DockerSpec``
                                              (``harness.run.kinds.docker.runner``)
``target.json`` a command build (a record:    ``CommandRecord``
                no child reads it)            (``harness.run.kinds.command.target``)
==============  ============================  ============================================

The gateway gets none: it reads the run's copy of the scenario
(``scenario.yaml``), the same file ``harness pg --scenario`` takes from a
person, through the scenario loader, which already checks every key and
value and refuses what it does not know with file, line and field. A
second, generated file would be a copy of the same settings with a weaker
check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from harness.core.errors import RunError

P = TypeVar("P", bound=Mapping[str, Any])

SCHEMA_KEY = "schema"


class HandoffError(RunError):
    """A hand-off file another harness wrote (another kind, another version) or not one at all."""


@dataclass(frozen=True)
class Handoff(Generic[P]):
    """One kind of hand-off file: its name, its version, and its payload's type ``P``."""

    kind: str
    """What the file is for (``load-plan``, ``shop-config``, ...)."""
    version: int
    """Raised whenever a key's meaning changes, so a child of another harness refuses it."""
    required: tuple[str, ...] = ()
    """Keys the payload must have, checked on reading (a TypedDict's ``__required_keys__``)."""

    @property
    def schema(self) -> str:
        return f"harness.{self.kind}/{self.version}"

    def document(self, payload: P) -> dict[str, Any]:
        """The file's content: ``schema`` first, then the payload's keys."""
        if SCHEMA_KEY in payload:
            raise ValueError(f"a {self.kind} payload must not have a {SCHEMA_KEY!r} key")
        return {SCHEMA_KEY: self.schema, **payload}

    def text(self, payload: P) -> str:
        """The file's text, for the caller's atomic writer (``results.io.write_text_atomic``:
        a child never reads half a file, and a full disk is said as such)."""
        return json.dumps(self.document(payload), indent=2) + "\n"

    def payload(self, document: object, where: str) -> P:
        """The payload of ``document`` (a parsed file), once its kind and version are ours."""
        if not isinstance(document, dict):
            raise HandoffError(f"{where}: expected a JSON object, not a {type(document).__name__}")
        found = document.get(SCHEMA_KEY)
        if found != self.schema:
            raise HandoffError(f"{where}: {self._mismatch(found)}")
        payload = {k: v for k, v in document.items() if k != SCHEMA_KEY}
        missing = [key for key in self.required if key not in payload]
        if missing:
            raise HandoffError(f"{where}: {self.schema} without {', '.join(missing)}")
        return cast(P, payload)

    def read(self, path: Path | str) -> P:
        """The payload of the file at ``path`` (``HandoffError`` when it is not ours)."""
        try:
            document = json.loads(Path(path).read_text())
        except OSError as exc:
            raise HandoffError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise HandoffError(f"{path}: not JSON: {exc}") from None
        return self.payload(document, str(path))

    def _mismatch(self, found: object) -> str:
        if not isinstance(found, str) or "/" not in found:
            return f"not a {self.schema} hand-off (no schema key: written by an older harness)"
        kind, _, version = found.rpartition("/")
        if kind != f"harness.{self.kind}":
            return f"a {found} hand-off, where {self.schema} was expected"
        age = "a newer" if version.isdigit() and int(version) > self.version else "an older"
        return (
            f"written by {age} harness ({found}), and this one reads {self.schema}: "
            "the process and the run that wrote its file must come from one harness version"
        )
