"""The proxy process's command line: one parser for ``python -m harness.proxy``, ``harness proxy``.

By hand: ``--upstream`` and a ``--schedule`` file. In a run, a scenario's TCP
dependency: the orchestrator starts ``python -m harness.proxy --scenario F
--dependency NAME --fd N --control-fd M`` on sockets it bound; the upstream,
the phases' toxics and the seed come from the scenario, and the schedule's
clock starts at ``POST /__admin/start`` on the control listener, as each
gateway's does. Exit codes: 2 bad input (an address, a port, a schedule, the
scenario), 3 a port cannot be bound.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence

from harness.core.errors import InputError, RunError
from harness.core.net import fd_arg, inherited_socket, port_arg, raise_open_file_limit
from harness.core.serving import exit_for, serve_until_signalled, t0_arg
from harness.proxy.server import Proxy
from harness.scenario.loader import load_scenario
from harness.scenario.toxics import ProxyPhase, Schedule, load_schedule


def parser(prog: str = "python -m harness.proxy") -> argparse.ArgumentParser:
    """The proxy's options."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Forward TCP to a local dependency and break it with Toxiproxy-style "
        "toxics on a schedule (loopback only; schedule format: docs/proxy.md).",
    )
    p.add_argument(
        "--upstream",
        metavar="HOST:PORT",
        help="loopback HOST:PORT of the dependency to break (required without --scenario)",
    )
    p.add_argument(
        "--scenario",
        metavar="FILE",
        help="play this scenario's TCP dependency (--dependency): its tcp: upstream, its "
        "phases' toxics and its seed; the clock starts at POST /__admin/start unless --t0",
    )
    p.add_argument(
        "--dependency", metavar="NAME", help="with --scenario: the dependencies.NAME to play"
    )
    p.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="loopback HOST:PORT to accept on (port 0: any free port; default %(default)s)",
    )
    p.add_argument(
        "--schedule", metavar="FILE", help="YAML file: phases: [{name, start, duration, toxics}]"
    )
    p.add_argument(
        "--seed",
        type=int,
        metavar="N",
        default=0,
        help="seeds which connections a toxic hits, jitter, slice sizes (default %(default)s)",
    )
    p.add_argument(
        "--t0",
        type=t0_arg,
        default=None,
        metavar="UNIX_S",
        help="Unix time the schedule counts from (default: now)",
    )
    p.add_argument(
        "--metrics-port",
        type=port_arg,
        metavar="PORT",
        default=None,
        help="serve GET /metrics on 127.0.0.1:PORT (0: any free port)",
    )
    p.add_argument(
        "--fd", type=fd_arg, metavar="FD", help="an already bound, listening socket to accept on"
    )
    p.add_argument(
        "--control-fd",
        type=fd_arg,
        metavar="FD",
        help="an already bound, listening socket for GET /metrics, GET /health and POST "
        "/__admin/start (instead of --metrics-port)",
    )
    return p


def serve(
    proxy: Proxy, metrics_port: int | None = None, control: socket.socket | None = None
) -> None:
    """Blocking: run the proxy until SIGTERM/SIGINT, then close every connection."""

    async def start() -> None:
        port = await proxy.start()
        line = f"proxy {proxy.listen[0]}:{port} -> {proxy.upstream[0]}:{proxy.upstream[1]}"
        if control is not None or metrics_port is not None:
            at = await proxy.serve_metrics(metrics_port or 0, sock=control)
            line += f"; metrics http://127.0.0.1:{at}/metrics"
        if proxy.schedule.phases:
            clock = "POST /__admin/start" if proxy.await_start else f"t0={proxy.t0:.3f}"
            line += f"; {len(proxy.schedule.phases)} phase(s) from {clock}"
        print(line + "; SIGTERM or Ctrl-C stops", flush=True)

    serve_until_signalled(start, proxy.stop, files=proxy.files)


def scenario_schedule(file: str, name: str | None) -> tuple[str, Schedule, int]:
    """The upstream, schedule and seed of a scenario's TCP dependency ``name``."""
    scenario = load_scenario(file).scenario
    dep = scenario.dependencies.get(name or "")
    tcp = [n for n, d in scenario.dependencies.items() if d.tcp is not None]
    if dep is None or dep.tcp is None:
        said = f"--dependency {name}" if name else "--scenario needs --dependency"
        raise InputError(
            f"{said}: name a TCP dependency of {file} (tcp: {', '.join(tcp) or 'none'})"
        )
    phases = [
        ProxyPhase.model_validate(
            {"name": p.name, "start": p.start, "duration": p.duration, "toxics": p.toxics}
        )
        for p in dep.phases
    ]
    return dep.tcp, Schedule(phases=phases), scenario.seed


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m harness.proxy") -> None:
    """Run the proxy until SIGTERM/SIGINT (exit 2: bad input, 3: it cannot listen)."""
    args = parser(prog).parse_args(argv)
    sock: socket.socket | None = None
    control: socket.socket | None = None
    try:
        upstream, seed = args.upstream, args.seed
        schedule = load_schedule(args.schedule) if args.schedule else None
        if args.scenario is not None:
            if args.upstream is not None or args.schedule is not None:
                raise InputError("--scenario gives the upstream and the schedule: drop "
                                 "--upstream and --schedule")  # fmt: skip
            upstream, schedule, seed = scenario_schedule(args.scenario, args.dependency)
        elif args.upstream is None:
            raise InputError("give --upstream HOST:PORT (or --scenario and --dependency)")
        sock = inherited_socket(args.fd) if args.fd is not None else None
        control = (
            inherited_socket(args.control_fd, "--control-fd")
            if args.control_fd is not None
            else None
        )
        proxy = Proxy(
            args.listen,
            upstream,
            seed=seed,
            schedule=schedule,
            t0=args.t0,
            sock=sock,
            await_start=args.scenario is not None,
        )
    except InputError as exc:
        for held in (sock, control):
            if held is not None:
                held.close()
        exit_for(exc, 2)
    raise_open_file_limit()  # each connection holds two descriptors
    try:
        serve(proxy, args.metrics_port, control)
    except RunError as exc:
        exit_for(exc, 3)
