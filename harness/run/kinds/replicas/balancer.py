"""nginx in front of a build's replicas: found on the machine, configured per build, run as a child.

A build with ``replicas: N`` (``harness.run.kinds.replicas.target``) answers through
a real load balancer, as a service scaled out in production does: Debian's
nginx, started by the harness with a config it writes into the build's
folder (``nginx.conf``). The config keeps nginx out of the way of what the
run measures:

- ``daemon off``, ``master_process on``, one worker: nginx stays the child the
  run's process group started (under the orphan guard, stopped with the rest).
- It listens on a loopback socket the harness bound and hands it over (nginx
  takes inherited listeners from the ``NGINX`` environment variable, as in its
  binary upgrade): no port is picked, freed and raced for.
- ``upstream`` round robin over the replicas with a keepalive pool (idle
  connections closed before gunicorn's own keepalive of 30 s would close them
  under nginx), ``max_fails=0`` and ``proxy_next_upstream off``: a replica is
  never taken out of the rotation and a request is never sent to a second
  replica, so every replica gets exactly its share, sick or not.
- ``proxy_read_timeout`` above the scenario's longest client timeout: the
  client gives up first, as it would talking to the shop directly, rather than
  nginx answering 504.
- No access log; the error log goes to stderr, so it is the child's log
  (``<build>/nginx.log``) and its last lines are in the message when nginx
  fails; the pid file and temporary folders are in the build's folder too,
  so nginx writes nothing outside it and needs no root.

One difference from the other children: nginx rewrites its environment's
memory for its process titles, so ``/proc/<pid>/environ`` of its processes no
longer shows ``HARNESS_RUN_ID`` (``harness.run.processes.leftover_processes`` does not see
them). They stop with their process group like any child's: the guard's
SIGTERM, then SIGKILL, reaches the master and its worker (a worker outlives a
master killed alone, so it is the group that must be killed, and is).
"""

from __future__ import annotations

import math
import os
import resource
import shutil
from collections.abc import Sequence
from pathlib import Path

from harness.core.errors import RunError
from harness.core.net import BACKLOG, LOOPBACK

SEARCH_PATH = ("/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin")
"""Where nginx is looked for besides ``PATH`` (Debian installs it in ``/usr/sbin``, which a
user's ``PATH`` often lacks)."""

INSTALL_HINT = (
    "install it with `sudo apt-get install nginx-light` (Debian, Ubuntu; or the `nginx` "
    "package), or put an nginx binary on PATH"
)

UPSTREAM_IDLE_S = 20
"""nginx closes an idle upstream connection after this: before gunicorn's keepalive (30 s)
closes it, so a request is never sent down a connection the replica is closing."""

READ_TIMEOUT_MARGIN_S = 5.0
"""``proxy_read_timeout`` is the longest client timeout plus this."""

MAX_WORKER_CONNECTIONS = 16384

TEMP_DIR = "nginx-tmp"
"""nginx's temporary folders, in the build's folder (made by ``nginx_config``'s caller:
nginx makes the last level only)."""


def find_nginx() -> str:
    """The nginx binary to run; ``RunError`` (exit 3) saying how to install it when none."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *SEARCH_PATH])
    found = shutil.which("nginx", path=search)
    if found is None:
        raise RunError(
            f"nginx is not installed: a build with replicas runs behind it; {INSTALL_HINT}"
        )
    return found


def nginx_argv(binary: str, folder: Path) -> tuple[str, ...]:
    """nginx in the foreground on ``folder/nginx.conf``, its early errors to stderr too.

    Absolute paths: nginx reads a relative ``-c`` (and the config's paths) against its
    ``-p`` prefix, so a run under a relative ``--results`` would name them twice."""
    folder = folder.resolve()
    return (binary, "-p", str(folder), "-e", "stderr", "-c", str(folder / "nginx.conf"))


def inherit_env(fd: int) -> dict[str, str]:
    """The environment that hands nginx the listening socket ``fd`` (its inherited listeners)."""
    return {"NGINX": f"{fd};"}


def nginx_config(
    *,
    folder: Path,
    port: int,
    upstreams: Sequence[str],
    read_timeout_s: float,
    keepalive: int,
) -> str:
    """``nginx.conf`` for a round-robin balancer on ``LOOPBACK:port`` over ``upstreams``
    (``host:port`` each); every file nginx writes goes under ``folder``."""
    if not upstreams:
        raise ValueError("a load balancer needs at least one upstream")
    folder = folder.resolve()  # see nginx_argv
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = hard if hard != resource.RLIM_INFINITY else 65536
    files = min(files, 4 * MAX_WORKER_CONNECTIONS)
    # A client connection and its upstream one each take a descriptor.
    connections = max(512, min(MAX_WORKER_CONNECTIONS, files // 2 - 64))
    timeout = math.ceil(read_timeout_s + READ_TIMEOUT_MARGIN_S)
    tmp = folder / TEMP_DIR
    servers = "\n".join(f"        server {u} max_fails=0;" for u in upstreams)
    temp_paths = "\n".join(
        f"    {kind}_temp_path {tmp / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""\
# Written by the harness for this build (harness/run/kinds/replicas/balancer.py); started as
# `nginx -p <this folder> -e stderr -c nginx.conf` and stopped with the build.
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile {files};
pid {folder / "nginx.pid"};
error_log stderr warn;

events {{
    worker_connections {connections};
}}

http {{
    access_log off;
{temp_paths}
    proxy_max_temp_file_size 0;
    keepalive_timeout 75s;
    keepalive_requests 1000000;

    upstream replicas {{
{servers}
        keepalive {keepalive};
        keepalive_timeout {UPSTREAM_IDLE_S}s;
        keepalive_requests 1000000;
    }}

    server {{
        listen {LOOPBACK}:{port} backlog={BACKLOG};
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_next_upstream off;
            proxy_connect_timeout {timeout}s;
            proxy_send_timeout {timeout}s;
            proxy_read_timeout {timeout}s;
        }}
    }}
}}
"""
