"""Values a server reports about one request, as every engine's response fields give them, checked.

A server chooses these numbers, so none is trusted: each must have its JSON type (``true`` is not a count),
lie in its range and agree with what the client saw (a request cannot report more tokens than it asked
for, nor a server-side interval longer than the client waited). A value that fails raises
ServedValueError with the reason. Each engine's own fields are read by its module's
`ServerFields.read` (engines/vllm.py, engines/llamacpp.py); collect/served.py reads the usage block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mtpverdict.engines.names import Engine

__all__ = [
    "MAX_SPEC_TOKENS",
    "TEMPLATE_TOKENS_ALLOWANCE",
    "TIMING_SLACK_FRACTION",
    "TIMING_SLACK_MS",
    "PhaseTimings",
    "RequestAcceptance",
    "Seen",
    "ServedFields",
    "ServedValueError",
    "ServerTiming",
    "count",
    "int_list",
    "milliseconds",
    "object_at",
    "show",
    "waited_ms",
]

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
class PhaseTimings:
    """A server's per-response counts and times of the prompt and of the predicted tokens, in
    milliseconds on its clock (llama.cpp's ``timings``: prompt_n, prompt_ms, predicted_n, predicted_ms)."""

    prompt_n: int | None
    prompt_ms: float | None
    predicted_n: int | None
    predicted_ms: float | None


@dataclass(frozen=True, slots=True)
class ServedFields:
    """What one engine's response object said of the request (each None when it did not say).

    `read`: the object held the request's own reading (a reader that finds the object says True even
    when it counts nothing but drafting; collect then knows the response was read, whichever fields
    the engine gives).
    """

    timing: ServerTiming | None = None
    acceptance: RequestAcceptance | None = None
    phases: PhaseTimings | None = None
    read: bool = True


@dataclass(frozen=True, slots=True)
class Seen:
    """What the client itself observed, against which server values are checked."""

    max_tokens: int
    prompt_bytes: int
    content_events: int
    elapsed_ms: float  # from sending the request to the last byte read


def waited_ms(seen: Seen) -> float:
    """The longest server-side interval the client's wait allows (its clock's slack included)."""
    return seen.elapsed_ms * (1 + TIMING_SLACK_FRACTION) + TIMING_SLACK_MS


def count(value: object, where: str, low: int, high: int) -> int:
    """An integer (not a bool) within low..high."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServedValueError(f"{where} is {show(value)}, not an integer")
    if not low <= value <= high:
        raise ServedValueError(f"{where} is {show(value)}, outside {low}..{high}")
    return value


def milliseconds(value: object, where: str, high: float) -> float | None:
    """A finite interval within 0..high, or None when not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ServedValueError(f"{where} is {show(value)}, not a finite number")
    if not 0 <= value <= high:
        raise ServedValueError(
            f"{where} is {show(value)}, outside 0..{high:.1f} (the client waited that long)"
        )
    return float(value)


def show(value: object) -> str:
    """A value as an error quotes it: short, and a huge integer by its digit count."""
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 10**30
        else f"a {len(str(value))}-digit integer"
    )
    return text if len(text) <= 40 else text[:37] + "..."


def object_at(parent: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The object under `key`, or None when absent; ServedValueError for another value."""
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ServedValueError(f"{key} is {show(value)}, not an object")
    return value


def int_list(value: object, where: str, length: int, high: int) -> list[int]:
    """A list of `length` integers within 0..high."""
    if not isinstance(value, list) or len(value) != length:
        raise ServedValueError(f"{where} is not a list of {length} integers")
    return [count(v, f"{where}[{i}]", 0, high) for i, v in enumerate(value)]
