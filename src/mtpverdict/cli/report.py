"""The `report` command: write report.md, report.html and plots for a results directory and its decision.

Bad input (a results directory, a policy or a decision file that is not mtpverdict.decision/2) prints
one `Error: ...` line per problem and exits 2; no report is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mtpverdict.cli._common import EXIT_BAD_INPUT, echo
from mtpverdict.cli._common import fail_input as _fail_input


def register(app: typer.Typer) -> None:
    """Add `report` to the main application."""
    app.command("report")(report)


def report(
    results: Annotated[Path, typer.Argument(help="Results directory (campaign.json + records.jsonl).")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory to write report.md, report.html, plots/.")
    ],
    decision: Annotated[
        Path | None,
        typer.Option("--decision", "-d", help="Decision JSON written by `decide` (default: decide here)."),
    ] = None,
    rules: Annotated[
        str | None,
        typer.Option("--rules", "-r", help="Policy TOML file or shipped policy name, when deciding here."),
    ] = None,
    noise_history: Annotated[
        list[Path] | None,
        typer.Option("--noise-history", help="Archived A/A results of the same seat, when deciding here."),
    ] = None,
) -> None:
    """Write a report of a decision and its evidence: tables, plots, report.md and report.html."""
    from mtpverdict._text import terminal_safe
    from mtpverdict.errors import InputError
    from mtpverdict.report import load_report_data, write_report

    try:
        data = load_report_data(results, decision=decision, rules=rules, noise_history=noise_history or [])
    except InputError as exc:
        _fail_input(exc)
    try:
        written = write_report(data, out)
    except OSError as exc:
        echo(f"Error: {out}: cannot write the report: {exc.strerror or exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    from mtpverdict.report.verdict import decision_words

    d = data.decision
    selected = f" {d.selected_arm}" if d.selected_arm is not None else ""
    echo(terminal_safe(f"{data.campaign_label}: {decision_words(d.decision)}{selected}"))
    for line in written.skipped:
        echo(f"not plotted: {terminal_safe(line)}")
    echo(f"wrote {written.markdown}, {written.html} and {len(written.images)} plot files")
