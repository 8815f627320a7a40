"""Shell and Compose text, read without running it: interpolation, shell characters, word splitting.

Each function scans its input once (no regular expression, no backtracking), so a hostile serve
config costs no more than its length.
"""

from __future__ import annotations

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


def shell_split(text: str) -> list[str]:
    """Words of a command line as a POSIX shell splits them (quotes and backslashes; no expansion),
    in time linear in the line (shlex joins a word a character at a time). ValueError for an
    unclosed quote or a trailing backslash."""
    words: list[str] = []
    word: list[str] = []
    started = False  # a word has begun (it may be empty: '')
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if quote == "'":
            end = text.find("'", i - 1)
            if end < 0:
                raise ValueError("No closing quotation")
            word.append(text[i - 1 : end])
            i, quote = end + 1, ""
        elif c == "\\":
            piece, i = _escaped(text, i, quote)
            word.append(piece)
            started = True
        elif quote == '"':
            quote = "" if c == '"' else quote
            word.append("" if c == '"' else c)
        elif c in "'\"":
            quote, started = c, True
        elif c.isspace():
            if started or word:
                words.append("".join(word))
            word, started = [], False
        else:
            word.append(c)
    if quote:
        raise ValueError("No closing quotation")
    if started or word:
        words.append("".join(word))
    return words
