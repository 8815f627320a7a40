"""What every command shares: the documented exit codes, shared options, safe output and one-line errors.

Every line a command prints goes through `echo`, which shows any unprintable character escaped
(mtpverdict._text.terminal_lines): an escape sequence or a bidi override from data never reaches the
terminal raw, whatever rendering forgot. Renderers still make each field of data one line
(terminal_safe), so a newline in a title cannot print a line of its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, NoReturn, TextIO

import typer

from mtpverdict._text import terminal_lines, terminal_safe
from mtpverdict.errors import InputError

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2
EXIT_INCONCLUSIVE = 3
EXIT_INCOMPLETE = 4
EXIT_BOOTS_FAILED = 5  # collect ran to the end, but a boot failed or was refused
EXIT_BELOW_BREAK_EVEN = 6  # watch: the live mean acceptance length fell below break-even
EXIT_BELOW_EVIDENCE = 7  # watch: the live acceptance fell below the campaign's measured interval
EXIT_NO_DRAFTING = 8  # watch: tokens were generated but nothing was drafted
EXIT_UNREACHABLE = 9  # watch: /metrics could not be read within the bounds
EXIT_NOT_JUDGED = 10  # watch: no window was judged (idle, restarting or unreadable throughout)
EXIT_INTERNAL = 70  # an unexpected failure inside mtpverdict (sysexits EX_SOFTWARE): please report it
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM: collect stopped as on Ctrl-C
MAX_ERRORS_SHOWN = 20
DEFAULT_WIDTH = 120  # columns when output goes to a file or a pipe and COLUMNS is not set
MIN_WIDTH = 40  # narrower than this, tables are cut to nothing: render for 40 and let the terminal wrap


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print output lines with every unprintable character but the newline shown escaped."""
    typer.echo(terminal_lines(text), err=err, nl=nl)


def terminal_width() -> int:
    """Columns to render for: the terminal's, or COLUMNS, or 120 when output goes to a file or a pipe."""
    import shutil

    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def color_wanted(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything (https://no-color.org)."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def decision_style(decision: str) -> dict[str, Any]:
    """How the DECISION line is coloured: green to promote, yellow while inconclusive, plain to keep."""
    colour = {"promote": "green", "inconclusive": "yellow"}.get(decision)
    return {"bold": True} if colour is None else {"fg": colour, "bold": True}


def echo_styled(text: str, styles: Mapping[str, Mapping[str, Any]]) -> None:
    """`echo`, with each line that starts with a key of `styles` styled so on a colour terminal. The
    line is made safe first: the only escape sequences printed are the style's own."""
    if not color_wanted():
        echo(text, nl=False)
        return
    for line in terminal_lines(text).splitlines():
        style = next((s for key, s in styles.items() if line.startswith(key)), None)
        typer.echo(line if style is None else typer.style(line, **style))


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
    typer.echo(f"Error: {terminal_safe(message)}", err=True)
    raise typer.Exit(code)


# options several commands share, declared once
RulesOption = Annotated[
    str | None,
    typer.Option(
        "--rules",
        "-r",
        help="Shipped policy name or policy TOML path (default: default); a shipped name wins over a "
        "file of that name, so write ./NAME or NAME.toml for a file.",
    ),
]
NoiseHistoryOption = Annotated[
    list[Path] | None,
    typer.Option("--noise-history", help="Archived results of A/A pairs of the same seat (repeatable)."),
]
