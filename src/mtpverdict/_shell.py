"""Shell and Compose text, read without running it: interpolation, shell characters, word splitting.

Each function scans its input once (shell_split finds quotes and backslashes with single
character classes, which cannot backtrack), so a hostile serve config costs no more than its length.
"""

from __future__ import annotations

import re

__all__ = ["comment_start", "interpolation", "shell_metacharacter", "shell_split"]

_SHELL_METACHARACTERS = frozenset(";&|<>`$(){}*?[]~!\n")


def interpolation(text: str) -> str | None:
    """The first `$NAME` / `${...}` Compose interpolates in a value (`$$` is a literal `$`)."""
    i = 0
    while i < len(text):
        if text[i] != "$":
            i += 1
            continue
        if text[i + 1 : i + 2] == "$":
            i += 2
            continue
        rest = text[i + 1 : i + 2]
        if rest == "{" or rest == "_" or rest.isalpha():
            end = text.find("}", i) + 1 if rest == "{" else i + 1
            if rest != "{":
                while end < len(text) and (text[end].isalnum() or text[end] == "_"):
                    end += 1
            return text[i : end if end > i else len(text)][:60]
        i += 1
    return None


def comment_start(text: str) -> int:
    """Where a `#` outside quotes at the start of a word opens a comment (len(text) when none)."""
    quote = ""
    escaped = False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif quote:
            quote = "" if c == quote else quote
            escaped = c == "\\" and quote == '"'
        elif c == "\\":
            escaped = True
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            return i
    return len(text)


def shell_metacharacter(text: str) -> str | None:
    """The first character outside single quotes that a shell (or Compose's splitter) would treat
    as more than text: operators, expansions, globs, a comment; None for a plain command line."""
    quote = ""
    escaped = False
    for c in text:
        if escaped:
            escaped = False
        elif quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            escaped = True
        elif quote == '"':
            if c == '"':
                quote = ""
            elif c in "$`":
                return c
        elif c in "'\"":
            quote = c
        elif c in _SHELL_METACHARACTERS:
            return c
    return None


def _escaped(text: str, i: int, quote: str) -> tuple[str, int]:
    """What a backslash at text[i - 1] stands for, and where reading goes on."""
    if i >= len(text):
        raise ValueError("No escaped character")
    if quote == '"' and text[i] not in '$`"\\\n':
        return "\\", i  # inside double quotes a backslash escapes only these
    return text[i], i + 1


_SPECIAL = re.compile(r"['\"\\]")  # what ends a stretch of plain words outside quotes
_IN_DOUBLE = re.compile(r'[^"\\]+')  # a run of characters inside double quotes that stand for themselves


class _Words:
    """The words read so far and the one being read (`started`: begun, possibly empty: '')."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.word: list[str] = []
        self.started = False

    def end(self) -> None:
        if self.started or self.word:
            self.words.append("".join(self.word))
        self.word, self.started = [], False

    def plain(self, chunk: str) -> None:
        """Text outside quotes without quotes or backslashes: split where it is blank (str.split's
        whitespace is str.isspace's, a shell's blanks here as before)."""
        parts = chunk.split()
        if chunk[0].isspace():
            self.end()
        if parts:
            self.word.append(parts[0])
            if len(parts) > 1:
                self.end()
                self.words.extend(parts[1:-1])
                self.word = [parts[-1]]
            if chunk[-1].isspace():
                self.end()


def shell_split(text: str) -> list[str]:
    """Words of a command line as a POSIX shell splits them (quotes and backslashes; no expansion),
    in time linear in the line (shlex joins a word a character at a time; stretches without quotes
    or backslashes are split whole here). ValueError for an unclosed quote or a trailing backslash."""
    out = _Words()
    in_double = False
    i = 0
    while i < len(text):
        if in_double:
            run = _IN_DOUBLE.match(text, i)
            if run:
                out.word.append(run.group())
                i = run.end()
                continue
        else:
            special = _SPECIAL.search(text, i)
            j = len(text) if special is None else special.start()
            if j > i:
                out.plain(text[i:j])
                i = j
                continue
        c = text[i]
        i += 1
        if c == "\\":
            piece, i = _escaped(text, i, '"' if in_double else "")
            out.word.append(piece)
            out.started = True
        elif c == '"':
            in_double, out.started = not in_double, True
        else:  # a single quote outside double quotes
            end = text.find("'", i)
            if end < 0:
                raise ValueError("No closing quotation")
            out.word.append(text[i:end])
            i, out.started = end + 1, True
    if in_double:
        raise ValueError("No closing quotation")
    out.end()
    return out.words
