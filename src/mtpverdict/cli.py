"""The command line: each command parses options, calls one library function, renders, and exits.

Exit codes: 0 done (a decision was written, inconclusive included), 1 the gate refused, 2 bad input,
3 inconclusive under --strict, 4 a campaign could not be completed (resume it), 5 collect ran but a
boot failed or was refused, 130 interrupted.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mtpverdict._cli_common import (
    EXIT_BAD_INPUT,
    EXIT_BOOTS_FAILED,
    EXIT_INCOMPLETE,
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
)
from mtpverdict._cli_common import fail as _fail
from mtpverdict._cli_common import fail_input as _fail_input
from mtpverdict.errors import InputError, MtpverdictError

app = typer.Typer(
    name="mtpverdict",
    help="Decide whether a serving seat should run MTP / speculative decoding, and at which depth.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def validate(
    results: Annotated[Path, typer.Argument(help="Results directory (campaign.json + records.jsonl).")],
) -> None:
    """Check a results directory against results format v1; print record counts per kind and arm."""
    from tabulate import tabulate

    from mtpverdict.formats.results_io import load_results

    try:
        loaded = load_results(results)
    except InputError as exc:
        _fail_input(exc)
    counts = loaded.counts()
    arms = [a.name for a in loaded.campaign.arms]
    rows = [[arm, *(counts[kind].get(arm, 0) for kind in counts)] for arm in arms]
    typer.echo(f"{results}: valid ({loaded.campaign.id}: {loaded.campaign.title})")
    if loaded.campaign.synthetic:
        typer.echo("synthetic: these records were generated, not measured")
    typer.echo(tabulate(rows, headers=["arm", *counts.keys()], tablefmt="simple"))
    for warning in loaded.warnings:
        typer.echo(f"warning: {warning}")


@app.command()
def decide(
    results: Annotated[Path, typer.Argument(help="Results directory to decide on.")],
    rules: Annotated[
        str | None,
        typer.Option("--rules", "-r", help="Policy TOML file or shipped policy name (default: default)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Decision JSON path (default: RESULTS/decision.json).")
    ] = None,
    noise_history: Annotated[
        list[Path] | None,
        typer.Option("--noise-history", help="Archived results of A/A pairs of the same seat (repeatable)."),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 3 when the decision is inconclusive.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the decision line.")] = False,
) -> None:
    """Decide whether to run speculative decoding and at which depth; write the decision JSON."""
    from mtpverdict._jsonio import atomic_write
    from mtpverdict.decide import decide_directory, render_summary

    try:
        run = decide_directory(results, rules, noise_history or [])
    except InputError as exc:
        _fail_input(exc)
    target = out if out is not None else results / "decision.json"
    try:
        atomic_write(target, run.json_text)
    except OSError as exc:
        _fail(f"{target}: cannot write the decision: {exc.strerror}")
    d = run.decision
    if quiet:
        selected = f" {d.selected.name}" if d.selected is not None else ""
        typer.echo(f"{d.decision}{selected}")
    else:
        typer.echo(render_summary(d), nl=False)
        typer.echo(f"\nwrote {target}")
    if strict and d.decision == "inconclusive":
        raise typer.Exit(EXIT_INCONCLUSIVE)


@app.command()
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
    rules: Annotated[
        str | None, typer.Option("--rules", "-r", help="Policy for --until-resolved (default: default).")
    ] = None,
    assume_tps: Annotated[float, typer.Option("--assume-tps", help="Dry run: tok/s per stream.")] = 50.0,
    assume_boot: Annotated[
        float, typer.Option("--assume-boot-seconds", help="Dry run: seconds per boot.")
    ] = 120.0,
    shard: Annotated[
        str | None, typer.Option("--shard", help="I/N: run only device I (from 0) of N, into OUT.")
    ] = None,
) -> None:
    """Run a campaign: boot each arm in order, measure every cell, record results format v1."""
    from mtpverdict._describe import describe_exception
    from mtpverdict.collect import Collector, CollectOutcome, Event, dry_run_report, load_campaign_file
    from mtpverdict.collect.shard import check_shard, parse_shard
    from mtpverdict.errors import CollectError

    try:
        plan = load_campaign_file(campaign)
        part = None if shard is None else parse_shard(shard)
        if part is not None:
            check_shard(plan, part, until_resolved=until_resolved)
    except InputError as exc:
        _fail_input(exc)
    except (ValueError, CollectError) as exc:
        _fail(str(exc))
    variables: dict[str, str] = {}
    for item in var or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            _fail(f"--var {item!r}: write NAME=VALUE")
        variables[name] = value
    missing = plan.undefined(variables)
    if missing:
        _fail(f"{campaign}: server.command needs --var for {', '.join(missing)}")
    policy = None
    if until_resolved:
        from mtpverdict.rules import load_policy

        try:
            policy = load_policy(rules)
        except InputError as exc:
            _fail_input(exc)
    if dry_run:
        try:
            lines = dry_run_report(
                plan,
                out,
                variables=variables,
                resume=resume,
                allow_argv_mismatch=allow_argv_mismatch,
                until_resolved=until_resolved,
                stream_tps=assume_tps,
                boot_seconds=assume_boot,
            )
        except CollectError as exc:
            _fail(str(exc))
        except InputError as exc:
            _fail_input(exc)
        typer.echo("\n".join(lines))
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=False,
    )
    task = progress.add_task("boots", total=None)

    def on_event(event: Event) -> None:
        if event.kind == "plan":
            progress.update(task, total=event.total)
        elif event.kind == "boot":
            progress.update(task, description=f"{event.arm} boot {event.boot}: starting")
        elif event.kind == "run":
            progress.update(task, description=f"{event.arm} boot {event.boot}: {event.detail}")
        elif event.kind == "arm_done":
            progress.console.print(event.detail, soft_wrap=True, highlight=False, markup=False)
            progress.update(task, completed=event.done)
        elif event.kind == "note":
            progress.console.print(
                f"note: {event.arm} boot {event.boot}: {event.detail}",
                soft_wrap=True,
                highlight=False,
                markup=False,
            )

    try:
        with progress:
            collector = Collector(
                plan,
                out,
                variables=variables,
                resume=resume,
                allow_argv_mismatch=allow_argv_mismatch,
                on_event=on_event,
                until_resolved=policy,
                retry_failed=retry_failed,
                shard=part,
            )
            summary = collector.run()
    except CollectError as exc:
        _fail(str(exc))
    except InputError as exc:
        _fail_input(exc)
    except OSError as exc:
        _fail(
            f"{out}: {exc.strerror or describe_exception(exc)}; the records written so far are valid, "
            "resume with --resume",
            EXIT_INCOMPLETE,
        )
    if summary.skipped_boots or summary.stopped_early:
        typer.echo(
            f"adaptive: {summary.skipped_boots} planned boots skipped for arms already settled"
            + ("; stopped early: every candidate settled" if summary.stopped_early else "")
        )
    typer.echo(
        f"{summary.boots} boots ({summary.failed_boots} failed), {summary.requests} requests "
        f"({summary.request_errors} errors), {summary.records} records written to {out}"
    )
    if summary.outcome == CollectOutcome.INTERRUPTED:
        typer.echo("interrupted: the results directory is valid; continue with --resume", err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.outcome == CollectOutcome.BOOTS_FAILED:
        for line in summary.failed:
            typer.echo(f"failed boot: {line}", err=True)
        raise typer.Exit(EXIT_BOOTS_FAILED)


@app.command()
def merge(
    shards: Annotated[list[Path], typer.Argument(help="Results directories of the shards.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Merged results directory (must not exist).")],
) -> None:
    """Join the shards of a campaign laid out over devices into one results directory."""
    from mtpverdict.merge import merge_results

    try:
        summary = merge_results(shards, out)
    except InputError as exc:
        _fail_input(exc)
    typer.echo(
        f"{summary.shards} of {summary.expected} shards merged into {out}: {summary.records} records"
        + (f"; {summary.owed_boots} boots never run recorded as failed" if summary.owed_boots else "")
    )
    for line in summary.missing:
        typer.echo(f"missing: {line}", err=True)


@app.command()
def gate(
    results: Annotated[Path, typer.Argument(help="Results directory the decision rests on.")],
    proposed: Annotated[
        str | None,
        typer.Option(
            "--proposed",
            help="What is promoted: off, k=N, METHOD:k=N, or the config JSON (default: the spec "
            "in --serve-config).",
        ),
    ] = None,
    rules: Annotated[
        str | None, typer.Option("--rules", "-r", help="Policy TOML file or shipped policy name.")
    ] = None,
    serve_config: Annotated[
        Path | None,
        typer.Option("--serve-config", help="Proposed serve args: a docker compose file or an argv file."),
    ] = None,
    service: Annotated[str | None, typer.Option("--service", help="Compose service to read.")] = None,
    ignore_arg: Annotated[
        list[str] | None, typer.Option("--ignore-arg", help="A serve flag allowed to differ (repeatable).")
    ] = None,
) -> None:
    """Gate a config promotion: exit 0 when the evidence supports it, 1 when not, 2 on bad input."""
    import os

    from mtpverdict.gate import gate as run_gate
    from mtpverdict.gate import write_ci_error, write_ci_files

    try:
        result = run_gate(
            results,
            rules,
            proposed,
            serve_config=None if serve_config is None else str(serve_config),
            service=service,
            ignore=tuple(ignore_arg or ()),
        )
    except InputError as exc:
        try:
            write_ci_error(exc, os.environ)
        finally:
            _fail_input(exc)
    head = "supported" if result.supported else "refused"
    typer.echo(
        f"{result.label}: {head} (decision {result.decision}"
        + (f", selected {result.selected})" if result.selected else ")")
    )
    for reason in result.reasons:
        typer.echo(f"  {reason}")
    try:
        write_ci_files(result, os.environ)
    except InputError as exc:
        _fail_input(exc)
    if not result.supported:
        raise typer.Exit(EXIT_REFUSED)


@app.command()
def verify(
    decision: Annotated[Path, typer.Argument(help="A decision JSON written by decide.")],
    results: Annotated[Path, typer.Argument(help="The results directory it was decided on.")],
    rules: Annotated[
        str | None, typer.Option("--rules", "-r", help="Policy file (default: the shipped policy it names).")
    ] = None,
) -> None:
    """Recompute the input hashes and the decision; exit 0 when both match, 1 when not."""
    from mtpverdict.verify import verify as run_verify

    try:
        result = run_verify(decision, results, rules)
    except InputError as exc:
        _fail_input(exc)
    for line in result.lines:
        typer.echo(line)
    typer.echo("verified" if result.matches else "MISMATCH: the decision does not follow from these inputs")
    if not result.matches:
        raise typer.Exit(EXIT_REFUSED)


def _register_engine_commands() -> None:
    from mtpverdict.cli_engine import register
    from mtpverdict.cli_report import register as register_report
    from mtpverdict.cli_sim import register as register_sim

    register(app)
    register_report(app)
    register_sim(app)


_register_engine_commands()

rules_app = typer.Typer(help="Check and show policy (rules) files.", no_args_is_help=True)
app.add_typer(rules_app, name="rules")


@rules_app.command("check")
def rules_check(
    files: Annotated[list[str], typer.Argument(help="Rules TOML files or shipped policy names.")],
) -> None:
    """Validate rules files; errors name the file, the rule and the key."""
    from mtpverdict.rules import load_policy

    failed: list[InputError] = []
    for name in files:
        try:
            policy = load_policy(name)
        except InputError as exc:
            failed.append(exc)
            continue
        typer.echo(f"{name}: valid ({policy.name}, {len(policy.rules)} rules)")
    if failed:
        problems = [p for exc in failed for p in exc.problems]
        _fail_input(InputError(problems, total=sum(exc.total for exc in failed)))


@rules_app.command("show")
def rules_show(
    name: Annotated[
        str | None, typer.Argument(help="Shipped policy name or TOML path (default: the embedded default).")
    ] = None,
) -> None:
    """Print a policy's settings and its rules as tables."""
    from tabulate import tabulate

    from mtpverdict.rules import load_policy, shipped_policies

    try:
        policy = load_policy(name)
    except InputError as exc:
        _fail_input(exc)
    typer.echo(f"{policy.name}: {policy.description}")
    typer.echo(
        f"source {policy.source}  sha256 {policy.sha256[:16]}  shipped: {', '.join(shipped_policies())}"
    )
    settings: list[list[str]] = [
        ["alpha", str(policy.alpha)],
        ["equivalence_margin", str(policy.equivalence_margin)],
        ["cold runs", policy.cold],
        [
            "floor when unknown",
            policy.floor_when_unknown
            + (f" ({policy.floor_assumed})" if policy.floor_assumed is not None else ""),
        ],
        [
            "selection",
            f"{policy.selection_mode} on {policy.selection_metric}"
            + (f", reference {policy.selection_reference}" if policy.selection_reference else ""),
        ],
        [
            "drift / blind",
            f"max {policy.max_drift}, on drift {policy.on_drift}; blind gain "
            f"{policy.blind_min_gain}, on blind {policy.on_blind}",
        ],
        ["void", f"upper bound below {policy.void_max_acceptance} on >= {policy.void_min_drafted} drafted"],
    ]
    typer.echo(tabulate(settings, tablefmt="plain"))
    rows = [
        [
            r.id,
            r.kind,
            r.severity,
            r.on_missing,
            ", ".join(f"{k}={v}" for k, v in r.params if v is not None)
            + (f" [arms {', '.join(r.arms)}]" if r.arms else "")
            + (f" [families {', '.join(r.families)}]" if r.families else ""),
        ]
        for r in policy.rules
    ]
    typer.echo(
        tabulate(rows, headers=["rule", "kind", "severity", "on missing", "parameters"], tablefmt="simple")
    )


def _version(value: bool) -> None:
    if value:
        from mtpverdict._version import __version__

        typer.echo(f"mtpverdict {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Decide whether a serving seat should run MTP / speculative decoding, and at which depth."""


def main() -> None:
    """Console-script entry: run the app, turning any library error into one line and exit 2."""
    try:
        app()
    except MtpverdictError as exc:  # a library error that a command did not map: still one line
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
