"""The command line: each command parses options, calls one library function, renders, and exits.

One module per command group: results.py (validate, decide, verify), collect.py, gate.py, report.py,
rules.py (rules check/show), engine.py (parse, import), sim.py (simulate, plan), live.py (alerts,
watch); _common.py holds the exit codes and the options they share.

Exit codes: 0 done (a decision was written, inconclusive included); 1 the gate refused or verify found
a mismatch; 2 bad input (one line per problem, naming file and line or key); 3 inconclusive under
--strict; 4 a campaign could not be completed (resume it), or merge could not write its output; 5
collect ran but a boot failed or was refused; 6-10 `watch`: below break-even, below the evidence, no
drafting, unreachable, not judged; 70 an unexpected error inside mtpverdict (one line; please report
it); 130 interrupted; 143 collect stopped by SIGTERM.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from mtpverdict.cli import collect, engine, gate, live, report, results, rules, sim
from mtpverdict.cli._common import EXIT_BAD_INPUT, EXIT_INTERNAL
from mtpverdict.cli._help import plain_help
from mtpverdict.errors import MtpverdictError

app = typer.Typer(
    name="mtpverdict",
    help="Decide whether a serving seat should run MTP / speculative decoding, and at which depth.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for group in (results, collect, gate, report, rules, engine, sim, live):
    group.register(app)
plain_help(app)  # help names parameters in words (RESULTS, --rules TEXT), not Python types


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


def main(args: Sequence[str] | None = None, prog_name: str | None = None) -> None:
    """Console-script entry: run the app on `args` (default: the command line); a library error is one
    line and exit 2, anything else exit 70. The tests run commands in process through it."""
    from mtpverdict.errors import printable

    try:
        app(args=args, prog_name=prog_name, standalone_mode=True)
    except MtpverdictError as exc:  # a library error that a command did not map: still one line
        typer.echo(f"Error: {printable(str(exc))}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected failure becomes one line
        name = type(exc).__name__
        typer.echo(
            f"Error: internal error ({name}: {printable(str(exc))[:300]}); this is a bug in mtpverdict, "
            "please report it with the command you ran",
            err=True,
        )
        sys.exit(EXIT_INTERNAL)
