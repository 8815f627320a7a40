"""Shared text handling for engine logs: bounded line streaming, ANSI removal, numbers, rank prefixes."""

from __future__ import annotations

import codecs
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TypeVar

T = TypeVar("T")

READ_BLOCK_BYTES = 1 << 16  # files are read in blocks so memory stays bounded on huge logs
MAX_SEGMENT_CHARS = 1 << 20  # a longer line is kept only up to here (a log message is far shorter)
BINARY_SAMPLE_CHARS = 1 << 16  # the start of a text judged for binary content
BINARY_BAD_FRACTION = 0.05  # above this share of NUL/replacement characters the input is not text
PERCENT = Decimal(100)

# ANSI escape sequences: CSI (colours, cursor moves) and OSC (titles, hyperlinks).
ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")

# Integers as engines print them: plain, with thousands separators, or in scientific notation.
INT_PATTERN = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
# Floats, including the spellings of not-a-number and infinity that printf and Python produce.
FLOAT_PATTERN = (
    r"[-+]?(?:nan|NaN|NAN|infinity|Infinity|inf|Inf|INF"
    r"|(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
)

# Timestamps in log prefixes: vLLM "05-07 04:56:17", SGLang "2025-01-01 10:00:00", ISO forms.
TIMESTAMP_RE = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?|\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?"
)
# Tags that name a process or rank in a prefix; lines differing only here come from different ranks.
RANK_TAG_RE = re.compile(
    r"\(\s*[A-Za-z_][\w-]*(?:\s+(?:rank|tp|dp|pp)=\d+)?\s+pid=\d+\s*\)"
    r"|\b(?:TP|DP|PP|EP|CP)\s?\d+\b"
    r"|\b(?:rank|Rank|RANK)[ _=-]?\d+\b"
    r"|\bpid[ =]\d+\b"
    r"|\bEngineCore(?:_DP\d+)?\b"
    r"|\bEngine\s\d{3}\b"
)
SPACE_RE = re.compile(r"\s+")


def strip_ansi(text: str) -> str:
    """Remove terminal colour and cursor codes."""
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def to_int(text: str) -> int | None:
    """An integer from engine text (thousands separators, 1.2e+06); None when not a whole number."""
    value = to_float(text)
    if value is None or value != math.floor(value):
        return None
    return int(value)


def to_float(text: str) -> float | None:
    """A finite float from engine text; None for nan, infinities and anything unreadable."""
    cleaned = text.replace(",", "").strip()
    try:
        value = float(Decimal(cleaned))
    except (InvalidOperation, ValueError):
        return None
    return value if math.isfinite(value) else None


def percent_to_fraction(text: str) -> float | None:
    """A percentage such as ``78.9`` as the exact fraction 0.789; None for nan."""
    cleaned = text.replace(",", "").strip()
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return float(value / PERCENT)


def rate_value(text: str, percent: bool) -> tuple[float | None, str | None]:
    """An acceptance rate as a fraction: ``%`` values are divided by 100; out of [0, 1] is refused.

    Returns the value (None when absent or refused) and a warning when the text was refused.
    """
    value = percent_to_fraction(text) if percent else to_float(text)
    if value is None:
        return None, None
    if not 0.0 <= value <= 1.0:
        shown = f"{text}%" if percent else text
        return None, f"acceptance rate {shown} is not a fraction between 0 and 1; left out"
    return value, None


def mean_length_value(text: str) -> tuple[float | None, str | None]:
    """A mean acceptance length (bonus token included, so at least 1); nan gives None."""
    value = to_float(text)
    if value is None:
        return None, None
    if value < 1.0:
        return None, f"mean acceptance length {text} is below 1 (it counts the bonus token); left out"
    return value, None


def count_value(text: str) -> tuple[int | None, str | None]:
    """A token or draft count: a whole number, at least 0."""
    value = to_int(text)
    if value is None:
        return None, f"count {text!r} is not a whole number; left out"
    if value < 0:
        return None, f"count {text} is negative; left out"
    return value, None


