"""Values a server reports about one request, validated where they are received: usage, timing, acceptance.

A server chooses these numbers, so none is trusted: each must have its JSON type (``true`` is not a count),
lie in its range and agree with what the client saw (a request cannot report more tokens than it asked
for, nor a server-side interval longer than the client waited). A value that fails makes the request an
error with the reason (ServedValueError), never a traceback and never an ok record.

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

import math
from dataclasses import dataclass
from typing import Any

from mtpverdict.engines import registry
from mtpverdict.engines.names import Engine

# A tokenizer gives at most one token per byte of text (byte-level BPE, byte fallback); the chat template
# and special tokens add at most this many (generous: the longest default system prompts are ~1k tokens).
TEMPLATE_TOKENS_ALLOWANCE = 8192
MAX_SPEC_TOKENS = 256  # a depth beyond any speculative method served today (vLLM caps suffix decoding at 32)
# Server intervals may exceed the client's by clock granularity only: this much, plus this fraction.
TIMING_SLACK_MS = 10.0
TIMING_SLACK_FRACTION = 0.02


class ServedValueError(Exception):
    """A server-reported value has the wrong type, lies out of range, or contradicts the stream."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts from the server's usage block."""

    prompt_tokens: int | None
    completion_tokens: int


@dataclass(frozen=True, slots=True)
class ServerTiming:
    """vLLM's per-request timing (``metrics``), in milliseconds on the server's clock."""

    ttft_ms: float | None
    generation_ms: float | None
    queue_ms: float | None
    mean_itl_ms: float | None
    tokens_per_second: float | None


@dataclass(frozen=True, slots=True)
class RequestAcceptance:
    """Speculative decoding of one request, as the server counted it."""

    source: Engine  # the engine whose response fields counted them
    draft_tokens: int
    accepted_tokens: int
    steps: int | None  # verify steps that drafted (vLLM); None where the server does not say
    k: int | None  # num_spec_tokens in force
    accepted_per_position: tuple[int, ...] | None  # steps that accepted position p, p = 0..k-1


@dataclass(frozen=True, slots=True)
class LlamaTimings:
    """llama.cpp's per-response ``timings`` (milliseconds on the server's clock)."""

    prompt_n: int | None
    prompt_ms: float | None
    predicted_n: int | None
    predicted_ms: float | None


@dataclass(frozen=True, slots=True)
class Served:
    """Everything a stream's final events reported, validated."""

    usage: Usage
    timing: ServerTiming | None
    acceptance: RequestAcceptance | None
    llama: LlamaTimings | None


@dataclass(frozen=True, slots=True)
class Seen:
    """What the client itself observed, against which server values are checked."""

    max_tokens: int
    prompt_bytes: int
    content_events: int
    elapsed_ms: float  # from sending the request to the last byte read


