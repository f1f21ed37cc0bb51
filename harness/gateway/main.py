"""The gateway process's command line: one parser for ``python -m harness.pg`` and ``harness pg``.

The orchestrator starts ``python -m harness.pg --fd N --control-fd M --ledger F``
on sockets it bound, and starts the time line later (``POST /__admin/start``);
``harness pg`` forwards its arguments here with ``standalone=True``: port 8089
and the schedule's clock starting now, for a person running the gateway alone.
Exit codes: 2 bad input (an option, the scenario), 3 a port cannot be bound or
the ledger cannot be written.

Unlike the load generator and the target, the gateway gets no versioned
hand-off file: it reads the run's copy of the scenario, the file a person
gives ``harness pg``, through the scenario loader, whose checks (every key and
value, with file and line) are stronger than a schema tag's
(``harness.core.handoff`` says more).
"""

from __future__ import annotations

import argparse
import functools
import socket
import time
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import InputError, RunError
from harness.core.net import BACKLOG, fd_arg, inherited_socket, is_loopback, port_arg
from harness.core.serving import exit_for, t0_arg
from harness.gateway.app import serve
from harness.gateway.dependency import DependencyApi, ForwardApi, StubApi
from harness.gateway.server import Gateway
from harness.scenario.dependencies import PG, dependency_stubs
from harness.scenario.faults import HANG_LIMIT_S, PgSchedule
from harness.scenario.loader import load_scenario
from harness.scenario.schema import Scenario

STANDALONE_PORT = 8089


