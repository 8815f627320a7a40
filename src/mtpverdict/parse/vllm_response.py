"""vLLM per-request ``metrics.speculative_decoding`` in a saved response or an SSE capture.

vLLM 0.32 adds ``metrics`` to the response root (``--enable-per-request-metrics``; on a stream, only the
final usage chunk) and ``metrics.speculative_decoding`` with ``--per-request-spec-decode-metrics summary``
or ``detailed`` (vllm/v1/metrics/stats.py ``RequestSpecDecodeMetrics``): ``num_spec_steps`` (verify steps
that drafted), ``num_draft_tokens``, ``num_accepted_draft_tokens``, ``num_spec_tokens`` (k),
``acceptance_histogram`` (steps by accepted count j = 0..k), ``mean_acceptance_length`` and
``draft_acceptance_rate``; ``detailed`` adds ``per_step_accepted`` / ``per_step_drafted``. Drafts are
accepted as a prefix, so position p was accepted in every step that accepted more than p tokens: the
histogram gives the per-position counts vLLM's /metrics counter keeps. It is null when n > 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from mtpverdict.parse.model import AcceptanceReading, Found
from mtpverdict.parse.response_json import count, counts, fraction, held_objects, length, line_object
from mtpverdict.parse.text import Notes

MARKER = "speculative_decoding"
METRICS_KEY = "metrics"
WHERE = "metrics.speculative_decoding"
MAX_NESTING = 3  # at the response root, or inside a saved wrapper (a list, a {"response": ...})


# servers run with a system fingerprint: "vllm-<version>-<config hash>" (the version may hold a -)
FINGERPRINT_RE = re.compile(r'"system_fingerprint"\s*:\s*"vllm-([0-9][0-9A-Za-z.+-]*?)-[0-9a-f]{6,}"')


def version(text: str) -> str | None:
    """The version a saved response's system fingerprint names, if any."""
    found = FINGERPRINT_RE.search(text)
    return found.group(1) if found else None


def find(text: str, line: int) -> list[Found]:
    """A per-request reading from one line holding a response or a final SSE chunk."""
    held = line_object(text, MARKER)
    if held is None:
        return []
    start, payload, obj = held
    return [
        Found(start=start, message=payload, acceptance=reading, warnings=warnings)
        for reading, warnings in readings(obj, line)
    ]


def readings(obj: Any, line: int | None) -> Iterator[tuple[AcceptanceReading, tuple[str, ...]]]:
    """One reading per ``metrics.speculative_decoding`` object, in document order."""
    for spec in _spec_objects(obj):
        notes = Notes(line)
        yield _reading(spec, notes, line), tuple(notes.items)


def _spec_objects(obj: Any) -> Iterator[dict[str, Any]]:
    for metrics in held_objects(obj, METRICS_KEY, lambda m: isinstance(m.get(MARKER), dict), MAX_NESTING):
        yield metrics[MARKER]


def _reading(spec: dict[str, Any], notes: Notes, line: int | None) -> AcceptanceReading:
    steps = count(spec, "num_spec_steps", notes, WHERE)
    drafted = count(spec, "num_draft_tokens", notes, WHERE)
    accepted = count(spec, "num_accepted_draft_tokens", notes, WHERE)
    k = count(spec, "num_spec_tokens", notes, WHERE)
    if drafted is not None and accepted is not None and accepted > drafted:
        notes.add(f"{WHERE}: {accepted} tokens accepted but {drafted} drafted; the counts are left out")
        drafted = accepted = None
    per_position = _per_position(spec, k, steps, accepted, notes)
    return AcceptanceReading(
        source="response",
        scoped="run",
        kind="response",
        drafts=steps,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=fraction(spec, "draft_acceptance_rate", notes, WHERE),
        mean_acceptance_length=length(spec, "mean_acceptance_length", notes, WHERE),
        accepted_per_position=per_position,
        line=line,
    )


def _per_position(
    spec: dict[str, Any], k: int | None, steps: int | None, accepted: int | None, notes: Notes
) -> tuple[int, ...] | None:
    """Steps that accepted position p (p = 0..k-1), from the histogram, else from the per-step lists."""
    histogram = counts(spec, "acceptance_histogram", notes, WHERE)
    if histogram is not None and k is not None:
        if len(histogram) != k + 1:
            notes.add(
                f"{WHERE}.acceptance_histogram has {len(histogram)} entries, not k + 1 = {k + 1}; left out"
            )
        elif (steps is not None and sum(histogram) != steps) or (
            accepted is not None and sum(j * n for j, n in enumerate(histogram)) != accepted
        ):
            notes.add(
                f"{WHERE}.acceptance_histogram does not add up to the step and accepted counts; left out"
            )
        else:
            return tuple(sum(histogram[p + 1 :]) for p in range(k))
    per_step = counts(spec, "per_step_accepted", notes, WHERE)
    if per_step is not None and k is not None:
        if accepted is not None and sum(per_step) != accepted or any(a > k for a in per_step):
            notes.add(f"{WHERE}.per_step_accepted does not add up to num_accepted_draft_tokens; left out")
            return None
        return tuple(sum(1 for a in per_step if a > p) for p in range(k))
    return None
