"""The gateway's action kinds, one match for both sides (``decide.dispatch``): every kind
reaches its own method, and the gateway's answer and the simulator's model have one each."""

from __future__ import annotations

import inspect
from typing import get_args

import pytest

from harness.gateway.decide import Action, ActionHandler, ActionKind, dispatch
from harness.gateway.server import _Answer
from harness.simulate.gateway import Met, _ClientMeets
from targets.shop.pg_client import PgConnectionError, PgTimeout

KINDS = get_args(ActionKind)


def _method(kind: str) -> str:
    return kind.replace("-", "_")


class _Which:
    """Answers with the name of the method dispatch called."""

    def __getattr__(self, name: str) -> object:
        return lambda action: name


def test_every_kind_reaches_its_own_method() -> None:
    assert [dispatch(Action(kind), _Which()) for kind in KINDS] == [_method(k) for k in KINDS]


def _methods(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


@pytest.mark.parametrize("handler", [_Answer, _ClientMeets])
def test_each_side_handles_every_kind(handler: type) -> None:
    protocol = {n for n in ActionHandler.__dict__ if not n.startswith("_")}
    assert protocol == {_method(k) for k in KINDS}
    assert protocol <= _methods(handler)


def test_what_the_simulated_client_meets_per_kind() -> None:
    met = _ClientMeets(lambda median: median, timeout_s=1.0)  # type: ignore[arg-type]
    seen = {kind: dispatch(Action(kind, delay_s=0.1), met) for kind in KINDS}
    assert seen["respond"] == Met(pytest.approx(0.105), None, 200)
    assert seen["hang"].took == 1.0 and isinstance(seen["hang"].error, PgTimeout)
    for kind in ("reset", "malformed"):
        assert isinstance(seen[kind].error, PgConnectionError) and seen[kind].status == 0
    slow = dispatch(Action("slow-body", delay_s=0.1, chunks=2, body_duration_s=3.0), met)
    assert isinstance(slow.error, PgTimeout) and slow.took == pytest.approx(1.1)
