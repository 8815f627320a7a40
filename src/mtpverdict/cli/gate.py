"""The `gate` command: does the evidence support promoting a serve configuration? Exit 0, 1 or 2."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from mtpverdict._text import terminal_safe
from mtpverdict.cli._common import EXIT_REFUSED, RulesOption, echo, fail_input
from mtpverdict.errors import InputError


def register(app: typer.Typer) -> None:
    """Add gate."""
    app.command("gate")(gate)


def gate(
    results: Annotated[Path, typer.Argument(help="Results directory the decision rests on.")],
    proposed: Annotated[
        str | None,
        typer.Option(
            "--proposed",
            help="What is promoted: off, k=N, METHOD:k=N, or the config JSON "
            "(default: the spec in --serve-config).",
        ),
    ] = None,
    rules: RulesOption = None,
    serve_config: Annotated[
        Path | None,
        typer.Option("--serve-config", help="Proposed serve args: a docker compose file or an argv file."),
    ] = None,
    service: Annotated[str | None, typer.Option("--service", help="Compose service to read.")] = None,
    ignore_arg: Annotated[
        list[str] | None, typer.Option("--ignore-arg", help="A serve flag allowed to differ (repeatable).")
    ] = None,
    compose_file: Annotated[
        list[Path] | None,
        typer.Option(
            "--compose-file",
            help="A compose file the deployment passes with -f (repeatable, in order; default: the "
            "serve config, and the override file Compose loads beside it).",
        ),
    ] = None,
    project_directory: Annotated[
        Path | None,
        typer.Option("--project-directory", help="Compose's project directory (default: the first file's)."),
    ] = None,
    profile: Annotated[
        list[str] | None,
        typer.Option("--profile", help="A compose profile the deployment enables (repeatable)."),
    ] = None,
    env_file: Annotated[
        Path | None,
        typer.Option(
            "--env-file", help="The env file Compose interpolates from (default: the project's .env)."
        ),
    ] = None,
) -> None:
    """Gate a config promotion: exit 0 when the evidence supports it, 1 when not, 2 on bad input."""
    from mtpverdict.compose import ComposeOptions
    from mtpverdict.formats.decision import fill_paths
    from mtpverdict.gate import gate as run_gate
    from mtpverdict.gate import write_ci_error, write_ci_files

    compose = ComposeOptions(
        files=tuple(str(f) for f in compose_file or ()),
        project_dir=None if project_directory is None else str(project_directory),
        profiles=tuple(profile or ()),
        env_file=None if env_file is None else str(env_file),
    )

    try:
        result = run_gate(
            results,
            rules,
            proposed,
            serve_config=None if serve_config is None else str(serve_config),
            service=service,
            ignore=tuple(ignore_arg or ()),
            compose=compose,
        )
    except InputError as exc:
        try:
            write_ci_error(exc, os.environ)
        finally:
            fail_input(exc)
    head = "supported" if result.supported else "refused"
    selected = f", selected {result.selected})" if result.selected else ")"
    echo(terminal_safe(f"{result.label}: {head} (decision {result.decision}{selected}"))
    for reason in result.reasons:  # a decision's next step names the results directory RESULTS
        echo(f"  {terminal_safe(fill_paths(reason, str(results)))}")
    try:
        write_ci_files(result, os.environ)
    except InputError as exc:
        fail_input(exc)
    if not result.supported:
        raise typer.Exit(EXIT_REFUSED)
