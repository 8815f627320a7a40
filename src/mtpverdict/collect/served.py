"""Values a server reports about one request, validated where they are received: usage, timing, acceptance.

A server chooses these numbers, so none is trusted: each must have its JSON type (``true`` is not a count),
lie in its range and agree with what the client saw (a request cannot report more tokens than it asked
for, nor a server-side interval longer than the client waited). A value that fails makes the request an
error with the reason (ServedValueError), never a traceback and never an ok record. The usage block is
read here; the engine's own response object (its `server_fields` part: the key, and the reader in
engines/<engine>.py) by that engine's reader, with the checks of engines/served.py.

Surfaces (verified against vLLM 0.32.0's source and real streams in tests/data/recorded/vllm-0.32.0-cpu):
- ``usage``: ``prompt_tokens``, ``completion_tokens`` (``stream_options.include_usage``).
- vLLM ``metrics`` (``--enable-per-request-metrics``; vllm/entrypoints/generate/base/protocol.py
  ``PerRequestMetrics``): ``time_to_first_token_ms`` (scheduled to first token, queue excluded),
  ``generation_time_ms`` (first to last token), ``queue_time_ms``, ``mean_itl_ms``, ``tokens_per_second``.
- vLLM ``metrics.speculative_decoding`` (``--per-request-spec-decode-metrics summary|detailed``;
  ``SpeculativeDecodingMetrics``, vllm/v1/metrics/stats.py ``RequestSpecDecodeMetrics``):
  ``num_spec_steps``, ``num_draft_tokens``, ``num_accepted_draft_tokens``, ``num_spec_tokens``,
  ``acceptance_histogram`` (steps by accepted count j = 0..k), and at ``detailed`` ``per_step_accepted`` /
  ``per_step_drafted``. Drafts are accepted as a prefix, so position p was accepted in every step that
  accepted more than p tokens; that gives the per-position counts of vLLM's /metrics counter.
- llama.cpp ``timings`` (tools/server, checked at 0.5.0-dev commit 0c1e570): ``draft_n``,
  ``draft_n_accepted`` (only when the request drafted), ``prompt_n``, ``prompt_ms`` (slot start to the
  first token: the server's TTFT, queue excluded), ``predicted_n``, ``predicted_ms`` (first to last
  token: the server's decode time, as vLLM's ``generation_time_ms``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtpverdict.engines import registry
from mtpverdict.engines.interface import ServerFields
from mtpverdict.engines.served import (
    TEMPLATE_TOKENS_ALLOWANCE,
    PhaseTimings,
    RequestAcceptance,
    Seen,
    ServedFields,
    ServedValueError,
    ServerTiming,
    count,
    object_at,
)

__all__ = [
    "EVERY_ENGINE",
    "PhaseTimings",
    "RequestAcceptance",
    "Seen",
    "Served",
    "ServedValueError",
    "ServerTiming",
    "Usage",
    "engine_fields",
    "served",
    "usage",
]

# the response objects of every engine that has them, in the registry's order (a caller that does not
# know the server's engine reads them all; the first that says a value gives it)
EVERY_ENGINE: tuple[ServerFields, ...] = tuple(
    fields for parts in registry.ENGINES.values() if (fields := registry.present(parts.server_fields))
)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts from the server's usage block."""

    prompt_tokens: int | None
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class Served:
    """Everything a stream's final events reported, validated; `own_read`: an engine's own response
    object (its `server_fields` part) was read, whichever of its fields it gave."""

    usage: Usage
    timing: ServerTiming | None
    acceptance: RequestAcceptance | None
    phases: PhaseTimings | None
    own_read: bool = False


def usage(obj: dict[str, Any] | None, seen: Seen) -> Usage:
    """The usage block: completion tokens within 1..max_tokens and at least one per content event."""
    if obj is None:
        raise ServedValueError("no usage block in the stream (stream_options.include_usage unsupported?)")
    completion = count(obj.get("completion_tokens"), "usage.completion_tokens", 1, seen.max_tokens)
    if completion < seen.content_events:
        raise ServedValueError(
            f"usage.completion_tokens is {completion} but {seen.content_events} content deltas arrived "
            "(each carries at least one token)"
        )
    prompt = obj.get("prompt_tokens")
    limit = seen.prompt_bytes + TEMPLATE_TOKENS_ALLOWANCE
    return Usage(
        prompt_tokens=None if prompt is None else count(prompt, "usage.prompt_tokens", 0, limit),
        completion_tokens=completion,
    )


def served(final: dict[str, Any], seen: Seen, fields: Sequence[ServerFields] = EVERY_ENGINE) -> Served:
    """Validate what the stream's decoded events reported (merged, last wins): the usage block, and
    each engine's response object in `fields` (the server's engine's; by default every engine's) read
    by that engine's reader. The first object that gives a value gives it."""
    use = usage(object_at(final, "usage"), seen)
    found: list[ServedFields] = []
    for part in fields:
        obj = object_at(final, part.response_key)
        if obj is not None:
            found.append(part.read(obj, seen, use.completion_tokens))
    return Served(
        use,
        next((f.timing for f in found if f.timing is not None), None),
        next((f.acceptance for f in found if f.acceptance is not None), None),
        next((f.phases for f in found if f.phases is not None), None),
        any(f.read for f in found),
    )


def engine_fields(engine: str | None) -> tuple[ServerFields, ...]:
    """The response objects collect reads for a server of this engine: its own, or none when it
    declares them absent (every engine's when the campaign names no engine the registry knows)."""
    if engine is None or engine not in registry.ENGINES:
        return EVERY_ENGINE
    fields = registry.present(registry.get(engine).server_fields)
    return () if fields is None else (fields,)
