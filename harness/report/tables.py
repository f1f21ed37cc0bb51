"""A run's figures as tables for people: ``report.md`` and the terminal's headline table.

The headline table is shaped like seed 000's result 3: for each endpoint that
does not call the gateway (the ones a breaker is meant to protect), p95, p99
and max per build with the % change against the baseline build.

Every label is the scenario's own names (its endpoints, dependencies and builds) or
the harness's; the payment gateway ``pg``'s rows, ledger and words
(``report.vocabulary``) appear only when the run played it (``plays_pg``).
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table
from rich.text import Text

from harness.analysis.combine import change_pct, flatten_whole
from harness.analysis.format import Unit, change, count, interval
from harness.analysis.format import figure as fmt
from harness.analysis.model import BuildReport, Report, WindowFigures, plays_pg
from harness.core.catalogue import FIGURES, NOT_EXPOSED, Figure
from harness.report.claims import CLAIM_HEADER, claim_row
from harness.report.vocabulary import PAYMENTS_RECORDED, PG_LEDGER_HEADER, PG_LEDGER_TITLE


def window_labels(report: Report) -> tuple[str, str]:
    """What the headline's rows are over, for their labels: the measured window (warmup
    left out), and the fault window by the names of its phases."""
    phases = report.get("phases") or []
    whole = "all phases" if phases else "measured window"
    fault = report.get("fault_window_s") or []
    if len(fault) != 2:  # no fault: the "fault" figures are over the whole window
        return whole, whole
    inside = [p["name"] for p in phases if p["start_s"] >= fault[0] and p["end_s"] <= fault[1]]
    return whole, " + ".join(inside) or "fault window"


def headline_rows(report: Report) -> list[list[str]]:
    """Rows of the before/after table: protected endpoints' latency, then workers, breaker,
    the dependencies (``pg``'s rows only when the run played it).

    Each label names its window (``window_labels``); with ``--repeat N`` each value
    carries its 95% interval."""
    builds = list(report["builds"])
    base = report.get("baseline")
    whole, fault = window_labels(report)
    flat = {b: flatten_whole(report["builds"][b]) for b in builds}
    rows: list[list[str]] = []

    def row(
        label: str,
        key: str,
        unit: Unit = "",
        scale: float = 1.0,
        digits: int = 4,
        say: list[str | None] | None = None,
    ) -> None:
        """One row; ``say``: per build, what its cell says instead of its value."""
        values = [_scaled(flat[b].get(key), scale, digits) for b in builds]
        cells = [label]
        for b, v, said in zip(builds, values, say or [None] * len(builds), strict=True):
            ci = report["builds"][b].get("ci95", {}).get(key) or [None, None]
            low, high = (_scaled(c, scale, digits) for c in ci)
            text = said or fmt(v, unit)
            if said is None and low is not None and high is not None:
                text = interval(text, fmt(low, unit), fmt(high, unit))
            cells.append(text)
        if base in flat and len(builds) > 1:
            b0 = values[builds.index(base)]
            cells += [
                change(change_pct(b0, v)) for b, v in zip(builds, values, strict=True) if b != base
            ]
        rows.append(cells)

    protected = [n for n, e in report["endpoints"].items() if not e["calls_gateway"]]
    others = [n for n in report["endpoints"] if n not in protected]
    for ep in protected + others:
        for q in ("p95", "p99", "max"):
            row(f"{ep} {q} ({whole})", f"{ep}.latency_s.{q}", "s")
        row(f"{ep} success ({whole})", f"{ep}.success_pct", "%")
        row(f"{ep} achieved rps ({whole})", f"{ep}.achieved_rps")
        if any("in_flight_max" in report["builds"][b]["endpoints"][ep] for b in builds):
            row(f"{ep} in flight max ({whole})", f"{ep}.in_flight_max")  # absent: older
        if any(report["builds"][b]["endpoints"][ep].get("dropped") for b in builds):
            row(f"{ep} dropped by max-in-flight ({whole})", f"{ep}.dropped")
        if "retry" in report["endpoints"][ep]:  # a client that retries: what it added
            row(f"{ep} offered rps, first attempts ({whole})", f"{ep}.offered_rps")
            row(f"{ep} admitted rps, attempts sent ({whole})", f"{ep}.admitted_rps")
            row(f"{ep} retried rps ({whole})", f"{ep}.retried_rps")
            row(f"{ep} requests retried ({whole})", f"{ep}.retried_pct", "%")
            row(f"{ep} attempts per request ({whole})", f"{ep}.attempts")
    pg = plays_pg(report)
    for figure in FIGURES:  # the catalogue's rows: pool, breaker, pg, its own series
        if figure.label is None or (pg_only(figure) and not pg):
            continue
        exposed = [_has(report["builds"][b], figure.key) for b in builds]
        if not any(exposed) and figure.absent is not None:
            continue  # no build has it (an optional series, no recovery:): no row
        say = [
            absence(report["builds"][b], figure.key, e)
            for b, e in zip(builds, exposed, strict=True)
        ]
        label = _windowed(figure.label, figure.window, whole, fault)
        row(label, figure.key, figure.unit, say=say)
    named = sorted({d for b in builds for d in report["builds"][b].get("dependencies", {})})
    for dep in named:  # each named dependency, from its own ledger (analysis.dependencies)
        key = f"dependencies.{dep}"
        if any("connections" in report["builds"][b].get("dependencies", {}).get(dep, {})
               for b in builds):  # fmt: skip  # a TCP one: its proxy's counters
            row(f"{dep} connections ({whole})", f"{key}.connections")
            row(f"{dep} connections ({fault})", f"{key}.connections_fault")
            row(f"{dep} connections open max ({whole})", f"{key}.connections_open_max")
            row(f"{dep} bytes to it ({whole})", f"{key}.bytes_upstream")
            row(f"{dep} bytes from it ({whole})", f"{key}.bytes_downstream")
            row(f"{dep} bytes from it ({fault})", f"{key}.bytes_downstream_fault")
            row(f"{dep} toxics applied ({fault})", f"{key}.toxics_applied_fault")
            row(f"{dep} upstream unreachable ({whole})", f"{key}.upstream_errors")
            continue
        row(f"{dep} calls received ({whole})", f"{key}.calls")
        row(f"{dep} calls received ({fault})", f"{key}.calls_fault")
        row(f"{dep} calls per request ({whole})", f"{key}.per_request")
        row(f"{dep} calls per request ({fault})", f"{key}.per_request_fault")
        row(f"{dep} errors returned ({fault})", f"{key}.errors_fault")
        row(f"{dep} unmatched calls ({whole})", f"{key}.unmatched")
        row(f"{dep} time held p99 ({fault})", f"{key}.held_p99_s_fault", "s")
    if any("resources" in report["builds"][b] for b in builds):  # docker builds: the cost
        row(f"container CPU % mean ({whole})", "resources.cpu_pct_mean", "%", digits=1)
        row(f"container CPU % max ({whole})", "resources.cpu_pct_max", "%", digits=1)
        row(f"container CPU % mean ({fault})", "resources.cpu_pct_mean_fault", "%", digits=1)
        row(f"container memory MiB max ({whole})", "resources.memory_bytes_max", "", 2**-20, 0)
    return rows


def pg_only(figure: Figure) -> bool:
    """Whether a catalogue figure is the payment gateway ``pg``'s: its calls and
    amplification (its ledger or counter), and its callers' answers' recovery (gate
    ``gateway_time_to_recover``), shown only where the run played ``pg``."""
    return figure.source == "gateway" or figure.gate == "gateway_time_to_recover"


def _scaled(value: float | None, scale: float, digits: int) -> float | None:
    return None if value is None else round(value * scale, digits)


def headline_notes(report: Report) -> list[str]:
    """What the headline table cannot say by itself: a breaker build's success on the
    endpoints that call the dependency is lower because its breaker refused calls (its job
    while the dependency fails)."""
    notes = []
    builds = report["builds"]
    whole, _ = window_labels(report)
    gateway = [n for n, e in report["endpoints"].items() if e["calls_gateway"]]
    reached = "the gateway" if plays_pg(report) else "the dependency"
    for name, b in builds.items():
        refused = b["breaker"].get("blocked_total")
        for ep in gateway if refused else []:
            mine = b["endpoints"][ep]["success_pct"]
            others = [
                (o["endpoints"][ep]["success_pct"], other)
                for other, o in builds.items()
                if other != name and o["endpoints"][ep]["success_pct"] is not None
            ]
            best, other = max(others, default=(None, ""))
            if mine is None or best is None or best <= mine:
                continue
            notes.append(
                f"{name}: {ep} success {fmt(mine, '%')} against {fmt(best, '%')} for {other} "
                f"({whole}): refused by the breaker: {count(refused)}. Those calls were answered "
                f"at once without reaching {reached}; refusing them is what the breaker is for."
            )
    return notes


def absence(build: BuildReport, key: str, exposed: bool = True) -> str | None:
    """What a figure's cell says when it has no value for a reason worth telling: ``not
    exposed`` (an optional series the service never exposed), ``> 25.00 s`` (a recovery
    not reached inside the window: the bound); None otherwise."""
    if not exposed:
        return NOT_EXPOSED
    if key == "timeline.recovered":  # the verdict in words; a share over repetitions as is
        verdict = build["timeline"].get("recovered")
        return {1.0: "recovered", 0.0: "stuck"}.get(-1.0 if verdict is None else verdict)
    bound = (build.get("not_reached") or {}).get(key)
    return None if bound is None else f"> {fmt(bound, 's')}"


def verdict_text(build: BuildReport) -> str:
    """``recovered after 3.00 s``, ``stuck (> 30.00 s)``, ``not measured``, or over
    repetitions ``recovered in 60%``."""
    timeline = build.get("timeline", {})
    verdict = timeline.get("recovered")
    if verdict is None:
        return "not measured" if "recovered" in timeline else "-"
    if verdict == 0:
        return f"stuck ({absence(build, 'timeline.recovered_after_s') or '-'})"
    if verdict < 1:
        return f"recovered in {fmt(100 * verdict, '%')}"
    return f"recovered after {fmt(timeline.get('recovered_after_s'), 's')}"


def _has(build: BuildReport, key: str) -> bool:
    """Whether a build's report has the (dotted) key at all."""
    value: object = build
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def _windowed(label: str, window: str, whole: str, fault: str) -> str:
    """A catalogue row's label naming its window (``window_labels``): ``(all phases)``,
    the fault's phases (``(outage)``), or nothing for a figure of the whole run."""
    base = label.removesuffix(" (fault)")
    if window == "whole":
        return f"{base} ({whole})"
    if window == "fault":
        return f"{base} ({fault})"
    return base


def report_warnings(report: Report) -> list[str]:
    """Each build's warnings (figures read that look wrong), its name first."""
    return [f"{name}: {w}" for name, b in report["builds"].items() for w in b.get("warnings", [])]


WINDOWS_NOTE = (
    "Each row names its window: *all phases* is the measured window (warmup left out), "
    "a phase's name that phase alone."
)


def repeat_note(report: Report) -> list[str]:
    """With ``--repeat N``: how to read the values and their intervals (else nothing)."""
    repeats = max((b.get("repetitions", 1) for b in report["builds"].values()), default=1)
    if repeats < 2:
        return []
    return [
        f"Each value is the mean of {repeats} repetitions, [low, high] its bootstrap 95% interval.",
        "",
    ]


def error_text(errors: Mapping[str, float | None]) -> str:
    """A build's errors by kind, each a whole count: ``timeout: 352, HTTP503: 451``."""
    return ", ".join(f"{k}: {count(v)}" for k, v in errors.items()) or "-"


def table_header(report: Report) -> list[str]:
    builds = list(report["builds"])
    base = report.get("baseline")
    extra = [f"{b} vs {base}" for b in builds if b != base] if len(builds) > 1 else []
    return ["figure", *builds, *extra]


def markdown(report: Report) -> str:
    """The report as Markdown (fits a PR comment)."""
    lines = [
        f"# {report['scenario']} — run {report['run_id']}",
        "",
        f"Status: **{report['status']}** · seed {report['seed']} · measured "
        f"{report['duration_s']:g} s after {report['warmup_s']:g} s warmup",
        "",
        "Phases: "
        + ", ".join(
            f"{p['name']} ({p['fault']}, {p['start_s']:g}–{p['end_s']:g} s)"
            for p in report["phases"]
        ),
        "",
        "Latency is completion minus *intended* start (no coordinated omission). " + WINDOWS_NOTE,
        "",
        *repeat_note(report),
    ]
    header = table_header(report)
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for cells in headline_rows(report):
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    lines.append("")
    lines += [f"**Warning**: {_md_cell(w)}\n" for w in report_warnings(report)]
    lines += [f"Note: {_md_cell(n)}\n" for n in headline_notes(report)]
    lines += _claims_section(report) + _skipped_section(report)
    for name, build in report["builds"].items():
        stopped = ", aborted" if build.get("status") == "aborted" else ""
        lines += [f"## {name} ({build['profile']}{stopped})", ""]
        lines.append("| endpoint | requests | rps | success | p50 | p95 | p99 | max | errors |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for ep, s in build["endpoints"].items():
            lat = s["latency_s"]
            not_sent = {"dropped (max-in-flight)": s["dropped"]} if s.get("dropped") else {}
            errors = error_text({**s["errors"], **not_sent})
            lines.append(
                f"| {ep} | {count(s['requests'])} | {fmt(s['achieved_rps'])} | "
                f"{fmt(s['success_pct'], '%')} | {fmt(lat['p50'], 's')} | "
                f"{fmt(lat['p95'], 's')} | {fmt(lat['p99'], 's')} | {fmt(lat['max'], 's')} | "
                f"{errors} |"
            )
        lines.append("")
    lines += _phase_section(report) + _replica_section(report) + _kept_section(report)
    lines += _ledger_section(report) + _not_measured_section(report)
    return "\n".join(lines)


def _claims_section(report: Report) -> list[str]:
    """Seed claims (gates with ``seed:``): the seed's figure, ours, the verdict."""
    claims = report.get("seed_claims") or []
    if not claims:
        return []
    rows = [[_md_cell(c) for c in claim_row(claim)] for claim in claims]
    passed = sum(c["verdict"] == "pass" for c in claims)
    intro = (
        f"{passed}/{len(claims)} hold. The gate decides the verdict (the claim's direction); "
        "the seed's own figure is beside ours for scale."
    )
    return ["## Seed claims", "", intro, ""] + _table(CLAIM_HEADER, rows)


def _skipped_section(report: Report) -> list[str]:
    """Gates this run could not answer (``--build`` left out a build they name)."""
    skipped = report.get("skipped_gates") or []
    if not skipped:
        return []
    rows = [[_md_cell(g["gate"]), _md_cell(g["reason"])] for g in skipped]
    intro = f"{len(skipped)} gate(s) skipped: they name a build this run did not run."
    return ["## Gates skipped", "", intro, ""] + _table(["gate", "why"], rows)


def _md_cell(text: str) -> str:
    """Text safe in a Markdown table cell: a ``|`` would end the cell, a newline the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _replica_section(report: Report) -> list[str]:
    """Builds with ``replicas: N``: each replica's pool and breaker (each has its own)."""
    rows = []
    pg = plays_pg(report)  # the shop's payment records: only beside pg
    for name, b in report["builds"].items():
        for index, r in (b.get("replicas") or {}).items():
            rows.append(
                [
                    name,
                    index,
                    fmt(r["workers"]["busy_max_fault"]),
                    fmt(r["workers"]["max_workers"]),
                    fmt(r["breaker"]["open_pct_fault"], "%"),
                    fmt(r["breaker"].get("opens")),
                    fmt(r["breaker"].get("opens_from_closed")),
                    fmt(r["breaker"]["time_to_open_s"], "s"),
                    fmt(r["breaker"]["blocked_total"]),
                    fmt(r["pg"]["retries"]),
                    *([fmt(r["payments_recorded"])] if pg else []),
                ]
            )
    if not rows:
        return []
    header = ["build", "replica", "busy max (fault)", "max workers", "open (fault)"]
    header += ["opens", "opens from closed", "time to open", "blocked", "retries"]
    header += [PAYMENTS_RECORDED] if pg else []
    return ["## Per replica", ""] + _table(header, rows)


def not_measured_lines(report: Report) -> list[str]:
    """Why the terminal table shows ``-``, one short line per build and reason: the series
    the service never exposed (``series seen`` cut to a count; report.md has the list)."""
    lines: list[str] = []
    for name, reason, figures in _not_measured(report):
        why, seen, listed = reason.partition("; series seen: ")
        if seen:
            # The preset's note (what to set) follows the listing in parentheses: keep it.
            listed, paren, note = listed.partition(" (")
            names = listed.split(", ")
            last, more, extra = names[-1].partition(" and ")
            total = len(names) + (int(extra.split()[0]) if more else 0)
            why += f" ({total} series seen: report.md lists them)"
            why += f" ({note}" if paren else ""
        lines.append(f"{name}: {', '.join(figures)}: {why}")
    return lines


def _not_measured(report: Report) -> list[tuple[str, str, list[str]]]:
    """(build, reason, the figures it left unmeasured), builds in order."""
    out: list[tuple[str, str, list[str]]] = []
    for name, build in report["builds"].items():
        by_reason: dict[str, list[str]] = {}
        for figure, reason in build.get("not_measured", {}).items():
            by_reason.setdefault(reason, []).append(figure)
        out += [(name, reason, figures) for reason, figures in by_reason.items()]
    return out


def _not_measured_section(report: Report) -> list[str]:
    """Why figures read ``-``: the series they come from never appeared (one line per reason)."""
    lines = [
        f"- **{name}**: {', '.join(f'`{f}`' for f in figures)}: {reason}"
        for name, reason, figures in _not_measured(report)
    ]
    return ["## Not measured", "", *lines, ""] if lines else []


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _phase_section(report: Report) -> list[str]:
    """Figures cut by phase: whole-run percentiles mix the outage with normal time."""
    builds = report["builds"]
    if not report["phases"] or not builds:
        return []
    rows = []
    pg = plays_pg(report)
    named = _named_dependencies(report)
    # Requests open at once (any server, a pool or none): absent in reports written before it.
    in_flight = any("in_flight" in w for b in builds.values() for w in b["phases"].values())
    for phase in report["phases"]:
        name = phase["name"]
        for build, b in builds.items():
            window = b.get("phases", {}).get(name)
            if window is None:
                continue
            cells = [name, build]
            for ep in report["endpoints"]:
                lat = window["endpoints"][ep]["latency_s"]
                cells.append(f"{fmt(lat['p95'], 's')} / {fmt(lat['p99'], 's')}")
            cells.append(fmt(window["workers"]["busy_p50"]))
            if in_flight:
                held = window.get("in_flight")
                cells.append("-" if held is None else f"{fmt(held['p50'])} / {fmt(held['max'])}")
            cells.append(fmt(window["breaker"]["blocked_per_s"]))
            cells += [fmt(window["pg"]["amplification"])] if pg else []
            cells += [_dependency_cell(window, dep, tcp) for dep, tcp in named.items()]
            rows.append(cells)
    header = ["phase", "build", *(f"{ep} p95 / p99" for ep in report["endpoints"])]
    header += ["busy p50", *(["in flight p50 / max"] if in_flight else [])]
    header += ["blocked/s", *(["amplification"] if pg else [])]
    header += [
        f"{dep} {'connections' if tcp else 'calls per request'}" for dep, tcp in named.items()
    ]
    # Each endpoint's own recovery: absent in reports written before it (kept as they were).
    measured = any("endpoints_recover_s" in b.get("timeline", {}) for b in builds.values())
    back = list(report["endpoints"]) if measured else []

    def recovery(build: BuildReport, key: str, value: float | None) -> str:
        return absence(build, key) or fmt(value, "s")

    # The service's recovery: absent in reports written before it (their column said the
    # gateway calls', which keeps a column of its own).
    service = any("service_recover_s" in b.get("timeline", {}) for b in builds.values())
    timeline = [
        [
            b,
            fmt(t.get("time_to_open_s"), "s"),
            *(
                [recovery(builds[b], "timeline.service_recover_s", t.get("service_recover_s"))]
                if service
                else []
            ),
            *(
                [recovery(builds[b], "timeline.time_to_recover_s", t.get("time_to_recover_s"))]
                if pg
                else []
            ),
            *(
                recovery(
                    builds[b],
                    f"timeline.endpoints_recover_s.{ep}",
                    t.get("endpoints_recover_s", {}).get(ep),
                )
                for ep in back
            ),
            fmt(t.get("blocked_pct_healthy"), "%"),
        ]
        for b, t in ((b, builds[b].get("timeline", {})) for b in builds)
    ]
    timeline_header = [
        "build",
        "time to open",
        *(["time to recover"] if service else []),
        *(["gateway calls answered again"] if pg else []),
        *(f"{ep} back to healthy" for ep in back),
        "blocked while healthy",
    ]
    if any("recovered" in b.get("timeline", {}) for b in builds.values()):  # recovery:
        timeline_header.append("recovery verdict")
        for cells, b in zip(timeline, builds.values(), strict=True):
            cells.append(verdict_text(b))
    if any("opens" in b["breaker"] for b in builds.values()):  # absent in older reports
        timeline_header.append("breaker opens")
        for cells, b in zip(timeline, builds.values(), strict=True):
            cells.append(fmt(b["breaker"].get("opens")))
    if any("opens_from_closed" in b["breaker"] for b in builds.values()):
        timeline_header.append("opens from closed")
        for cells, b in zip(timeline, builds.values(), strict=True):
            cells.append(fmt(b["breaker"].get("opens_from_closed")))
    return ["## By phase", ""] + _table(header, rows) + _table(timeline_header, timeline)


def _named_dependencies(report: Report) -> dict[str, bool]:
    """The named dependencies (``pg`` aside) any build has figures of, in name order ->
    whether it is a TCP one (connections, not calls)."""
    named: dict[str, bool] = {}
    for b in report["builds"].values():
        for dep, figures in b.get("dependencies", {}).items():
            named[dep] = named.get(dep, False) or "connections" in figures
    return dict(sorted(named.items()))


def _dependency_cell(window: WindowFigures, dep: str, tcp: bool) -> str:
    """A named dependency's figure in one phase: calls per request, or a TCP one's
    connections."""
    figures: Mapping[str, object] = window.get("dependencies", {}).get(dep) or {}
    value = figures.get("connections" if tcp else "per_request")
    return fmt(value if isinstance(value, int | float) else None)


def _kept_section(report: Report) -> list[str]:
    """Service kept (seed 004): per endpoint, the share answered 2xx and the share of it
    answered from a cache, over the whole window and each phase. Absent for reports
    written before these figures."""
    builds = report["builds"]
    endpoints = list(report["endpoints"])
    if not any("kept_pct" in s for b in builds.values() for s in b["endpoints"].values()):
        return []

    def cell(window: WindowFigures | BuildReport, ep: str) -> str:
        stats = window["endpoints"].get(ep)
        if stats is None or "kept_pct" not in stats:
            return "-"
        return f"{fmt(stats['kept_pct'], '%')} / {fmt(stats.get('cached_pct'), '%')}"

    rows = [["whole", build, *(cell(b, ep) for ep in endpoints)] for build, b in builds.items()]
    for phase in report["phases"]:
        for build, b in builds.items():
            window = b.get("phases", {}).get(phase["name"])
            if window is not None:
                rows.append([phase["name"], build, *(cell(window, ep) for ep in endpoints)])
    header = ["window", "build", *(f"{ep} kept / cached" for ep in endpoints)]
    return ["## Service kept (answered 2xx / of which from a cache)", ""] + _table(header, rows)


def _ledger_section(report: Report) -> list[str]:
    """What the payment gateway ``pg`` saw, and payments it approved that the target recorded
    otherwise: only where the run played ``pg``."""
    if not plays_pg(report):
        return []
    rows = []
    for build, b in report["builds"].items():
        led = b.get("ledger")
        if not led:
            continue
        rec = led.get("reconciliation", {})
        rows.append(
            [
                build,
                fmt(led["calls"]),
                fmt(led["keys"]),
                fmt(led["duplicate_keys"]),
                fmt(led["max_calls_per_key"]),
                fmt(led["approved_at_gateway"]),
                fmt(rec.get("approved_but_failed")),
                fmt(rec.get("approved_but_unknown")),
            ]
        )
    if not rows:
        return []
    return [PG_LEDGER_TITLE, ""] + _table(PG_LEDGER_HEADER, rows)


def terminal_table(report: Report) -> Table:
    """The headline table for the terminal; every text is literal (a ``[`` is not markup)."""
    table = Table(title=Text(f"{report['scenario']} ({report['status']})"))
    for i, col in enumerate(table_header(report)):
        table.add_column(Text(col), justify="left" if i == 0 else "right")
    for cells in headline_rows(report):
        table.add_row(*(Text(c) for c in cells))
    return table
