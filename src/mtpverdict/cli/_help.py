"""Help text in plain words: usage, arguments and options as a user types them, and the CLI reference.

Typer's own help shows a parameter by its Python type (`<bool>`, `<list[Path]>`) and a required
argument as `{results}`. Here a command's help is rendered from its parameters instead: an argument by
its name in capitals (`RESULTS`, `FILES...`), an option by its flags and the kind of value it takes
(`--rules TEXT`, `--noise-history PATH`, none for a flag), repeatable options and defaults said in words.
`reference_markdown` renders every command's help into docs/cli-reference.md (tests/test_docs.py keeps
that file equal to it).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

NAME_COLUMN_MAX = 30  # a longer flag column puts its help on the next line, as click does
INDENT = 2
SHORT_HELP_LIMIT = 300  # a command's first sentence in a list of commands, wrapped rather than cut
REFERENCE_WIDTH = 100  # docs/cli-reference.md is rendered at this width, whatever the terminal


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of a help section: what the user types, and what it does."""

    term: str
    text: str


VALUE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "Path": "PATH"}


def _value_name(param: Any, ctx: Any) -> str:
    """The kind of value an option takes, as click names it: PATH, TEXT, INTEGER, FLOAT, or [a|b]."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    if param.metavar:
        return str(param.metavar)
    label = str(param.display_type(ctx)).strip("<>")  # typer's `<list[Path]>`, `<int>`, `<a|b>`
    if label.startswith("list[") and label.endswith("]"):
        label = label[len("list[") : -1]  # the option is repeatable: each value is one item
    if "|" in label:
        return f"[{label}]"
    return VALUE_NAMES.get(label, label.upper())


def argument_name(param: Any) -> str:
    """An argument as it appears in usage: RESULTS, or FILES... when it takes several."""
    name = str(param.metavar or param.name).upper()  # a command's metavar is already the name in capitals
    return f"{name}..." if param.nargs != 1 else name


def _default_text(param: Any) -> str | None:
    """`default: X` for an option whose default its help does not already state, else None."""
    default = param.default
    if getattr(param, "is_flag", False) or default is None or callable(default):
        return None
    if isinstance(default, list | tuple) and not default:
        return None
    if "default" in (param.help or "").lower():
        return None
    shown = ", ".join(str(d) for d in default) if isinstance(default, list | tuple) else str(default)
    return f"default: {shown}"


def entries(command: Any, ctx: Any) -> tuple[list[Entry], list[Entry]]:
    """(arguments, options) of a command, each as the term a user types and its help in words."""
    arguments: list[Entry] = []
    options: list[Entry] = []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        notes = []
        if param.param_type_name == "argument":
            if param.required:
                notes.append("required")
            text = " ".join(filter(None, [getattr(param, "help", None) or "", _notes(notes)]))
            arguments.append(Entry(argument_name(param), text))
            continue
        flags = ", ".join(sorted(param.opts, key=lambda o: (o.startswith("--"), o)))
        if param.secondary_opts:
            flags += " / " + ", ".join(param.secondary_opts)
        value = _value_name(param, ctx)
        if param.required:
            notes.append("required")
        if getattr(param, "multiple", False) and "repeatable" not in (param.help or ""):
            notes.append("repeatable")
        default = _default_text(param)
        if default:
            notes.append(default)
        text = " ".join(filter(None, [param.help or "", _notes(notes)]))
        options.append(Entry(f"{flags} {value}".rstrip(), text))
    return arguments, options


def _notes(notes: list[str]) -> str:
    return f"[{'; '.join(notes)}]" if notes else ""


def usage_pieces(command: Any, ctx: Any) -> list[str]:
    """What follows the command in its usage: [OPTIONS], the arguments by name (optional ones in
    brackets), and COMMAND [ARGS]... for a group."""
    pieces = []
    params = command.get_params(ctx)
    if any(p.param_type_name == "option" and not getattr(p, "hidden", False) for p in params):
        pieces.append("[OPTIONS]")
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = argument_name(param)
            pieces.append(name if param.required else f"[{name}]")
    if isinstance(command, TyperGroup):
        pieces.append("COMMAND [ARGS]...")
    return pieces


def usage(command: Any, ctx: Any) -> str:
    """`Usage: mtpverdict decide [OPTIONS] RESULTS`."""
    return "Usage: " + " ".join([ctx.command_path, *usage_pieces(command, ctx)])


def _definitions(title: str, rows: list[Entry], width: int) -> list[str]:
    if not rows:
        return []
    column = min(max(len(r.term) for r in rows), NAME_COLUMN_MAX)
    lines = ["", f"{title}:"]
    for row in rows:
        wrap_at = max(width - INDENT - column - 2, 20)
        body = textwrap.wrap(row.text, wrap_at) or [""]
        if len(row.term) > column:
            lines.append(" " * INDENT + row.term)
            pad = " " * (INDENT + column + 2)
            lines.extend(pad + part for part in body)
            continue
        lines.append(" " * INDENT + row.term.ljust(column) + "  " + body[0])
        lines.extend(" " * (INDENT + column + 2) + part for part in body[1:])
    return lines


def help_text(command: Any, ctx: Any, width: int) -> str:
    """A command's (or a group's) whole help, wrapped at `width`."""
    lines = [usage(command, ctx)]
    if command.help:
        lines.append("")
        for paragraph in str(command.help).strip().split("\n\n"):
            wrapped = textwrap.wrap(" ".join(paragraph.split()), width - INDENT)
            lines.extend(" " * INDENT + part for part in wrapped)
            lines.append("")
        lines.pop()
    arguments, options = entries(command, ctx)
    lines += _definitions("Arguments", arguments, width)
    lines += _definitions("Options", options, width)
    if isinstance(command, TyperGroup):
        rows = [
            Entry(name, sub.get_short_help_str(limit=SHORT_HELP_LIMIT))
            for name in command.list_commands(ctx)
            if (sub := command.get_command(ctx, name)) is not None and not sub.hidden
        ]
        lines += _definitions("Commands", rows, width)
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _width(formatter: Any) -> int:
    return int(getattr(formatter, "width", None) or 80)


class PlainCommand(TyperCommand):
    """A command whose help names its parameters in words, not Python types."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.param_type_name == "argument" and param.metavar is None and param.name:
                param.metavar = param.name.upper()  # "Missing argument 'RESULTS'", as usage names it

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(help_text(self, ctx, _width(formatter)))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return usage_pieces(self, ctx)


