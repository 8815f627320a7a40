"""llama.cpp server log lines: per-request draft acceptance, speculative statistics, build number.

Formats, as the server's source prints them (see docs/engine-formats.md):

- per slot, when a request ends: ``draft acceptance rate = %0.5f (%5d accepted / %5d generated)``
  (older), ``draft acceptance = %0.5f (%5d accepted / %5d generated)``, newest with
  ``, mean len = %5.2f`` and a trace line ``acc per pos = (%s)``; these cover one request.
- ``statistics %s: #calls(b,g,a) = %zu %zu %zu, #gen drafts = %zu, #acc drafts = %zu, #gen tokens = %zu,
  #acc tokens = %zu[, dur(b,g,a) = ... ms]`` (older ``#calls = %zu``): cumulative per drafter.
- ``build: %d (%s) with %s for %s``.
"""

from __future__ import annotations

import re

from mtpverdict.parse.model import AcceptanceReading, Found
from mtpverdict.parse.text import (
    FLOAT_PATTERN,
    INT_PATTERN,
    Notes,
    count_value,
    mean_length_value,
    rate_list,
    rate_value,
)

F = FLOAT_PATTERN
I = INT_PATTERN  # noqa: E741 - a one-letter name keeps the format regexes readable

DRAFT_RE = re.compile(
    rf"draft acceptance(?: rate)?\s*=\s*({F})\s*(%)?\s*\(\s*({I})\s+accepted\s*/\s*({I})\s+generated\s*\)"
)
MEAN_RE = re.compile(rf"mean (?:len|acceptance length)\s*=\s*({F})")
PER_POS_RE = re.compile(r"(?:acc per pos|acceptance rate per position)\s*=\s*\(([^)]*)\)")
STATISTICS_RE = re.compile(
    rf"statistics\s+([\w-]+):\s*#calls(?:\(b,g,a\))?\s*=\s*[\d\s]+,"
    rf"\s*#gen drafts\s*=\s*({I}),\s*#acc drafts\s*=\s*({I}),"
    rf"\s*#gen tokens\s*=\s*({I}),\s*#acc tokens\s*=\s*({I})"
)
BUILD_RE = re.compile(r"\bbuild(?::| =)\s*(\d+)\s*\(([0-9a-fA-F]+|unknown)\)")
EVIDENCE_RE = re.compile(
    r"\bslot\s+\w+: id\s+\d+ \| task\b|\bsrv\s+\w+:|\bllama_(?:model_loader|context|kv_cache|init)\b"
    r"|main: server is listening|ggml_(?:cuda|vulkan|metal|backend)\w*:"
)


def find(text: str, line: int) -> list[Found]:
    """Every llama.cpp message in one segment of a log line."""
    found: list[Found] = []
    draft = DRAFT_RE.search(text)
    if draft:
        found.append(_draft(text, draft, line))
    else:
        per_pos = PER_POS_RE.search(text)
        if per_pos:
            notes = Notes(line)
            rates = notes.take(rate_list(per_pos.group(1)))
            reading = AcceptanceReading(
                source="log", scoped="run", kind="log_window", per_position_rate=rates, line=line
            )
            found.append(
                Found(
                    start=per_pos.start(),
                    message=text[per_pos.start() :],
                    acceptance=reading,
                    continues=True,
                    warnings=tuple(notes.items),
                )
            )
    stats = STATISTICS_RE.search(text)
    if stats:
        notes = Notes(line)
        reading = AcceptanceReading(
            source="log",
            scoped="window",
            kind="counter_total",
            drafts=notes.take(count_value(stats.group(2))),
            draft_tokens=notes.take(count_value(stats.group(4))),
            accepted_tokens=notes.take(count_value(stats.group(5))),
            line=line,
        )
        found.append(
            Found(
                start=stats.start(),
                message=text[stats.start() :],
                acceptance=reading,
                warnings=tuple(notes.items),
            )
        )
    build = BUILD_RE.search(text)
    if build:
        found.append(
            Found(start=build.start(), message=build.group(), version=f"{build.group(1)} ({build.group(2)})")
        )
    return found


def evidence(text: str) -> bool:
    """True when the segment carries a llama.cpp log prefix or banner, without any reading."""
    return EVIDENCE_RE.search(text) is not None


def _draft(text: str, match: re.Match[str], line: int) -> Found:
    notes = Notes(line)
    rest = text[match.end() :]
    mean_match = MEAN_RE.search(rest)
    per_pos_match = PER_POS_RE.search(rest)
    reading = AcceptanceReading(
        source="log",
        scoped="run",
        kind="log_window",
        draft_tokens=notes.take(count_value(match.group(4))),
        accepted_tokens=notes.take(count_value(match.group(3))),
        acceptance_rate=notes.take(rate_value(match.group(1), match.group(2) == "%")),
        mean_acceptance_length=notes.take(mean_length_value(mean_match.group(1))) if mean_match else None,
        per_position_rate=notes.take(rate_list(per_pos_match.group(1))) if per_pos_match else None,
        line=line,
    )
    return Found(
        start=match.start(), message=text[match.start() :], acceptance=reading, warnings=tuple(notes.items)
    )
