"""The gateway and the proxy as standalone servers; their own parsers read the options."""

from __future__ import annotations

import typer

from harness.cli._app import (
    app,
)

_FORWARDED = {"allow_extra_args": True, "ignore_unknown_options": True}
"""The process's own parser reads every argument (``--help`` included): one set of options."""


@app.command(context_settings=_FORWARDED, add_help_option=False)
def pg(ctx: typer.Context) -> None:
    """Run the fault-injecting payment gateway alone, so your own service can call it.

    Options: harness pg --help (--scenario, --port, --control-port, --ledger, --host...).
    """
    from harness.gateway.main import main as gateway_main

    gateway_main(ctx.args, prog="harness pg", standalone=True)


@app.command(context_settings=_FORWARDED, add_help_option=False)
def proxy(ctx: typer.Context) -> None:
    """Forward TCP to a local dependency and break it with Toxiproxy-style toxics on a schedule.

    Options: harness proxy --help (--upstream, --listen, --schedule, --seed, --metrics-port...).
    """
    from harness.proxy.main import main as proxy_main

    proxy_main(ctx.args, prog="harness proxy")
