"""What every command shares: the documented exit codes and the one-line-per-problem error output."""

from __future__ import annotations

from typing import NoReturn

import typer

from mtpverdict.errors import InputError

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3
EXIT_INCOMPLETE = 4
EXIT_BOOTS_FAILED = 5  # collect ran to the end, but a boot failed or was refused
EXIT_INTERRUPTED = 130
MAX_ERRORS_SHOWN = 20


def fail_input(*errors: InputError) -> NoReturn:
    """Print each problem as `Error: file:line: key: message` (the first 20, then a count); exit 2."""
    shown = 0
    for exc in errors:
        for problem in exc.problems:
            if shown < MAX_ERRORS_SHOWN:
                typer.echo(f"Error: {problem}", err=True)
            shown += 1
    hidden = sum(exc.total for exc in errors) - min(shown, MAX_ERRORS_SHOWN)
    if hidden > 0:
        typer.echo(f"Error: ... and {hidden} more", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print one `Error:` line and exit with `code` (2, bad input, unless said otherwise)."""
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(code)
