"""Commands over a results directory: `validate` it, `decide` on it, `verify` a decision made on it."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mtpverdict._text import terminal_safe
from mtpverdict.cli._common import (
    EXIT_INCONCLUSIVE,
    EXIT_REFUSED,
    NoiseHistoryOption,
    RulesOption,
    decision_style,
    echo,
    echo_styled,
    fail,
    fail_input,
    terminal_width,
)
from mtpverdict.errors import InputError, Problem

if TYPE_CHECKING:
    from mtpverdict.decide import DecisionRun


def register(app: typer.Typer) -> None:
    """Add validate, decide and verify."""
    app.command("validate")(validate)
    app.command("decide")(decide)
    app.command("verify")(verify)


def validate(
    results: Annotated[Path, typer.Argument(help="Results directory (campaign.json + records.jsonl).")],
) -> None:
    """Check a results directory against results format v1; print record counts per kind and arm."""
    from tabulate import tabulate

    from mtpverdict.formats.results_io import load_results

    try:
        loaded = load_results(results)
    except InputError as exc:
        fail_input(exc)
    counts = loaded.counts()
    arms = [a.name for a in loaded.campaign.arms]
    rows = [[arm, *(counts[kind].get(arm, 0) for kind in counts)] for arm in arms]
    echo(terminal_safe(f"{results}: valid ({loaded.campaign.id}: {loaded.campaign.title})"))
    if loaded.campaign.synthetic:
        echo("synthetic: these records were generated, not measured")
    echo(tabulate(rows, headers=["arm", *counts.keys()], tablefmt="simple"))
    for warning in loaded.warnings:
        echo(f"warning: {terminal_safe(warning)}")


def decide(
    results: Annotated[Path, typer.Argument(help="Results directory to decide on.")],
    rules: RulesOption = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Decision JSON path (default: RESULTS/decision.json).")
    ] = None,
    noise_history: NoiseHistoryOption = None,
    any_seat: Annotated[
        bool,
        typer.Option(
            "--noise-history-any-seat",
            help="Use --noise-history archives whose seat (engine, version, device, model, serve "
            "arguments) differs; the decision says how.",
        ),
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 3 when the decision is inconclusive.")
    ] = False,
    what_if: Annotated[
        bool,
        typer.Option(
            "--what-if",
            help="Read the campaign under the policy as its first look, counting and recording no "
            "look: a reading, not a decision (its JSON, written only with --out outside RESULTS, says so).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the decision line.")] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Also print every arm's runs, the regime map, the schedule and every reason.",
        ),
    ] = False,
) -> None:
    """Decide whether to run speculative decoding and at which depth; write the decision JSON.

    Every decision on RESULTS is a look recorded in RESULTS/raw/looks.jsonl, wherever its JSON goes;
    --what-if records none (its JSON, written only with --out outside RESULTS, says so).
    """
    from mtpverdict.decide import decide_with, load_histories
    from mtpverdict.formats.looks import held_looks
    from mtpverdict.formats.results_io import load_results
    from mtpverdict.rules import load_policy

    try:
        policy = load_policy(rules)
        problem = policy.veto_problem()
        if problem is not None and strict:
            raise InputError([Problem(policy.source, f"{problem}; --strict refuses such a policy")])
    except InputError as exc:
        fail_input(exc)
    if what_if and strict:
        fail("--strict gates on a decision, and a what-if is none: decide without --what-if")
    target = out if out is not None else None if what_if else results / "decision.json"
    if target is not None and _inside(results, target) and what_if:
        fail(f"{target}: a what-if records no look, so it is not kept in the results directory")
    try:  # read before the lock: a refused input leaves the directory as it was
        loaded = load_results(results)
        histories = load_histories(loaded, policy, noise_history or [], any_seat=any_seat)
    except InputError as exc:
        fail_input(exc)
    if target is not None:
        _writable(target)
    # a decision plans and records its look with no handover in between; a what-if records nothing
    with contextlib.nullcontext() if what_if else held_looks(results):
        try:
            run = decide_with(loaded, policy, histories, what_if=what_if)
        except InputError as exc:
            fail_input(exc)
        _record(results, run)
        _write(target, run.json_text)
    if problem is not None:
        echo(f"warning: {terminal_safe(policy.source)}: {problem}", err=True)
    code = EXIT_INCONCLUSIVE if strict and run.decision.decision == "inconclusive" else 0
    _print(run, results, target, code, quiet=quiet, verbose=verbose)
    if code:
        raise typer.Exit(code)


def _record(results: Path, run: DecisionRun) -> None:
    """Record the decision's look in the results directory before its JSON is written anywhere (a
    write that fails then leaves the look spent, and deciding again is that look again)."""
    from mtpverdict.formats.looks import LOOKS_FILE, append_look

    if run.look is None:
        return
    try:
        append_look(results, run.look)
    except OSError as exc:
        fail(
            f"{results / LOOKS_FILE}: cannot record this look: {exc.strerror}; decide where the results "
            "directory can be written, or read it with --what-if (no look, not a decision)"
        )


def _write(target: Path | None, text: str) -> None:
    from mtpverdict._jsonio import atomic_write

    if target is None:
        return
    try:
        atomic_write(target, text)
    except OSError as exc:
        fail(f"{target}: cannot write the decision: {exc.strerror}")


def _print(
    run: DecisionRun, results: Path, target: Path | None, code: int, *, quiet: bool, verbose: bool
) -> None:
    from mtpverdict.decide import WHAT_IF_REASON
    from mtpverdict.report.terminal import render_summary

    d = run.decision
    what = "what-if " if run.is_what_if else ""
    if quiet:
        echo(f"{what}{d.decision}{f' {d.selected_arm}' if d.selected_arm else ''}")
        return
    why = " (--strict: the decision is inconclusive)" if code else ""
    where = "nothing written" if target is None else f"{what}decision JSON written to {target}"
    footer = [f"exit {code}{why}; {where}"]
    if run.is_what_if:
        footer.insert(0, WHAT_IF_REASON)
    text = render_summary(
        d,
        str(run.policy.selection.metric),
        [w.id for w in run.results.campaign.workloads],
        width=terminal_width(),
        verbose=verbose,
        paths=(str(results), run.policy.source),
        footer=footer,
    )
    echo_styled(text, {"DECISION:": decision_style(str(d.decision))})


def _writable(target: Path) -> None:
    """Refuse, before any look is recorded, a target the decision cannot replace as a file: a
    directory, a FIFO or a device (the write would replace the node itself), or a missing folder. A
    symlink at the target is replaced, whatever it points to."""
    if not target.is_symlink() and target.exists() and not target.is_file():
        fail(f"{target}: is not a regular file (a directory, FIFO or device); write the decision to a file")
    if not target.parent.is_dir():
        fail(f"{target}: no such directory: {target.parent}")


def _inside(results: Path, target: Path) -> bool:
    """Whether the decision goes into the results directory, where the path is written, not where a
    symlink at it points (the write replaces the link). Refuses a target that is one of the
    directory's own files (records.jsonl, campaign.json, anything under raw/): the decision would
    replace it."""
    from mtpverdict.formats.results_io.common import CAMPAIGN_FILE, RAW_DIR, RECORDS_FILE

    where = target.parent.resolve() / target.name
    root = results.resolve()
    raw = (root / RAW_DIR).resolve()  # raw/ may be a link to another disk
    own = [(root / name, name) for name in (CAMPAIGN_FILE, RECORDS_FILE)]  # either may be a link
    files = {path: name for at, name in own for path in (at, at.resolve())}
    if where.is_relative_to(raw) or where in files:
        shown = files.get(where, f"{RAW_DIR}/")
        fail(f"{target}: is the results directory's own {shown}; write the decision elsewhere")
    return where.is_relative_to(root)


def verify(
    decision: Annotated[Path, typer.Argument(help="A decision JSON written by decide.")],
    results: Annotated[Path, typer.Argument(help="The results directory it was decided on.")],
    rules: Annotated[
        str | None, typer.Option("--rules", "-r", help="Policy file (default: the shipped policy it names).")
    ] = None,
) -> None:
    """Recompute the input hashes and the decision; exit 0 when both match, 1 when not (or the file
    is a what-if)."""
    from mtpverdict.decide.verify import verify as run_verify

    try:
        result = run_verify(decision, results, rules)
    except InputError as exc:
        fail_input(exc)
    for line in result.lines:
        echo(terminal_safe(line))
    if result.what_if:
        echo("NOT A DECISION: a what-if is a reading; decide without --what-if takes the look")
    else:
        echo("verified" if result.matches else "MISMATCH: the decision does not follow from these inputs")
    if not result.matches:
        raise typer.Exit(EXIT_REFUSED)
