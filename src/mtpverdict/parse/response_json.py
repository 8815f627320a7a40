"""Shared reading of per-response JSON: one object per line (bare or an SSE ``data:`` line), typed counts.

The per-response parsers (llama.cpp ``timings``, vLLM ``metrics.speculative_decoding``, SGLang
``meta_info``) see one segment at a time; this module turns a segment into the JSON object it holds, or
None, and reads counts and fractions the way every surface reports them (a count is a whole number of at
least 0; ``true`` is not a count). Values that break these rules become warnings, never readings.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from mtpverdict.parse.text import Notes

MAX_JSON_LINE_CHARS = 1 << 20  # one streamed chunk or response; a longer line is not one
SSE_PREFIX = "data:"


def line_object(text: str, marker: str) -> tuple[int, str, Any] | None:
    """(start, payload, object) of a line holding one JSON object mentioning ``marker``; else None."""
    stripped = text.strip()
    start = text.find(stripped[:1]) if stripped else 0
    if stripped.startswith(SSE_PREFIX):
        stripped = stripped[len(SSE_PREFIX) :].strip()
    if not stripped.startswith("{") or marker not in stripped or len(stripped) > MAX_JSON_LINE_CHARS:
        return None
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return start, stripped, obj


def count(obj: dict[str, Any], key: str, notes: Notes, where: str) -> int | None:
    """A whole number of at least 0 under ``key``; None (with a warning) when it is anything else."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        notes.add(f"{where}.{key} is {value!r}, not a count; left out")
        return None
    if value < 0 or value != math.floor(value):
        notes.add(f"{where}.{key} is {value!r}, not a whole number of at least 0; left out")
        return None
    return int(value)


def fraction(obj: dict[str, Any], key: str, notes: Notes, where: str) -> float | None:
    """A number in [0, 1] under ``key``; None (with a warning) otherwise."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        notes.add(f"{where}.{key} is {value!r}, not a fraction in [0, 1]; left out")
        return None
    return float(value)


def length(obj: dict[str, Any], key: str, notes: Notes, where: str) -> float | None:
    """A mean acceptance length (bonus token included): a finite number of at least 1."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 1:
        notes.add(f"{where}.{key} is {value!r}, not a mean length of at least 1; left out")
        return None
    return float(value)


def counts(obj: dict[str, Any], key: str, notes: Notes, where: str) -> tuple[int, ...] | None:
    """A list of counts under ``key``; None (with a warning) when any entry is not one."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
    ):
        notes.add(f"{where}.{key} is not a list of counts; left out")
        return None
    return tuple(value)


def held_objects(
    obj: Any, key: str, holds: Callable[[dict[str, Any]], bool], max_nesting: int, depth: int = 0
) -> Iterator[dict[str, Any]]:
    """Every object under `key` that `holds` accepts, in document order: at the root or inside lists
    and wrappers up to `max_nesting` levels deep; an accepted object's parent is not searched further."""
    if depth > max_nesting:
        return
    if isinstance(obj, list):
        for item in obj:
            yield from held_objects(item, key, holds, max_nesting, depth + 1)
        return
    if not isinstance(obj, dict):
        return
    value = obj.get(key)
    if isinstance(value, dict) and holds(value):
        yield value
        return
    for name, inner in obj.items():
        if name != key and isinstance(inner, dict | list):
            yield from held_objects(inner, key, holds, max_nesting, depth + 1)
