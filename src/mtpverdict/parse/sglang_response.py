"""SGLang per-request ``meta_info`` spec fields in a saved /generate (or OpenAI) response or an SSE capture.

Names by release (SGLang ``tokenizer_manager``; the rename is in 0.5.15): ``spec_verify_ct`` (verify
steps) throughout; accepted and proposed draft tokens as ``spec_num_correct_drafts`` /
``spec_num_proposed_drafts`` (aliases ``spec_accepted_drafts`` / ``spec_proposed_drafts``) from 0.5.15,
``spec_accept_token_num`` / ``spec_draft_token_num`` before; per-step histogram
``spec_correct_drafts_histogram`` (older ``spec_accept_histogram``: steps by accepted count);
``spec_accept_rate`` (newer also ``spec_acceptance_rate``: accepted / proposed, bonus token out) and
``spec_accept_length`` (mean tokens per step, bonus token in). When both generations' names are present
the current ones are read (the older keys read 0 there), and a warning says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mtpverdict.parse.model import AcceptanceReading, Found
from mtpverdict.parse.response_json import count, counts, fraction, held_objects, length, line_object
from mtpverdict.parse.text import Notes

MARKER = "spec_"
META_KEY = "meta_info"
WHERE = "meta_info"
MAX_NESTING = 3
ACCEPTED_KEYS = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
PROPOSED_KEYS = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
OLDER_KEYS = ("spec_accept_token_num", "spec_draft_token_num")
HISTOGRAM_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")
RATE_KEYS = ("spec_acceptance_rate", "spec_accept_rate")
SPEC_KEYS = (
    "spec_verify_ct",
    *ACCEPTED_KEYS,
    *PROPOSED_KEYS,
    *HISTOGRAM_KEYS,
    *RATE_KEYS,
    "spec_accept_length",
)


def find(text: str, line: int) -> list[Found]:
    """A per-request reading from one line holding a response or a streamed chunk with ``meta_info``."""
    held = line_object(text, META_KEY)
    if held is None or MARKER not in held[1]:
        return []
    start, payload, obj = held
    return [
        Found(start=start, message=payload, acceptance=reading, warnings=warnings)
        for reading, warnings in readings(obj, line)
    ]


def readings(obj: Any, line: int | None) -> Iterator[tuple[AcceptanceReading, tuple[str, ...]]]:
    """One reading per ``meta_info`` holding spec fields, in document order."""
    for meta in _meta_objects(obj):
        notes = Notes(line)
        yield _reading(meta, notes, line), tuple(notes.items)


def _meta_objects(obj: Any) -> Iterator[dict[str, Any]]:
    return held_objects(obj, META_KEY, lambda meta: any(key in meta for key in SPEC_KEYS), MAX_NESTING)


def _first(meta: dict[str, Any], keys: tuple[str, ...], notes: Notes) -> int | None:
    for key in keys:
        if key in meta:
            return count(meta, key, notes, WHERE)
    return None


def _reading(meta: dict[str, Any], notes: Notes, line: int | None) -> AcceptanceReading:
    newer = [key for key in (*ACCEPTED_KEYS[:2], *PROPOSED_KEYS[:2]) if key in meta]
    older = [key for key in OLDER_KEYS if key in meta]
    if newer and older:
        notes.add(
            f"{WHERE} holds both {', '.join(older)} (before SGLang 0.5.15) and {', '.join(newer)}; "
            "the current names were read"
        )
    steps = count(meta, "spec_verify_ct", notes, WHERE)
    accepted = _first(meta, ACCEPTED_KEYS, notes)
    proposed = _first(meta, PROPOSED_KEYS, notes)
    if accepted is not None and proposed is not None and accepted > proposed:
        notes.add(f"{WHERE}: {accepted} drafts accepted but {proposed} proposed; the counts are left out")
        accepted = proposed = None
    rate_key = next((key for key in RATE_KEYS if key in meta), None)
    return AcceptanceReading(
        source="response",
        scoped="run",
        kind="response",
        drafts=steps,
        draft_tokens=proposed,
        accepted_tokens=accepted,
        acceptance_rate=None if rate_key is None else fraction(meta, rate_key, notes, WHERE),
        mean_acceptance_length=length(meta, "spec_accept_length", notes, WHERE),
        accepted_per_position=_per_position(meta, steps, accepted, notes),
        line=line,
    )


def _per_position(
    meta: dict[str, Any], steps: int | None, accepted: int | None, notes: Notes
) -> tuple[int, ...] | None:
    """Steps that accepted position p, from the histogram of steps by accepted count (a prefix rule)."""
    key = next((k for k in HISTOGRAM_KEYS if k in meta), None)
    histogram = None if key is None else counts(meta, key, notes, WHERE)
    if not histogram:
        return None
    if (steps is not None and sum(histogram) != steps) or (
        accepted is not None and sum(j * n for j, n in enumerate(histogram)) != accepted
    ):
        notes.add(f"{WHERE}.{key} does not add up to spec_verify_ct and the accepted drafts; left out")
        return None
    return tuple(sum(histogram[p + 1 :]) for p in range(len(histogram) - 1))
