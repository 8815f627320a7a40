"""vLLM server log lines: spec-decode metrics (V0 to current), KV cache capacity, engine version.

Formats, as the engine's source prints them (see docs/engine-formats.md):

- V0 ``Speculative metrics: Draft acceptance rate: %.3f, System efficiency: %.3f, Number of
  speculative tokens: %d, Number of accepted tokens: %d, Number of draft tokens: %d, Number of
  emitted tokens: %d.`` (the first releases wrote ``draft tokens tokens``); V0 counts are cumulative
  since boot (the rejection sampler's aggregate counters).
- V1 ``SpecDecoding metrics: Draft acceptance rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens``;
  then ``... Mean acceptance length: %.2f, ... Per-position acceptance rate: %s``; current
  ``Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s,
  Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate:
  %.1f%%``. V1 lines cover the logging interval only.
- KV: ``GPU KV cache size: %s tokens`` (``CPU``/``NPU``... on other platforms), ``Maximum concurrency
  for %s tokens per request: %.2fx``, both on one line in the newest builds; V0 ``# GPU blocks: %d,
  # CPU blocks: %d``.
- KV memory: ``Available KV cache memory: %s GiB`` (``format_gib``: GiB rounded to 2 places; older
  ``%.2f GiB``), printed by the GPU worker before the pool in tokens; the CPU worker does not print it.
- ``vllm bench serve`` stdout: a ``-----Speculative Decoding-----`` header (centred in 50 columns),
  then ``Acceptance rate (%):``, ``Acceptance length:``, ``Drafts:``, ``Draft tokens:``, ``Accepted
  tokens:``, ``Per-position acceptance (%):`` and ``  Position %d:`` lines (``{:<40} {:<10.2f}``): the
  differences of the server's /metrics counters over the run (a ``counter_delta`` window).
- version: ``vLLM API server version %s`` (recent releases: a block-letter banner ending ``version
  %s``), ``Initializing a V1 LLM engine (v%s) with config``, and the
  ``system_fingerprint`` ``vllm-<version>-<hash>`` of streamed responses when the server sets one.
"""

from __future__ import annotations

import re
from typing import Any

from mtpverdict.parse.model import AcceptanceReading, Found, KvCapacity
from mtpverdict.parse.text import (
    FLOAT_PATTERN,
    INT_PATTERN,
    Notes,
    count_value,
    mean_length_value,
    rate_list,
    rate_value,
    to_float,
    to_int,
)

F = FLOAT_PATTERN
I = INT_PATTERN  # noqa: E741 - a one-letter name keeps the format regexes readable

SPEC_MARKER_RE = re.compile(r"SpecDecoding metrics:|Speculative metrics:")
V1_RATE_RE = re.compile(rf"(?<!Avg )(?<!Total )Draft acceptance rate:\s*({F})\s*(%)?")
V1_AVG_RATE_RE = re.compile(rf"Avg Draft acceptance rate:\s*({F})\s*(%)?")
V1_MEAN_RE = re.compile(rf"Mean acceptance length:\s*({F})")
V1_ACCEPTED_RE = re.compile(rf"\bAccepted:\s*({I})\s*tokens\b")
V1_DRAFTED_RE = re.compile(rf"\bDrafted:\s*({I})\s*tokens\b")
V1_PER_POS_RE = re.compile(rf"Per-position acceptance rate:\s*({F}(?:\s*,\s*{F})*)")
V0_RATE_RE = re.compile(rf"Draft acceptance rate:\s*({F})\s*(%)?")
V0_ACCEPTED_RE = re.compile(rf"Number of accepted tokens(?: tokens)?:\s*({I})")
V0_DRAFT_RE = re.compile(rf"Number of draft tokens(?: tokens)?:\s*({I})")

