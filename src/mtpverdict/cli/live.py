"""After promotion: `alerts` (Prometheus rules from a decision) and `watch` (a live seat against it).

`alerts` exits 0 when the rules are written and 2 on bad input. `watch` exits 0 when the evidence held
for the whole watch, 6 when the live mean acceptance length fell below break-even, 7 when the live
acceptance fell below the campaign's measured interval, 8 when tokens were generated but nothing was
drafted, 9 when /metrics could not be read, 10 when no window was judged, 2 on bad input and 130 when
interrupted. Failing windows in a row end the watch once --confirm of them are seen, with the most
severe status among them; failing windows still in a row when --for runs out end it with theirs too
(live/watch.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mtpverdict._text import terminal_safe
from mtpverdict.cli._common import (
    EXIT_BAD_INPUT,
    EXIT_BELOW_BREAK_EVEN,
    EXIT_BELOW_EVIDENCE,
    EXIT_INTERRUPTED,
    EXIT_NO_DRAFTING,
    EXIT_NOT_JUDGED,
    EXIT_UNREACHABLE,
    echo,
    fail,
    fail_input,
)
from mtpverdict.engines import registry
from mtpverdict.errors import InputError

if TYPE_CHECKING:
    from mtpverdict.live.reference import Reference
    from mtpverdict.live.watch import WatchResult, WindowReport

# the engines whose /metrics counters `alerts` takes a rate of (live/alerts.py COUNTERS)
ALERT_ENGINES = tuple(str(e) for e in registry.ENGINES if registry.has(e, "metric_counters"))
DecisionArgument = Annotated[Path, typer.Argument(help="Decision JSON written by `decide`.")]
ArmOption = Annotated[
    str | None,
    typer.Option("--arm", help="Candidate arm to judge by (default: the decision's selected arm)."),
]


def register(app: typer.Typer) -> None:
    """Add alerts and watch."""
    app.command("alerts")(alerts)
    app.command("watch")(watch)


def alerts(
    decision: DecisionArgument,
    out: Annotated[Path, typer.Option("--out", "-o", help="Rules file to write (YAML).")],
    arm: ArmOption = None,
    engine: Annotated[
        str | None,
        typer.Option("--engine", help=f"{' or '.join(ALERT_ENGINES)} (default: the campaign's engine)."),
    ] = None,
    window: Annotated[str, typer.Option("--window", help="rate() window of the recording rules.")] = "5m",
    hold: Annotated[str, typer.Option("--for", help="How long a condition lasts before it fires.")] = "10m",
    match: Annotated[
        list[str] | None,
        typer.Option(
            "--match", help='A label matcher for the engine\'s series, e.g. model_name="qwen" (repeatable).'
        ),
    ] = None,
) -> None:
    """Write Prometheus alerting and recording rules for a decision's arm (break-even, evidence, drafting)."""
    from mtpverdict._jsonio import atomic_write
    from mtpverdict.live.alerts import AlertOptions, engine_of, rules_yaml
    from mtpverdict.live.reference import load_reference

    try:
        ref = load_reference(decision, arm)
        options = AlertOptions(engine_of(ref, engine), window, hold, tuple(match or ()))
        text = rules_yaml(ref, options)
    except InputError as exc:
        fail_input(exc)
    if not out.parent.is_dir():
        fail(f"{out}: the directory {out.parent} does not exist (alerts creates no directory)")
    try:
        atomic_write(out, text)
    except OSError as exc:
        echo(f"Error: {out}: cannot write the rules: {exc.strerror or exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    bound = (
        "no break-even"
        if ref.bound_length is None
        else f"break-even {ref.bound_length:.3f} at {ref.bound_cell}"
    )
    low = "no measured interval" if ref.rate_low is None else f"acceptance above {ref.rate_low:.3f}"
    echo(terminal_safe(f"{ref.arm} ({ref.label}), decision {ref.short_hash}: {bound}; {low}"))
    if ref.bound_length is not None and ref.length is not None and ref.length <= ref.bound_length:
        echo(
            terminal_safe(
                f"note: the measured mean acceptance length {ref.length:.3f} is itself below that bound: "
                "the break-even alert fires as soon as the seat serves like the evidence"
            )
        )
    echo(f"wrote {terminal_safe(str(out))}")