def rate_list(text: str) -> tuple[tuple[float, ...] | None, str | None]:
    """A comma-separated list of per-position rates (fractions); all-nan gives None."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    values: list[float] = []
    for item in items:
        value = to_float(item)
        if value is None:
            if item.lower().lstrip("+-") == "nan":
                continue
            return None, f"per-position rate {item!r} is not a number; list left out"
        if not 0.0 <= value <= 1.0:
            return None, f"per-position rate {item} is not a fraction between 0 and 1; list left out"
        values.append(value)
    if not values:
        return None, None
    if len(values) != len(items):
        return None, "per-position rates mix numbers and nan; list left out"
    return tuple(values), None


@dataclass(slots=True)
class Notes:
    """Collects the warnings raised while reading one line, each prefixed with its line number."""

    line: int | None
    items: list[str] = field(default_factory=list)

    def add(self, warning: str) -> None:
        self.items.append(warning if self.line is None else f"line {self.line}: {warning}")

    def take(self, pair: tuple[T, str | None]) -> T:
        value, warning = pair
        if warning:
            self.add(warning)
        return value


def looks_binary(sample: str) -> bool:
    """True when a decoded sample is mostly NUL bytes or undecodable bytes."""
    if not sample:
        return False
    bad = sample.count("\x00") + sample.count("\ufffd")
    return bad / len(sample) > BINARY_BAD_FRACTION


@dataclass(frozen=True, slots=True)
class Segment:
    """One piece of a physical line (lines are also split at carriage returns, as terminals draw them)."""

    line: int  # 1-based line number in the file
    text: str
    truncated: bool = False


def segments(chunks: Iterable[str]) -> Iterator[Segment]:
    """Split text chunks into segments at newlines and carriage returns, counting lines by newline.

    A tqdm bar redrawn with ``\\r`` before a log message becomes its own segment, so the message is
    read on its own. Memory is bounded: a segment longer than MAX_SEGMENT_CHARS is cut there.
    """
    line = 1
    parts: list[str] = []
    size = 0
    truncated = False
    for chunk in chunks:
        start = 0
        for match in re.finditer(r"[\r\n]", chunk):
            end = match.start()
            if size < MAX_SEGMENT_CHARS:
                piece = chunk[start:end]
                room = MAX_SEGMENT_CHARS - size
                if len(piece) > room:
                    piece, truncated = piece[:room], True
                parts.append(piece)
                size += len(piece)
            elif end > start:
                truncated = True
            text = "".join(parts)
            if text:
                yield Segment(line, text, truncated)
            parts, size, truncated = [], 0, False
            if match.group() == "\n":
                line += 1
            start = match.end()
        rest = chunk[start:]
        if rest:
            if size < MAX_SEGMENT_CHARS:
                room = MAX_SEGMENT_CHARS - size
                if len(rest) > room:
                    rest, truncated = rest[:room], True
                parts.append(rest)
                size += len(rest)
            else:
                truncated = True
    text = "".join(parts)
    if text:
        yield Segment(line, text, truncated)


def decode_blocks(blocks: Iterable[bytes]) -> Iterator[str]:
    """Decode byte blocks as UTF-8, replacing invalid bytes, without splitting multi-byte characters."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for block in blocks:
        text = decoder.decode(block)
        if text:
            yield text
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


def text_blocks(text: str, size: int = READ_BLOCK_BYTES) -> Iterator[str]:
    """A string in fixed-size pieces, so one code path serves strings and files."""
    for start in range(0, len(text), size):
        yield text[start : start + size]


def origin_key(prefix: str) -> str:
    """What identifies a message's moment apart from its rank: the timestamp, else the rank-free prefix."""
    stamp = TIMESTAMP_RE.search(prefix)
    if stamp:
        return "@" + stamp.group()
    return SPACE_RE.sub(" ", RANK_TAG_RE.sub("", prefix)).strip()
