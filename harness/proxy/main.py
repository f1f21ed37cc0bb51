"""The proxy process's command line: one parser for ``python -m harness.proxy``, ``harness proxy``.

Exit codes: 2 bad input (an address, a port, a schedule), 3 a port cannot be bound.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Sequence

from harness.core.errors import InputError, RunError
from harness.core.net import fd_arg, inherited_socket, port_arg, raise_open_file_limit
from harness.core.serving import exit_for, serve_until_signalled, t0_arg
from harness.proxy.server import Proxy
from harness.proxy.toxics import load_schedule


def parser(prog: str = "python -m harness.proxy") -> argparse.ArgumentParser:
    """The proxy's options."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Forward TCP to a local dependency and break it with Toxiproxy-style "
        "toxics on a schedule (loopback only; schedule format: docs/proxy.md).",
    )
    p.add_argument(
        "--upstream",
        required=True,
        metavar="HOST:PORT",
        help="loopback HOST:PORT of the dependency to break",
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
    return p


def serve(proxy: Proxy, metrics_port: int | None = None) -> None:
    """Blocking: run the proxy until SIGTERM/SIGINT, then close every connection."""

    async def start() -> None:
        port = await proxy.start()
        line = f"proxy {proxy.listen[0]}:{port} -> {proxy.upstream[0]}:{proxy.upstream[1]}"
        if metrics_port is not None:
            line += f"; metrics http://127.0.0.1:{await proxy.serve_metrics(metrics_port)}/metrics"
        if proxy.schedule.phases:
            line += f"; {len(proxy.schedule.phases)} phase(s) from t0={proxy.t0:.3f}"
        print(line + "; SIGTERM or Ctrl-C stops", flush=True)

    serve_until_signalled(start, proxy.stop, files=proxy.files)


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m harness.proxy") -> None:
    """Run the proxy until SIGTERM/SIGINT (exit 2: bad input, 3: it cannot listen)."""
    args = parser(prog).parse_args(argv)
    sock: socket.socket | None = None
    try:
        sock = inherited_socket(args.fd) if args.fd is not None else None
        schedule = load_schedule(args.schedule) if args.schedule else None
        proxy = Proxy(
            args.listen, args.upstream, seed=args.seed, schedule=schedule, t0=args.t0, sock=sock
        )
    except InputError as exc:
        if sock is not None:
            sock.close()
        exit_for(exc, 2)
    raise_open_file_limit()  # each connection holds two descriptors
    try:
        serve(proxy, args.metrics_port)
    except RunError as exc:
        exit_for(exc, 3)