def watch(
    url: Annotated[str, typer.Argument(help="The server's base URL (or its /metrics URL).")],
    decision: Annotated[Path, typer.Option("--decision", "-d", help="Decision JSON written by `decide`.")],
    arm: ArmOption = None,
    window: Annotated[str, typer.Option("--window", help="Time between scrapes: one judged window.")] = "60s",
    duration: Annotated[str, typer.Option("--for", help="How long to watch.")] = "10m",
    confirm: Annotated[
        int, typer.Option("--confirm", min=1, help="Consecutive failing windows that end the watch.")
    ] = 2,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per window, then the outcome.")
    ] = False,
) -> None:
    """Judge a live server's acceptance, window by window, against the decision's evidence and break-even."""
    import asyncio

    from mtpverdict.live.alerts import duration_seconds
    from mtpverdict.live.reference import load_reference
    from mtpverdict.live.watch import Status, WatchOptions, check_watch, metrics_url, watch_url

    try:
        metrics_url(url)
        options = WatchOptions(
            window=duration_seconds(window, "watch", "--window"),
            duration=duration_seconds(duration, "watch", "--for"),
            confirm=confirm,
        )
        check_watch(options)
        ref = load_reference(decision, arm)
    except InputError as exc:
        fail_input(exc)
    if as_json:
        echo(json.dumps({"reference": _reference_json(ref)}, sort_keys=True))
    else:
        echo(terminal_safe(_reference_line(ref)))

    def report(w: WindowReport) -> None:
        echo(json.dumps(w.to_json(), sort_keys=True) if as_json else terminal_safe(_window_line(w)))

    try:
        result = asyncio.run(watch_url(ref, url, options, report))
    except KeyboardInterrupt:
        echo("interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    codes = {
        Status.BELOW_BREAK_EVEN: EXIT_BELOW_BREAK_EVEN,
        Status.BELOW_EVIDENCE: EXIT_BELOW_EVIDENCE,
        Status.NO_DRAFTING: EXIT_NO_DRAFTING,
        Status.UNREACHABLE: EXIT_UNREACHABLE,
        Status.NOT_JUDGED: EXIT_NOT_JUDGED,
    }
    if as_json:
        echo(json.dumps(_outcome_json(result), sort_keys=True))
    else:
        echo(_outcome_line(result))
    raise typer.Exit(codes.get(result.status, 0))


def _outcome_json(result: WatchResult) -> dict[str, object]:
    return {
        "outcome": str(result.status),
        "windows": result.windows,
        "streak": result.streak,
        "confirmed": result.confirmed,
        "judged": result.judged,
    }


def _outcome_line(result: WatchResult) -> str:
    from mtpverdict.live.watch import Status

    if result.status is Status.HOLDS:
        return f"the evidence held over {result.windows} windows"
    if result.status is Status.NOT_JUDGED:
        return f"not_judged: none of the {result.windows} windows was judged (idle, reset or unreachable)"
    if result.confirmed:
        return f"{result.status} in {result.streak} consecutive windows (window {result.windows})"
    return (
        f"{result.status} in the last {result.streak} consecutive windows when the watch ended "
        f"(window {result.windows}; fewer than --confirm, but the evidence did not hold at the end)"
    )


def _reference_json(ref: Reference) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(ref)


def _reference_line(ref: Reference) -> str:
    measured = "no measured interval"
    if ref.rate is not None and ref.rate_low is not None and ref.rate_high is not None:
        measured = f"measured acceptance {ref.rate:.3f} [{ref.rate_low:.3f}, {ref.rate_high:.3f}]"
    bound = "no break-even"
    if ref.bound_length is not None:
        bound = f"break-even length {ref.bound_length:.3f} ({ref.bound_cell})"
    return f"watching against {ref.arm} ({ref.label}), decision {ref.short_hash}: {measured}; {bound}"


def _window_line(w: WindowReport) -> str:
    if w.rate is None:
        return f"window {w.window}: {w.status}" + ("" if w.note is None else f" ({w.note})")
    interval = "" if w.rate_low is None or w.rate_high is None else f" [{w.rate_low:.3f}, {w.rate_high:.3f}]"
    length = "" if w.length is None else f", length {w.length:.3f}"
    if w.length_low is not None and w.length_high is not None:
        length += f" [{w.length_low:.3f}, {w.length_high:.3f}]"
    counts = f"{w.accepted_tokens}/{w.draft_tokens} tokens"
    note = "" if w.note is None else f"; {w.note}"
    return f"window {w.window}: {w.status}: acceptance {w.rate:.3f}{interval}{length} ({counts}){note}"