def _count(value: object, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServedValueError(f"{where} is {_show(value)}, not an integer")
    if not low <= value <= high:
        raise ServedValueError(f"{where} is {_show(value)}, outside {low}..{high}")
    return value


def _ms(value: object, where: str, high: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ServedValueError(f"{where} is {_show(value)}, not a finite number")
    if not 0 <= value <= high:
        raise ServedValueError(
            f"{where} is {_show(value)}, outside 0..{high:.1f} (the client waited that long)"
        )
    return float(value)


def _show(value: object) -> str:
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 10**30
        else f"a {len(str(value))}-digit integer"
    )
    return text if len(text) <= 40 else text[:37] + "..."


def _object(parent: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ServedValueError(f"{key} is {_show(value)}, not an object")
    return value


def usage(obj: dict[str, Any] | None, seen: Seen) -> Usage:
    """The usage block: completion tokens within 1..max_tokens and at least one per content event."""
    if obj is None:
        raise ServedValueError("no usage block in the stream (stream_options.include_usage unsupported?)")
    completion = _count(obj.get("completion_tokens"), "usage.completion_tokens", 1, seen.max_tokens)
    if completion < seen.content_events:
        raise ServedValueError(
            f"usage.completion_tokens is {completion} but {seen.content_events} content deltas arrived "
            "(each carries at least one token)"
        )
    prompt = obj.get("prompt_tokens")
    limit = seen.prompt_bytes + TEMPLATE_TOKENS_ALLOWANCE
    return Usage(
        prompt_tokens=None if prompt is None else _count(prompt, "usage.prompt_tokens", 0, limit),
        completion_tokens=completion,
    )


def timing(obj: dict[str, Any], seen: Seen) -> ServerTiming:
    """vLLM's per-request timing: each interval finite, non-negative and within the client's wait."""
    high = seen.elapsed_ms * (1 + TIMING_SLACK_FRACTION) + TIMING_SLACK_MS
    found = ServerTiming(
        ttft_ms=_ms(obj.get("time_to_first_token_ms"), "metrics.time_to_first_token_ms", high),
        generation_ms=_ms(obj.get("generation_time_ms"), "metrics.generation_time_ms", high),
        queue_ms=_ms(obj.get("queue_time_ms"), "metrics.queue_time_ms", high),
        mean_itl_ms=_ms(obj.get("mean_itl_ms"), "metrics.mean_itl_ms", high),
        tokens_per_second=None,
    )
    tps = obj.get("tokens_per_second")
    if tps is not None and (
        isinstance(tps, bool) or not isinstance(tps, int | float) or not math.isfinite(tps) or tps < 0
    ):
        raise ServedValueError(f"metrics.tokens_per_second is {_show(tps)}, not a finite rate")
    parts = [v for v in (found.ttft_ms, found.queue_ms, found.generation_ms) if v is not None]
    if sum(parts) > high:
        raise ServedValueError(
            f"metrics: queue, first-token and generation times add up to {sum(parts):.1f} ms, more than "
            f"the {seen.elapsed_ms:.1f} ms the client waited"
        )
    return ServerTiming(
        found.ttft_ms,
        found.generation_ms,
        found.queue_ms,
        found.mean_itl_ms,
        None if tps is None else float(tps),
    )


def vllm_acceptance(obj: dict[str, Any], completion_tokens: int) -> RequestAcceptance:
    """vLLM's ``metrics.speculative_decoding`` of one request, checked for internal consistency."""
    where = "metrics.speculative_decoding"
    k = _count(obj.get("num_spec_tokens"), f"{where}.num_spec_tokens", 1, MAX_SPEC_TOKENS)
    steps = _count(obj.get("num_spec_steps"), f"{where}.num_spec_steps", 0, completion_tokens)
    drafted = _count(obj.get("num_draft_tokens"), f"{where}.num_draft_tokens", 0, steps * k)
    accepted = _count(obj.get("num_accepted_draft_tokens"), f"{where}.num_accepted_draft_tokens", 0, drafted)
    per_position = _from_histogram(obj.get("acceptance_histogram"), k, steps, accepted)
    if obj.get("per_step_accepted") is not None or obj.get("per_step_drafted") is not None:
        from_steps = _from_steps(obj, k, steps, drafted, accepted)
        if per_position is not None and from_steps != per_position:
            raise ServedValueError(f"{where}: per_step_accepted disagrees with acceptance_histogram")
        per_position = from_steps
    return RequestAcceptance(Engine.VLLM, drafted, accepted, steps, k, per_position)


def _int_list(value: object, where: str, length: int, high: int) -> list[int]:
    if not isinstance(value, list) or len(value) != length:
        raise ServedValueError(f"{where} is not a list of {length} integers")
    return [_count(v, f"{where}[{i}]", 0, high) for i, v in enumerate(value)]


def _from_histogram(value: object, k: int, steps: int, accepted: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    where = "metrics.speculative_decoding.acceptance_histogram"
    hist = _int_list(value, where, k + 1, steps)
    if sum(hist) != steps or sum(j * n for j, n in enumerate(hist)) != accepted:
        raise ServedValueError(f"{where} does not add up to num_spec_steps and num_accepted_draft_tokens")
    return tuple(sum(hist[p + 1 :]) for p in range(k))


def _from_steps(obj: dict[str, Any], k: int, steps: int, drafted: int, accepted: int) -> tuple[int, ...]:
    where = "metrics.speculative_decoding"
    acc = _int_list(obj.get("per_step_accepted"), f"{where}.per_step_accepted", steps, k)
    dra = _int_list(obj.get("per_step_drafted"), f"{where}.per_step_drafted", steps, k)
    if sum(acc) != accepted or sum(dra) != drafted or any(a > d for a, d in zip(acc, dra, strict=True)):
        raise ServedValueError(
            f"{where}: per_step_accepted / per_step_drafted do not add up to the request's counts"
        )
    return tuple(sum(1 for a in acc if a > p) for p in range(k))


def llama_timings(
    obj: dict[str, Any], seen: Seen, completion_tokens: int
) -> tuple[LlamaTimings, RequestAcceptance | None]:
    """llama.cpp's ``timings``: intervals within the client's wait; draft counts when drafting ran."""
    high = seen.elapsed_ms * (1 + TIMING_SLACK_FRACTION) + TIMING_SLACK_MS
    prompt_n = obj.get("prompt_n")
    predicted_n = obj.get("predicted_n")
    found = LlamaTimings(
        prompt_n=None
        if prompt_n is None
        else _count(prompt_n, "timings.prompt_n", 0, seen.prompt_bytes + TEMPLATE_TOKENS_ALLOWANCE),
        prompt_ms=_ms(obj.get("prompt_ms"), "timings.prompt_ms", high),
        predicted_n=None
        if predicted_n is None
        else _count(predicted_n, "timings.predicted_n", 0, seen.max_tokens),
        predicted_ms=_ms(obj.get("predicted_ms"), "timings.predicted_ms", high),
    )
    # prompt_ms runs from the slot's start to the first token, predicted_ms from there to the last
    # (tools/server/server-common.h server_slot_stats): together within the client's wait
    spent = (found.prompt_ms or 0.0) + (found.predicted_ms or 0.0)
    if spent > high:
        raise ServedValueError(
            f"timings: prompt_ms and predicted_ms add up to {spent:.1f} ms, more than the "
            f"{seen.elapsed_ms:.1f} ms the client waited"
        )
    if obj.get("draft_n") is None and obj.get("draft_n_accepted") is None:
        return found, None
    drafted = _count(obj.get("draft_n"), "timings.draft_n", 0, completion_tokens * MAX_SPEC_TOKENS)
    accepted = _count(obj.get("draft_n_accepted"), "timings.draft_n_accepted", 0, drafted)
    return found, RequestAcceptance(Engine.LLAMACPP, drafted, accepted, None, None, None)


def served(final: dict[str, Any], seen: Seen) -> Served:
    """Validate what the stream's decoded events reported (usage, metrics, timings merged, last wins)."""
    use = usage(_object(final, "usage"), seen)
    metrics = _object(final, "metrics")
    found_timing = None
    acceptance = None
    if metrics is not None:
        found_timing = timing(metrics, seen)
        spec = _object(metrics, "speculative_decoding")
        if spec is not None:
            acceptance = vllm_acceptance(spec, use.completion_tokens)
    llama = None
    timings = _object(final, "timings")
    if timings is not None:
        llama, llama_acceptance = llama_timings(timings, seen, use.completion_tokens)
        acceptance = acceptance or llama_acceptance
    return Served(use, found_timing, acceptance, llama)


def reads_readiness(engine: str) -> bool:
    """Whether collect reads more than /health before a boot of this engine may run (its endpoints
    and why: the engine's `readiness` part, engines/*.py)."""
    return registry.has(engine, "readiness")
