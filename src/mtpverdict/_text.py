"""Formatting shared by every sentence the tool writes (percentages, numbers, cells), and the one place
where text from data is made safe to print: on a terminal, in Markdown, in HTML.

Text from data (campaign titles, policy names and descriptions, rule ids, recorded error strings, engine
versions, paths) may hold escape sequences (ANSI CSI/OSC), bidirectional overrides (RLO) or newlines.
`terminal_safe` keeps such text on one line and shows every such character escaped (`\\x1b`, `\\u202e`,
`\\n`), so it can neither drive the terminal nor forge a line of output; `markdown_safe` does the same
and escapes what Markdown would read as markup (emphasis, code, links, tables, raw HTML, a block marker
at the start); `html_safe` escapes for HTML after `terminal_safe`.
"""

from __future__ import annotations

import html
import re

from mtpverdict._logscale import change


def pct(log_ratio: float) -> str:
    """A log ratio as a signed percentage, e.g. +6.0%."""
    return f"{change(log_ratio) * 100:+.1f}%"


def fmt(value: float, unit: str = "") -> str:
    """A number with one decimal from 10 up, three significant digits below, and its unit."""
    text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return f"{text} {unit}".strip()


# the one vocabulary of outcomes, an arm's over every cell and a cell's alone (stats.procedure.Outcome)
OUTCOME_WORDS = {
    "better": "better",
    "worse": "worse",
    "equivalent": "equivalent",
    "below_min_effect": "below min effect",
    "inconclusive": "unresolved",
    "not_compared": "not compared",
}


def outcome_word(outcome: str) -> str:
    """An outcome as every sentence and table says it: `below min effect`, `unresolved`."""
    return OUTCOME_WORDS.get(str(outcome), str(outcome))


def cell_label(workload: str, concurrency: int) -> str:
    """A cell as sentences name it: `code c=4`."""
    return f"{workload} c={concurrency}"


# ---------------------------------------------------------------------------------------------------
# text from data


def _escaped(char: str) -> str:
    return repr(char)[1:-1]  # '\x1b', '\u202e', '\n': Python's own escape of the character


def terminal_safe(text: str) -> str:
    """One line whatever `text` holds: every character that is not printable (controls such as ESC, BEL
    and newline; format characters such as RLO and the other bidi controls; separators other than the
    space) is shown as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escaped(c) for c in text)


def terminal_lines(text: str) -> str:
    """Output of several lines made safe line by line: the newlines are kept, nothing else unprintable."""
    if text.isprintable():
        return text
    return "\n".join(terminal_safe(line) for line in text.split("\n"))


# CommonMark inline syntax: backslash escapes, code spans, emphasis, links and images, GFM tables and
# strikethrough, ATX heading marks. An underscore between two letters or digits never delimits
# emphasis, so names like off_A stay as written.
_MARKDOWN_INLINE = re.compile(r"[\\`*\[\]|~#]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MARKDOWN_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}  # raw HTML, autolinks, entities
# a list item when a line starts so; (?<!\d): a digit run is tried once, not at each of its digits
_MARKDOWN_BLOCK_START = re.compile(r"[-+]|(?<!\d)\d+(?=[.)])")


def markdown_safe(text: str, *, starts_line: bool = False) -> str:
    """Text from data as one line of Markdown that renders as that text, never as markup.

    `starts_line` when the text opens a paragraph or a list item, where `-`, `+` or `1.` would begin
    a (nested) list and four spaces a code block (leading spaces are dropped there); elsewhere (table
    cells, headings, after other text) they are plain.
    """
    line = terminal_safe(text.lstrip(" ") if starts_line else text)
    line = _MARKDOWN_INLINE.sub(r"\\\g<0>", line)
    if any(c in line for c in "&<>"):
        line = "".join(_MARKDOWN_HTML.get(c, c) for c in line)
    start = _MARKDOWN_BLOCK_START.match(line) if starts_line else None
    if start is not None:  # `\-`, `\+` or `1\.`: the marker shown, the list not started
        cut = 0 if start.group() in "-+" else start.end()
        line = f"{line[:cut]}\\{line[cut:]}"
    return line


def html_safe(text: str) -> str:
    """Text from data for an HTML element or attribute: one line, then html.escape (quotes included)."""
    return html.escape(terminal_safe(text), quote=True)
