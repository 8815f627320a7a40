"""The sessions shown in the Markdown docs, read, run and (with --regen-docs) written back.

A fenced block holding a line `$ mtpverdict ...` is a session: each `$ ` line (with `\\` continuations)
is a command, the lines under it up to the next `$ ` line its output. Every session of one document runs
in order in one working directory holding copies of the checkout's fixtures/, rules/ and examples/, as a
user in a fresh clone would run them: `mtpverdict` in this process (the CLI itself), `echo $?` as the
shell would answer it, anything else through bash. An output line `...` stands for any number of lines.

A block that shows an mtpverdict command it cannot run here (a real server, a cluster) is marked on the
line before its fence with `<!-- not run: REASON -->`; a block that names a command without being a
session or marked is an error, so a new example is run or says why not.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("fixtures", "rules", "examples")  # what a session may read, copied from the checkout
FENCE = re.compile(r"^(`{3,}|~{3,})")
DEMO_MARK = "<!-- demo: begin"  # the README's demo session, owned by tests/test_readme_demo.py
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
PROMPT = "$ "
ELLIPSIS = "..."
KEY_LENGTH = 24  # how much of a shown line places it again in new output (with --regen-docs)
SHELL_SECONDS = 60
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "&"}  # an mtpverdict line runs in this process
# output that differs from run to run: wall-clock durations ("ready in 63 s", "took 1.2 s"); computed
# ones ("step 16.6 ms", "59 s per boot" from a pilot's records) are compared as they are
TIMES = re.compile(r"\b(in|took|after) \d+(?:\.\d+)? ?(?:ms|s)\b")


@dataclass
class Command:
    """One `$ ` command of a session, the output the document shows for it and (once run) the real one."""

    line: int  # 0-based line of its `$ ` in the document
    text: str  # the command as run (continuations joined)
    source: list[str]  # its lines as written
    shown: list[str]
    got: list[str] | None = None
    code: int = 0


@dataclass
class Block:
    """A fenced block: where it is, its lines, and whether it is a session or marked not run."""

    path: Path
    start: int  # 0-based line of the opening fence
    lines: list[str]
    not_run: str | None = None  # the reason given in its marker
    commands: list[Command] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.start + 1}"

    @property
    def is_session(self) -> bool:
        return any(line.startswith(f"{PROMPT}mtpverdict ") for line in self.lines)

    @property
    def names_a_command(self) -> bool:
        """Whether a line runs `mtpverdict SUBCOMMAND`: first on the line or after `&&`, `;`, `|`, a
        quote or `$(`, by any path to it or as `python -m mtpverdict`."""
        return any(_runs_mtpverdict().search(line.strip()) for line in self.lines)


@cache
def _runs_mtpverdict() -> re.Pattern[str]:
    import typer

    from mtpverdict.cli import app

    names = "|".join(sorted(map(re.escape, typer.main.get_group(app).commands)))
    where = r"(?:^(?:\$ )?|&&\s*|\|\|?\s*|;\s*|['\"]|\$\()"
    return re.compile(
        where + r"(?:\S+=\S+\s+)*(?:\S*python3?\s+-m\s+|\S*/)?mtpverdict\s+(?:" + names + r")\b"
    )


def documents() -> list[Path]:
    """README.md and every docs/*.md except the generated reference."""
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "cli-reference.md")
    return [ROOT / "README.md", *docs]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with its not-run marker and, for a session, its commands."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith(opening.group(1)))
        marker = NOT_RUN.match(lines[i - 1].strip()) if i else None
        if i and lines[i - 1].startswith(DEMO_MARK):  # tests/test_readme_demo.py writes and checks it
            i = end + 1
            continue
        block = Block(path, i, lines[i + 1 : end], marker.group("reason") if marker else None)
        if block.is_session and block.not_run is None:
            block.commands = _commands(block)
        found.append(block)
        i = end + 1
    return found


def _commands(block: Block) -> list[Command]:
    commands: list[Command] = []
    i = 0
    while i < len(block.lines):
        line = block.lines[i]
        if not line.startswith(PROMPT):
            if not commands:
                raise AssertionError(f"{block.where}: a session starts with a `$ ` command, not {line!r}")
            commands[-1].shown.append(line)
            i += 1
            continue
        first = i
        text = line[len(PROMPT) :]
        while text.endswith("\\") and i + 1 < len(block.lines):
            i += 1
            text = text[:-1].rstrip() + " " + block.lines[i].strip()
        commands.append(Command(block.start + 1 + first, text, block.lines[first : i + 1], []))
        i += 1
    return commands


def workspace(tmp: Path) -> Path:
    """A directory laid out like a fresh clone's shipped material, where a session's commands run."""
    work = tmp / "clone"
    work.mkdir(parents=True)
    for name in SHIPPED:
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    return work


def run_sessions(sessions: list[Block], work: Path) -> None:
    """Run every command of `sessions`, in order, in `work`; fill each command's got and code."""
    from mtpverdict.cli import app

    runner = CliRunner()  # not run_cli: a session shows stdout and stderr interleaved, as a terminal does
    last = 0
    here = Path.cwd()
    os.chdir(work)
    try:
        for block in sessions:
            for command in block.commands:
                if command.text.strip() == "echo $?":
                    command.code, output = 0, f"{last}\n"
                elif command.text.startswith("mtpverdict "):
                    args = shlex.split(command.text)[1:]
                    if SHELL_OPERATORS & set(args):
                        raise AssertionError(f"{block.where}: run `mtpverdict` alone: {command.text}")
                    result = runner.invoke(app, args, catch_exceptions=False)
                    command.code, output = result.exit_code, result.output
                else:
                    done = subprocess.run(
                        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command.text],
                        cwd=work,
                        capture_output=True,
                        text=True,
                        timeout=SHELL_SECONDS,
                        check=False,
                    )
                    command.code, output = done.returncode, done.stdout + done.stderr
                command.got = normalise(output.splitlines(), work)
                last = command.code
    finally:
        os.chdir(here)


def normalise(lines: list[str], work: Path | None = None) -> list[str]:
    """Lines as shown: the working directory and the checkout's path left out, trailing spaces and
    trailing empty lines dropped."""
    out = []
    for line in lines:
        for base in filter(None, (work, ROOT)):
            line = line.replace(f"{base}/", "").replace(str(base), ".")
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def _timeless(lines: list[str]) -> list[str]:
    """Lines as compared: durations (`63 s`, `5.1 s`, `12 ms`) as <time>, whatever the clock said."""
    return [TIMES.sub(r"\1 <time>", line) for line in normalise(lines)]


def matches(shown: list[str], got: list[str]) -> bool:
    """Whether the output shown (with `...` lines standing for any lines) is the output got."""
    want, have = _timeless(shown), _timeless(got)

    @cache
    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(have)
        if want[i].strip() == ELLIPSIS:
            return any(match(i + 1, k) for k in range(j, len(have) + 1))
        return j < len(have) and want[i] == have[j] and match(i + 1, j + 1)

    return match(0, 0)


def rewritten(shown: list[str], got: list[str], where: str) -> list[str]:
    """The output to show instead of `shown`: `got`, keeping each `...` where it was. The part before
    the first `...` runs to where its last line's start is found again, a part between two begins at
    its first line's start (each with as many lines as it had), and the part after the last takes as
    many of the last lines as it had."""
    parts: list[list[str]] = [[]]
    marks: list[str] = []
    for line in shown:
        if line.strip() == ELLIPSIS:
            marks.append(line)
            parts.append([])
        else:
            parts[-1].append(line)
    if not marks:
        return got
    head, *middle, tail = parts
    at = 0
    if head:
        anchor = max(i for i, line in enumerate(head) if line.strip() or i == 0)
        found = _find(got, head[anchor], 0)
        if found < 0:
            raise AssertionError(f"{where}: cannot place {head[anchor]!r} in the new output; edit it by hand")
        at = found + len(head) - anchor
    out = got[:at]
    for mark, part in zip(marks, middle, strict=False):
        out.append(mark)
        begin = _find(got, part[0], at)
        if begin < 0:
            raise AssertionError(f"{where}: cannot place {part[0]!r} in the new output; edit it by hand")
        out += got[begin : begin + len(part)]
        at = begin + len(part)
    out.append(marks[-1])
    return out + got[max(at, len(got) - len(tail)) :] if tail else out


def _find(lines: list[str], like: str, start: int) -> int:
    """Index of the first line from `start` that starts as `like` does (its first 24 characters, or
    up to its first colon: `  - k7 rejected by stable_acceptance`, `decision:`), else -1."""
    key = like[: min(KEY_LENGTH, like.find(":") if ":" in like else KEY_LENGTH)]
    return next((i for i in range(start, len(lines)) if lines[i].startswith(key)), -1)


def write_back(path: Path, sessions: list[Block]) -> None:
    """Rewrite each command's shown output in `path` with the output it gave."""
    lines = path.read_text().splitlines()
    for block in reversed(sessions):
        body: list[str] = []
        for command in block.commands:
            assert command.got is not None
            body += command.source + rewritten(command.shown, command.got, f"{block.where}")
        lines[block.start + 1 : block.start + 1 + len(block.lines)] = body
    path.write_text("\n".join(lines) + "\n")