KV_POOL_RE = re.compile(rf"\b([A-Za-z]+) KV cache size:\s*({I})\s*tokens")
KV_CONCURRENCY_RE = re.compile(rf"Maximum concurrency for\s*({I})\s*tokens per request:\s*({F})\s*x")
V0_BLOCKS_RE = re.compile(rf"#\s*([A-Za-z]+) blocks:\s*({I})")
KV_MEMORY_RE = re.compile(rf"Available KV cache memory:\s*({F})\s*GiB")

BENCH_HEADER_RE = re.compile(r"^-+Speculative Decoding-+\s*$")
BENCH_FIELD_RES = {
    "acceptance_rate": re.compile(rf"^Acceptance rate \(%\):\s*({F})\s*$"),
    "mean_acceptance_length": re.compile(rf"^Acceptance length:\s*({F})\s*$"),
    "drafts": re.compile(rf"^Drafts:\s*({I})\s*$"),
    "draft_tokens": re.compile(rf"^Draft tokens:\s*({I})\s*$"),
    "accepted_tokens": re.compile(rf"^Accepted tokens:\s*({I})\s*$"),
}
BENCH_PER_POS_HEADER_RE = re.compile(r"^Per-position acceptance \(%\):\s*$")
BENCH_POSITION_RE = re.compile(rf"^\s*Position (\d+):\s*({F})\s*$")

VERSION_RES = (
    re.compile(r"vLLM API server version\s+v?([0-9][\w.+-]*)"),
    # the start-up banner of recent releases: block-letter "vLLM" art, then "version <v>"; the last
    # block character is enough (a run of them is never scanned again from each of its characters)
    re.compile(r"[\u2580\u2584\u2588]\s+version\s+v?([0-9][\w.+-]*)"),
    re.compile(r"Initializing an? (?:V1 )?LLM engine \(v?([0-9][\w.+-]*)\)"),
    # responses of servers run with a system fingerprint: "vllm-<version>-<config hash>"
    re.compile(r'"system_fingerprint"\s*:\s*"vllm-([0-9][\w.+]*)'),
)
EVIDENCE_RE = re.compile(
    r"\((?:APIServer|EngineCore(?:_DP\d+)?|VllmWorker[^()]*|Worker[^()]*) pid=\d+\)"
    r"|\bvllm\.(?:entrypoints|engine|v1|worker|executor)\b|Avg prompt throughput:"
    r"|vLLM API server version|\[(?:api_server|metrics|loggers|core|gpu_worker)\.py:\d+\]"
    r"|(?<!=)=+ Serving Benchmark Result ="
)


def find(text: str, line: int) -> list[Found]:
    """Every vLLM message in one segment of a log line."""
    found: list[Found] = []
    markers = list(SPEC_MARKER_RE.finditer(text))
    for i, marker in enumerate(markers):
        end = markers[i + 1].start() if i + 1 < len(markers) else len(text)
        message = text[marker.start() : end]
        if marker.group().startswith("Speculative"):
            found.append(_v0_spec(message, marker.start(), line))
        else:
            found.append(_v1_spec(message, marker.start(), line))
    kv = _kv(text, line)
    if kv is not None:
        found.append(kv)
    bench = _bench_block_line(text, line)
    if bench is not None:
        found.append(bench)
    for pattern in VERSION_RES:
        match = pattern.search(text)
        if match:
            found.append(Found(start=match.start(), message=match.group(), version=match.group(1)))
            break
    return found


def evidence(text: str) -> bool:
    """True when the segment carries a vLLM log prefix or banner, without any reading."""
    return EVIDENCE_RE.search(text) is not None