def parser(
    prog: str = "python -m harness.pg", *, standalone: bool = False
) -> argparse.ArgumentParser:
    """The gateway's options; ``standalone`` changes only the defaults of --port and --t0."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run the fault-injecting payment gateway (loopback only): POST "
        "/v1/payments/approve and GET /v1/catalogue/products/{id} answer as the scenario's "
        "pg.phases say; GET /metrics, "
        "GET/PUT /__admin/fault and POST /__admin/reset steer and observe it.",
    )
    p.add_argument(
        "--scenario", required=True, metavar="FILE", help="serve this scenario's pg.phases"
    )
    p.add_argument(
        "--dependency",
        default="pg",
        metavar="NAME",
        help="play the scenario's dependencies.NAME instead of pg (its API and its phases)",
    )
    p.add_argument(
        "--scenario-dir",
        type=Path,
        metavar="DIR",
        help="where a dependency's mappings folder is found (default: the scenario's folder)",
    )
    p.add_argument(
        "--fd", type=fd_arg, metavar="FD", help="an already bound, listening socket to serve on"
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (without --fd)")
    p.add_argument(
        "--port",
        type=port_arg,
        metavar="PORT",
        default=STANDALONE_PORT if standalone else 0,
        help="port without --fd (0: any free port; default %(default)s)",
    )
    p.add_argument(
        "--control-fd", type=fd_arg, metavar="FD", help="a bound, listening socket for control"
    )
    p.add_argument(
        "--control-port",
        type=port_arg,
        metavar="PORT",
        help="also serve /metrics and /__admin here, answering even while refused",
    )
    p.add_argument(
        "--t0",
        type=functools.partial(t0_arg, now=True),
        default="now" if standalone else None,
        metavar="UNIX_S|now",
        help="when the schedule's time line starts (default: "
        + ("now)" if standalone else "at POST /__admin/start)"),
    )
    p.add_argument(
        "--ledger",
        type=Path,
        metavar="PATH",
        help="write every call received to this CSV file (a new one: see --overwrite-ledger)",
    )
    p.add_argument(
        "--overwrite-ledger",
        action="store_true",
        help="start an existing --ledger file afresh (refused otherwise: its rows would be "
        "lost, and appending would mix two runs' calls)",
    )
    p.add_argument(
        "--timer",
        choices=("timerfd", "asyncio"),
        default="timerfd",
        help="how injected delays are timed (asyncio: the loop's 1 ms timers, for comparison)",
    )
    p.add_argument(
        "--forward-client",
        choices=("lean", "aiohttp"),
        default="lean",
        help="how a forward dependency calls its upstream (aiohttp: its ClientSession, for "
        "comparison; see benchmarks/forward_overhead.py)",
    )
    return p


def _socket(
    fd: int | None, host: str, port: int | None, what: str = "--fd"
) -> socket.socket | None:
    if fd is not None:
        sock = inherited_socket(fd, what)
        if not is_loopback(str(sock.getsockname()[0])):
            raise InputError(f"fd {fd} is bound to {sock.getsockname()[0]}, not a loopback address")
        return sock
    if port is None:
        return None
    return socket.create_server((host, port), backlog=BACKLOG)


def _announce(
    host: str,
    sock: socket.socket,
    control: socket.socket | None,
    t0: float | None,
    dependency: str = PG,
) -> None:
    where = f"http://{host}:{sock.getsockname()[1]}"
    admin = f"http://{host}:{control.getsockname()[1]}" if control is not None else where
    if t0 is None:
        clock = "starts at POST /__admin/start"
    else:
        clock = "starts now" if abs(time.time() - t0) < 1 else f"counts from t0={t0:.3f}"
    api = (
        "POST /v1/payments/approve, GET /v1/catalogue/products/{id}"
        if dependency == PG
        else "every path, as its routes, mappings or upstream answer"
    )
    who = "payment gateway" if dependency == PG else f"dependency {dependency!r}"
    print(
        f"{who} on {where}  ({api}); metrics and admin on "
        f"{admin}  (GET /metrics, GET/PUT /__admin/fault, POST /__admin/reset); "
        f"schedule clock {clock}; Ctrl-C stops",
        flush=True,
    )


def _played(
    scenario: Scenario, name: str, folder: Path | None, file: str, client: str = "lean"
) -> tuple[PgSchedule, DependencyApi | None]:
    """The schedule and API of the dependency this process plays (``InputError`` if none)."""
    if name == PG:
        return scenario.pg, None
    dep = scenario.dependencies.get(name)
    if dep is None:
        known = ", ".join(scenario.dependencies) or "none"
        raise InputError(f"--dependency {name}: not in {file} (dependencies: {known})")
    if dep.forward is not None:
        return dep, ForwardApi(dep.forward, dep.call_key, HANG_LIMIT_S, client)
    base = folder if folder is not None else Path(file).resolve().parent
    stubs = dependency_stubs(dep, base, f"dependencies.{name}")
    return dep, StubApi(stubs, scenario.seed, dep.call_key)


def main(
    argv: Sequence[str] | None = None,
    *,
    prog: str = "python -m harness.pg",
    standalone: bool = False,
) -> None:
    """Run the gateway until SIGTERM/SIGINT (exit 2: bad input, 3: a port cannot be bound or
    the ledger cannot be written)."""
    args = parser(prog, standalone=standalone).parse_args(argv)
    try:
        if not is_loopback(args.host):
            raise InputError(f"--host {args.host}: the gateway only binds loopback addresses")
        loaded = load_scenario(args.scenario)
        schedule, api = _played(
            loaded.scenario, args.dependency, args.scenario_dir, args.scenario, args.forward_client
        )
        gateway = Gateway(
            schedule.phases,
            loaded.scenario.seed,
            args.t0,
            args.ledger,
            precise_timer=args.timer == "timerfd",
            overwrite_ledger=args.overwrite_ledger,
            capacity=schedule.capacity,
            api=api,
            name=args.dependency,
        )
    except InputError as exc:
        exit_for(exc, 2)
    except FileExistsError:
        exit_for(
            InputError(
                f"--ledger {args.ledger}: exists ({args.ledger.stat().st_size:,} bytes); its "
                "rows would be lost: name a new file, or --overwrite-ledger to start it afresh "
                "(not appended: a ledger is one run's calls)"
            ),
            2,
        )
    except OSError as exc:
        exit_for(InputError(f"cannot write the ledger {args.ledger}: {exc.strerror}"), 2)
    sock: socket.socket | None = None
    try:
        sock = _socket(args.fd, args.host, args.port)
        control = _socket(args.control_fd, args.host, args.control_port, "--control-fd")
    except (InputError, OSError) as exc:
        if sock is not None:
            sock.close()
        if isinstance(exc, InputError):
            exit_for(exc, 2)
        exit_for(RunError(f"cannot bind {args.host}: {exc.strerror}"), 3)
    assert sock is not None
    if args.fd is None:
        _announce(args.host, sock, control, args.t0, args.dependency)
    try:
        serve(gateway, sock, control)
    except RunError as exc:  # the ledger cannot be written: stop, and say so
        exit_for(exc, 3)
