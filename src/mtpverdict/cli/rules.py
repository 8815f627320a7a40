"""Commands over policy files: `rules check` validates them, `rules show` prints one."""

from __future__ import annotations

from typing import Annotated

import msgspec
import typer

from mtpverdict._text import terminal_safe
from mtpverdict.cli._common import echo, fail_input
from mtpverdict.errors import InputError

app = typer.Typer(help="Check and show policy (rules) files.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the `rules` group."""
    root.add_typer(app, name="rules")


@app.command("check")
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
        echo(terminal_safe(f"{name}: valid ({policy.name}, {len(policy.rules)} rules)"))
        problem = policy.veto_problem()
        if problem is not None:
            echo(terminal_safe(f"warning: {name}: {problem}"))
    if failed:
        problems = [p for exc in failed for p in exc.problems]
        fail_input(InputError(problems, total=sum(exc.total for exc in failed)))


@app.command("show")
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
        fail_input(exc)
    echo(terminal_safe(f"{policy.name}: {policy.description}"))
    echo(
        f"source {terminal_safe(policy.source)}  sha256 {policy.sha256[:16]}  "
        f"shipped: {', '.join(shipped_policies())}"
    )
    floor, selection, controls = policy.floor, policy.selection, policy.controls
    settings: list[list[str]] = [
        ["alpha", str(policy.alpha)],
        ["equivalence_margin", str(policy.equivalence_margin)],
        ["cold runs", str(policy.runs.cold)],
        [
            "floor when unknown",
            f"{floor.when_unknown}" + (f" ({floor.assumed})" if floor.assumed is not None else ""),
        ],
        [
            "selection",
            f"{selection.mode} on {selection.metric}"
            + (f", reference {selection.reference}" if selection.reference else ""),
        ],
        [
            "drift / blind",
            f"max {controls.max_drift}, on drift {controls.on_drift}; blind gain "
            f"{controls.blind_min_gain}, on blind {controls.on_blind}",
        ],
        [
            "void",
            f"upper bound below {controls.void_max_acceptance} on >= {controls.void_min_drafted} drafted",
        ],
    ]
    echo(tabulate([[terminal_safe(c) for c in row] for row in settings], tablefmt="plain"))
    rows = [
        [
            r.id,
            r.kind,
            str(r.severity),
            str(r.on_missing),
            ", ".join(
                f"{k}={v}" for k, v in sorted(msgspec.structs.asdict(r.params).items()) if v is not None
            )
            + (f" [arms {', '.join(r.arms)}]" if r.arms else "")
            + (f" [families {', '.join(r.families)}]" if r.families else ""),
        ]
        for r in policy.rules
    ]
    rows = [[terminal_safe(c) for c in row] for row in rows]
    echo(tabulate(rows, headers=["rule", "kind", "severity", "on missing", "parameters"], tablefmt="simple"))