def _v1_spec(message: str, start: int, line: int) -> Found:
    notes = Notes(line)
    rate = None
    chosen = V1_AVG_RATE_RE.search(message) or V1_RATE_RE.search(message)
    if chosen:
        rate = notes.take(rate_value(chosen.group(1), chosen.group(2) == "%"))
    mean = None
    match = V1_MEAN_RE.search(message)
    if match:
        mean = notes.take(mean_length_value(match.group(1)))
    per_pos = None
    match = V1_PER_POS_RE.search(message)
    if match:
        per_pos = notes.take(rate_list(match.group(1)))
    reading = AcceptanceReading(
        source="log",
        scoped="window",
        kind="log_window",
        draft_tokens=_count(V1_DRAFTED_RE, message, notes),
        accepted_tokens=_count(V1_ACCEPTED_RE, message, notes),
        acceptance_rate=rate,
        mean_acceptance_length=mean,
        per_position_rate=per_pos,
        line=line,
    )
    return Found(start=start, message=message, acceptance=reading, warnings=tuple(notes.items))


def _v0_spec(message: str, start: int, line: int) -> Found:
    notes = Notes(line)
    rate = None
    match = V0_RATE_RE.search(message)
    if match:
        rate = notes.take(rate_value(match.group(1), match.group(2) == "%"))
    reading = AcceptanceReading(
        source="log",
        scoped="window",
        kind="counter_total",
        draft_tokens=_count(V0_DRAFT_RE, message, notes),
        accepted_tokens=_count(V0_ACCEPTED_RE, message, notes),
        acceptance_rate=rate,
        line=line,
    )
    return Found(start=start, message=message, acceptance=reading, warnings=tuple(notes.items))


def _count(pattern: re.Pattern[str], message: str, notes: Notes) -> int | None:
    match = pattern.search(message)
    return notes.take(count_value(match.group(1))) if match else None


def _kv(text: str, line: int) -> Found | None:
    pool = KV_POOL_RE.search(text)
    concurrency = KV_CONCURRENCY_RE.search(text)
    blocks = V0_BLOCKS_RE.search(text)
    memory = KV_MEMORY_RE.search(text)
    if not (pool or concurrency or blocks or memory):
        return None
    starts = [m.start() for m in (pool, blocks, concurrency, memory) if m]
    start = min(starts)
    capacity = KvCapacity(
        kv_cache_tokens=to_int(pool.group(2)) if pool else None,
        window_tokens=to_int(concurrency.group(1)) if concurrency else None,
        max_concurrency=to_float(concurrency.group(2)) if concurrency else None,
        num_blocks=to_int(blocks.group(2)) if blocks else None,
        memory_gib=to_float(memory.group(1)) if memory else None,
        line=line,
    )
    return Found(start=start, message=text[start:], kv=capacity)


def _bench_block_line(text: str, line: int) -> Found | None:
    """A line of `vllm bench serve`'s spec-decode block; field lines count only inside the block."""
    stripped = text.rstrip()
    if BENCH_HEADER_RE.match(stripped):
        reading = AcceptanceReading(source="metrics", scoped="window", kind="counter_delta", line=line)
        return Found(start=0, message=stripped, acceptance=reading, block="opens")
    notes = Notes(line)
    values: dict[str, Any] = {}
    position = None
    for name, pattern in BENCH_FIELD_RES.items():
        match = pattern.match(stripped)
        if match:
            values[name] = _bench_value(name, match.group(1), notes)
            break
    else:
        match = BENCH_POSITION_RE.match(stripped)
        if match:
            position = int(match.group(1))
            rate = notes.take(rate_value(match.group(2), percent=True))
            values["per_position_rate"] = None if rate is None else (rate,)
        elif not BENCH_PER_POS_HEADER_RE.match(stripped):
            return None
    reading = AcceptanceReading(source="metrics", scoped="window", kind="counter_delta", **values)
    return Found(
        start=0,
        message=stripped,
        acceptance=reading,
        block="fills",
        position=position,
        warnings=tuple(notes.items),
    )


def _bench_value(name: str, text: str, notes: Notes) -> int | float | None:
    if name == "acceptance_rate":
        return notes.take(rate_value(text, percent=True))
    if name == "mean_acceptance_length":
        return notes.take(mean_length_value(text))
    return notes.take(count_value(text))
