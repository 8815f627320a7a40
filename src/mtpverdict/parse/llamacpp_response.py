"""llama.cpp per-response JSON: ``timings.draft_n`` and ``timings.draft_n_accepted`` of one request.

The server adds both keys to ``timings`` only when drafting ran (``draft_n > 0``); they count the
draft tokens proposed and accepted for that one request. Responses are read from a JSON document,
JSON lines, or a server-sent-event stream (``data: {...}``); an object holding both keys itself is read
as a bare ``timings`` object, as users paste it into issues.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from mtpverdict.parse.llamacpp_log import FINGERPRINT_RE  # a build: "b<build>-<commit>"
from mtpverdict.parse.model import AcceptanceReading, Found
from mtpverdict.parse.text import Notes, count_value

MAX_JSON_LINE_CHARS = 1 << 20  # one streamed chunk or response; a longer line is not one
MAX_NESTING = 4  # timings sit at the top level or one object down (OpenAI-style wrappers)
SSE_PREFIX = "data:"
TIMINGS_KEY = "timings"
DRAFT_N = "draft_n"
DRAFT_N_ACCEPTED = "draft_n_accepted"


def version(text: str) -> str | None:
    """ "<build> (<commit>)" of the build a saved response names, if any."""
    found = FINGERPRINT_RE.search(text)
    return f"{found.group(1)} ({found.group(2)})" if found else None


def find(text: str, line: int) -> list[Found]:
    """A per-response reading from one line holding a JSON object (or an SSE ``data:`` line)."""
    stripped = text.strip()
    start = text.find(stripped[:1]) if stripped else 0
    if stripped.startswith(SSE_PREFIX):
        stripped = stripped[len(SSE_PREFIX) :].strip()
    if not stripped.startswith("{") or DRAFT_N not in stripped or len(stripped) > MAX_JSON_LINE_CHARS:
        return []
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return []
    return [
        Found(start=start, message=stripped, acceptance=reading, warnings=warnings)
        for reading, warnings in readings(obj, line)
    ]


def readings(obj: Any, line: int | None) -> Iterator[tuple[AcceptanceReading, tuple[str, ...]]]:
    """Readings for every ``timings`` object carrying draft counts, in document order."""
    for timings in _timings(obj, 0):
        notes = Notes(line)
        drafted = _count(timings.get(DRAFT_N), notes)
        accepted = _count(timings.get(DRAFT_N_ACCEPTED), notes)
        reading = AcceptanceReading(
            source="response",
            scoped="run",
            kind="response",
            draft_tokens=drafted,
            accepted_tokens=accepted,
            line=line,
        )
        yield reading, tuple(notes.items)


def _timings(obj: Any, depth: int) -> Iterator[dict[str, Any]]:
    if depth > MAX_NESTING:
        return
    if isinstance(obj, list):
        for item in obj:
            yield from _timings(item, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    timings = obj.get(TIMINGS_KEY)
    if isinstance(timings, dict) and DRAFT_N in timings:
        yield timings
    elif DRAFT_N in obj and DRAFT_N_ACCEPTED in obj:
        yield obj  # a bare timings object, as users paste it
    for key, value in obj.items():
        if key != TIMINGS_KEY and isinstance(value, dict | list):
            yield from _timings(value, depth + 1)


def _count(value: Any, notes: Notes) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        notes.add(f"timings value {value!r} is not a number; left out")
        return None
    return notes.take(count_value(repr(value)))
