"""The `collect` command: run a campaign against real servers and record results format v1."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mtpverdict._text import terminal_safe
from mtpverdict.cli._common import (
    EXIT_BOOTS_FAILED,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    RulesOption,
    echo,
    fail,
    fail_input,
)
from mtpverdict.engines.spec import CONFIG_FLAG
from mtpverdict.errors import CollectError, InputError

if TYPE_CHECKING:
    from rich.progress import Progress

    from mtpverdict.collect import CollectSummary, Event


def register(app: typer.Typer) -> None:
    """Add collect, merge and schedule-arm."""
    app.command("collect")(collect)
    app.command("merge")(merge)
    app.command("schedule-arm")(schedule_arm)


def collect(
    campaign: Annotated[Path, typer.Argument(help="Campaign TOML (campaign_version 1).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Results directory to write (or resume).")],
    var: Annotated[
        list[str] | None, typer.Option("--var", help="NAME=VALUE for a {NAME} placeholder (repeatable).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an interrupted campaign in OUT.")
    ] = False,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed",
            help="With --resume: boot again arms whose boot failed (the failed boot stays on record).",
        ),
    ] = False,
    allow_argv_mismatch: Annotated[
        bool, typer.Option("--allow-argv-mismatch", help="Run arms that differ in more than speculation.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan and its cost; run nothing.")
    ] = False,
    until_resolved: Annotated[
        bool,
        typer.Option(
            "--until-resolved", help="After each round of boots, stop booting arms already settled."
        ),
    ] = False,
    rules: RulesOption = None,
    assume_tps: Annotated[float, typer.Option("--assume-tps", help="Dry run: tok/s per stream.")] = 50.0,
    assume_boot: Annotated[
        float, typer.Option("--assume-boot-seconds", help="Dry run: seconds per boot.")
    ] = 120.0,
    shard: Annotated[
        str | None, typer.Option("--shard", help="I/N: run only device I (from 0) of N, into OUT.")
    ] = None,
    continues: Annotated[
        str | None,
        typer.Option(
            "--continues",
            help="DIR or ID: the earlier campaign this one continues; the alpha its looks spent is counted.",
        ),
    ] = None,
) -> None:
    """Run a campaign: boot each arm in order, measure every cell, record results format v1."""
    from mtpverdict.collect import Collector, dry_run_report, load_campaign_file
    from mtpverdict.collect.shard import check_shard, parse_shard

    try:
        plan = load_campaign_file(campaign)
        part = None if shard is None else parse_shard(shard)
        if part is not None:
            check_shard(plan, part, until_resolved=until_resolved)
    except InputError as exc:
        fail_input(exc)
    except (ValueError, CollectError) as exc:
        fail(str(exc))
    variables = _variables(var or [])
    missing = plan.undefined(variables)
    if missing:
        fail(f"{campaign}: server.command needs --var for {', '.join(missing)}")
    settled = _settled_callback(rules) if until_resolved else None
    try:
        if dry_run:
            lines = dry_run_report(
                plan,
                out,
                variables=variables,
                resume=resume,
                allow_argv_mismatch=allow_argv_mismatch,
                until_resolved=until_resolved,
                stream_tps=assume_tps,
                boot_seconds=assume_boot,
                continues=continues,
            )
            echo("\n".join(terminal_safe(line) for line in lines))
            return
        progress, on_event = _progress()
        with _drawn_once_started(progress):
            collector = Collector(
                plan,
                out,
                variables=variables,
                resume=resume,
                allow_argv_mismatch=allow_argv_mismatch,
                on_event=on_event,
                until_resolved=settled,
                retry_failed=retry_failed,
                shard=part,
                continues=continues,
            )
            summary = collector.run()
    except CollectError as exc:
        fail(str(exc))
    except InputError as exc:
        fail_input(exc)
    except OSError as exc:
        from mtpverdict._describe import describe_exception

        reason = exc.strerror or describe_exception(exc)
        fail(f"{out}: {reason}; the records written so far are valid, resume with --resume", EXIT_INCOMPLETE)
    _report(summary, out)


def _variables(items: list[str]) -> dict[str, str]:
    variables: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            fail(f"--var {item!r}: write NAME=VALUE")
        variables[name] = value
    return variables


def _settled_callback(rules: str | None) -> Callable[[Path], Mapping[str, str]]:
    """What --until-resolved asks after each round: the arms the policy has already settled."""
    from mtpverdict.decide import settled_arms
    from mtpverdict.rules import load_policy

    try:
        policy = load_policy(rules)
    except InputError as exc:
        fail_input(exc)
    return lambda results: settled_arms(results, policy)


@contextlib.contextmanager
def _drawn_once_started(progress: Progress) -> Iterator[None]:
    """Stop the bar on the way out, if an event ever started it."""
    try:
        yield
    finally:
        if progress.live.is_started:
            progress.stop()


def _progress() -> tuple[Progress, Callable[[Event], None]]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=False,
    )
    task = progress.add_task("boots", total=None)

    def say(text: str) -> None:
        progress.console.print(terminal_safe(text), soft_wrap=True, highlight=False, markup=False)

    def show(text: str) -> None:  # the description column reads no rich markup: it is data
        progress.update(task, description=terminal_safe(text))

    def on_event(event: Event) -> None:
        if not progress.live.is_started:  # a run refused before its first event draws no bar
            progress.start()
        if event.kind == "plan":
            progress.update(task, total=event.total)
        elif event.kind == "boot":
            show(f"{event.arm} boot {event.boot}: starting")
        elif event.kind == "run":
            show(f"{event.arm} boot {event.boot}: {event.detail}")
        elif event.kind == "arm_done":
            say(event.detail)
            progress.update(task, completed=event.done)
        elif event.kind == "note":  # a note about the whole campaign names no boot
            say(
                f"note: {event.arm} boot {event.boot}: {event.detail}"
                if event.arm
                else f"note: {event.detail}"
            )

    return progress, on_event


def _report(summary: CollectSummary, out: Path) -> None:
    from mtpverdict.collect import CollectOutcome

    if summary.skipped_boots or summary.stopped_early:
        echo(
            f"adaptive: {summary.skipped_boots} planned boots skipped for arms already settled"
            + ("; stopped early: every candidate settled" if summary.stopped_early else "")
        )
    echo(
        f"{summary.boots} boots ({summary.failed_boots} failed), {summary.requests} requests "
        f"({summary.request_errors} errors), {summary.records} records written to {out}"
    )
    if summary.outcome == CollectOutcome.INTERRUPTED:
        echo("interrupted: the results directory is valid; continue with --resume", err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.outcome == CollectOutcome.TERMINATED:
        echo("terminated (SIGTERM): the results directory is valid; continue with --resume", err=True)
        raise typer.Exit(EXIT_TERMINATED)
    if summary.outcome == CollectOutcome.BOOTS_FAILED:
        for line in summary.failed:
            echo(f"failed boot: {terminal_safe(line)}", err=True)
        raise typer.Exit(EXIT_BOOTS_FAILED)


def merge(
    shards: Annotated[list[Path], typer.Argument(help="Results directories of the shards.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Merged results directory (must not exist).")],
) -> None:
    """Join the shards of a campaign laid out over devices into one results directory."""
    from mtpverdict.collect.merge import merge_results

    try:
        summary = merge_results(shards, out)
    except InputError as exc:
        fail_input(exc)
    except OSError as exc:  # a full disk: the merge left nothing at OUT
        where = f"{exc.filename}: " if exc.filename else ""
        fail(
            f"{out}: cannot be written ({where}{exc.strerror or exc}); nothing was left there",
            EXIT_INCOMPLETE,
        )
    owed = f"; {summary.owed_boots} boots never run recorded as failed" if summary.owed_boots else ""
    echo(f"{summary.shards} of {summary.expected} shards merged into {out}: {summary.records} records{owed}")
    for line in summary.missing:
        echo(f"missing: {terminal_safe(line)}", err=True)


def schedule_arm(
    campaign: Annotated[Path, typer.Argument(help="The campaign TOML the decision was made on.")],
    decision: Annotated[Path, typer.Argument(help="Its decision in schedule mode (decide --out).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The confirmation campaign TOML (a new file).")],
    name: Annotated[
        str | None, typer.Option("--name", help="The new arm's name (default: METHOD_schedule).")
    ] = None,
    campaign_id: Annotated[
        str | None, typer.Option("--id", help="The new campaign's id (default: the id + '-confirm').")
    ] = None,
) -> None:
    """Write the campaign again with an arm serving a decision's schedule: its confirmation campaign."""
    from mtpverdict.collect.schedule_arm import write_schedule_arm

    try:
        made = write_schedule_arm(campaign, decision, out, name=name, campaign_id=campaign_id)
    except InputError as exc:
        fail_input(exc)
    except OSError as exc:
        fail(f"{out}: cannot be written: {exc.strerror or exc}")
    echo(f"wrote {out}: campaign {made.campaign_id}, arm {made.arm} (settings of {made.template}) serving")
    echo(f"  {CONFIG_FLAG} {shlex.quote(made.config)}")
    for arm in made.dropped:
        echo(f"left out {arm}: it ran another schedule")
    echo(f"next: mtpverdict collect {out} --out RESULTS, then decide RESULTS with [selection] confirm = true")
