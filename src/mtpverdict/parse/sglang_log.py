"""SGLang server log lines: decode-batch acceptance, prefix-cache hits of prefill batches, KV pool size.

Formats, as the engine's source prints them (see docs/engine-formats.md):

- ``Decode batch, #running-req: %d, #token: %d, token usage: %.2f, accept len: %.2f, accept rate: %.2f,
  cuda graph: %s, gen throughput (token/s): %.2f, #queue-req: %d, `` (older releases: ``Decode batch.``
  and no ``accept rate``; an optional `` [iteration]`` after ``batch``). ``accept len`` counts the bonus
  token; the meaning of ``accept rate`` changed between releases (bonus token in or out).
- ``Prefill batch[ [%d]], #new-seq: %d, #new-token: %d, #cached-token: %d, token usage: %.2f, #running-req:
  %d, #queue-req: %d, `` (older ``Prefill batch.``; hybrid models print ``full token usage``, ``swa token
  usage`` or ``mamba usage``; newer add ``#pending-token``): no acceptance, but ``#cached-token`` says how
  many prompt tokens the prefix cache served, which makes a prefill timing warm.
- ``KV Cache is allocated. #tokens: %d, K size: %.2f GB, V size: %.2f GB`` (MLA: ``KV size``).
- ``max_total_num_tokens=%d, chunked_prefill_size=..., max_prefill_tokens=%d, max_running_requests=%d,
  context_len=%d``.
"""

from __future__ import annotations

import re

from mtpverdict.parse.model import AcceptanceReading, Found, KvCapacity
from mtpverdict.parse.text import FLOAT_PATTERN, INT_PATTERN, Notes, mean_length_value, rate_value, to_int

F = FLOAT_PATTERN
I = INT_PATTERN  # noqa: E741 - a one-letter name keeps the format regexes readable

DECODE_MARKER_RE = re.compile(r"Decode batch(?:\s*\[\d+\])?\s*[.,]\s*#running-req")
ACCEPT_LEN_RE = re.compile(rf"accept len:\s*({F})")
ACCEPT_RATE_RE = re.compile(rf"accept rate:\s*({F})\s*(%)?")
PREFILL_RE = re.compile(
    rf"Prefill batch(?:\s*\[\d+\])?\s*[.,]\s*#new-seq:\s*{I},\s*#new-token:\s*{I},\s*#cached-token:\s*({I})"
)
KV_ALLOCATED_RE = re.compile(rf"KV Cache is allocated\.\s*#tokens:\s*({I})")
MAX_TOTAL_RE = re.compile(rf"\bmax_total_num_tokens=({I})")
CONTEXT_LEN_RE = re.compile(rf"\bcontext_len=({I})")
EVIDENCE_RE = re.compile(
    r"\bsglang\.(?:srt|launch_server)\b|Prefill batch[.,\s]|The server is fired up and ready to roll"
    r"|Load weight (?:begin|end)\.|\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: DP\d+)?(?: TP\d+)(?: EP\d+)?\]"
)


def find(text: str, line: int) -> list[Found]:
    """Every SGLang message in one segment of a log line."""
    found: list[Found] = []
    markers = list(DECODE_MARKER_RE.finditer(text))
    for i, marker in enumerate(markers):
        end = markers[i + 1].start() if i + 1 < len(markers) else len(text)
        message = text[marker.start() : end]
        decode = _decode(message, marker.start(), line)
        if decode is not None:
            found.append(decode)
    prefill = PREFILL_RE.search(text)
    if prefill:
        found.append(
            Found(
                start=prefill.start(),
                message=text[prefill.start() :],
                cached_prompt_tokens=to_int(prefill.group(1)),
            )
        )
    allocated = KV_ALLOCATED_RE.search(text)
    if allocated:
        found.append(
            Found(
                start=allocated.start(),
                message=text[allocated.start() :],
                kv=KvCapacity(kv_cache_tokens=to_int(allocated.group(1)), line=line),
            )
        )
    total = MAX_TOTAL_RE.search(text)
    if total:
        context = CONTEXT_LEN_RE.search(text)
        found.append(
            Found(
                start=total.start(),
                message=text[total.start() :],
                kv=KvCapacity(
                    kv_cache_tokens=to_int(total.group(1)),
                    window_tokens=to_int(context.group(1)) if context else None,
                    line=line,
                ),
            )
        )
    return found


def evidence(text: str) -> bool:
    """True when the segment carries an SGLang log prefix or banner, without any reading."""
    return EVIDENCE_RE.search(text) is not None


def _decode(message: str, start: int, line: int) -> Found | None:
    length = ACCEPT_LEN_RE.search(message)
    rate_match = ACCEPT_RATE_RE.search(message)
    if not length and not rate_match:
        return None  # a decode batch without speculation
    notes = Notes(line)
    mean = notes.take(mean_length_value(length.group(1))) if length else None
    rate = notes.take(rate_value(rate_match.group(1), rate_match.group(2) == "%")) if rate_match else None
    reading = AcceptanceReading(
        source="log",
        scoped="window",
        kind="log_window",
        acceptance_rate=rate,
        mean_acceptance_length=mean,
        line=line,
    )
    return Found(start=start, message=message, acceptance=reading, warnings=tuple(notes.items))