class PlainGroup(TyperGroup):
    """A command group whose help lists its commands and options in words."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(help_text(self, ctx, _width(formatter)))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return usage_pieces(self, ctx)


def plain_help(app: typer.Typer) -> None:
    """Render every command and group of `app` (and of its sub-apps) with the plain help above."""
    app.info.cls = PlainGroup
    for command in app.registered_commands:
        command.cls = PlainCommand
    for group in app.registered_groups:
        group.cls = PlainGroup
        if group.typer_instance is not None:
            plain_help(group.typer_instance)


def walk(app: typer.Typer) -> Iterator[tuple[str, Any, Any]]:
    """(command path, click command, its context) for the root and every command below it, in order."""
    root = typer.main.get_command(app)
    ctx = root.make_context("mtpverdict", [], resilient_parsing=True)
    yield from _walk(root, ctx)


def _walk(command: Any, ctx: Any) -> Iterator[tuple[str, Any, Any]]:
    yield ctx.command_path, command, ctx
    if isinstance(command, TyperGroup):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            yield from _walk(sub, sub.make_context(name, [], parent=ctx, resilient_parsing=True))


def reference_markdown(app: typer.Typer) -> str:
    """docs/cli-reference.md: every command's help as `mtpverdict COMMAND --help` prints it."""
    commands = list(walk(app))
    lines = [
        "# Command-line reference",
        "",
        "Every command's `--help`, generated from the command line itself (`pytest tests/test_docs.py",
        "--regen-docs` rewrites this file; tests/test_docs.py fails when it differs). The exit codes are in",
        "the README.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for path, command, _ in commands[1:]:
        if isinstance(command, TyperGroup):
            continue
        anchor = path.replace(" ", "-")
        lines.append(f"| [`{path}`](#{anchor}) | {command.get_short_help_str(limit=SHORT_HELP_LIMIT)} |")
    for path, command, ctx in commands:
        lines += ["", f"## {path}", "", "```text", help_text(command, ctx, REFERENCE_WIDTH).rstrip(), "```"]
    return "\n".join(lines) + "\n"
