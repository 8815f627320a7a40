"""llama.cpp server log lines: per-request draft acceptance, speculative statistics, build number.

Formats, as the server's source prints them (see docs/engine-formats.md):

- per slot, when a request ends: ``draft acceptance rate = %0.5f (%5d accepted / %5d generated)``
  (older), ``draft acceptance = %0.5f (%5d accepted / %5d generated)``, newest with
  ``, mean len = %5.2f`` and a trace line ``acc per pos = (%s)``; these cover one request.
- ``statistics %s: #calls(b,g,a) = %zu %zu %zu, #gen drafts = %zu, #acc drafts = %zu, #gen tokens = %zu,
  #acc tokens = %zu[, dur(b,g,a) = ... ms]`` (older ``#calls = %zu``): cumulative per drafter.
  Newer builds add ``, #mean acc len = %.2f, #acc rate/pos = (%s)`` after ``#acc tokens``.
- ``build: %d (%s) with %s for %s`` (older), ``common_params_print_info: build %d (%s) with %s for %s``
  (current, log level 4 and up), ``version: %s (build %d, commit %s)`` (``--version``), and
  ``"system_fingerprint": "b%d-%s"`` in responses (``"build_info"`` in /props).
- KV pool: ``llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): ...``, where
  the cells are per stream and the second seqs number is the streams (one per slot unless the cache
  is unified), so the pool is cells x streams; older ``llama_kv_cache_unified: size = ... (%6u cells,
  %3d layers, %2u seqs)`` had one stream. The draft model's context, the memory-fitting dry run and a
  sliding-window cache print the same line: the lines that open those contexts (``loading draft
  model``, ``fitting params to device memory``, ``creating SWA KV cache``) set it aside until the slot
  setup line ``initializing, n_slots = %d, n_ctx_slot = %d[, kv_unified = '%s']``, which gives the
  window (the per-slot context) and the slots of the serving pool.
"""

from __future__ import annotations

import re

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

DRAFT_RE = re.compile(
    rf"draft acceptance(?: rate)?\s*=\s*({F})\s*(%)?\s*\(\s*({I})\s+accepted\s*/\s*({I})\s+generated\s*\)"
)
MEAN_RE = re.compile(rf"mean (?:len|acceptance length)\s*=\s*({F})")
PER_POS_RE = re.compile(r"(?:acc per pos|acceptance rate per position)\s*=\s*\(([^()]*)\)")
STATISTICS_RE = re.compile(
    rf"statistics\s+([\w-]+):\s*#calls(?:\(b,g,a\))?\s*=\s*[\d\s]+,"
    rf"\s*#gen drafts\s*=\s*({I}),\s*#acc drafts\s*=\s*({I}),"
    rf"\s*#gen tokens\s*=\s*({I}),\s*#acc tokens\s*=\s*({I})"
    rf"(?:,\s*#mean acc len\s*=\s*({F}),\s*#acc rate/pos\s*=\s*\(([^)]*)\))?"
)
# "build: N (commit) with ..." (older), "build N (commit) with ..." (current), and --version's form.
BUILD_RE = re.compile(r"\bbuild(?::|\s=)?\s*(\d+)\s*\(([0-9a-fA-F]+|unknown)\)\s+with\b")
VERSION_RE = re.compile(r"\bversion:\s*[^\s(]{1,64}\s*\(build\s+(\d+),\s*commit\s+([0-9a-fA-F]+|unknown)\)")
# Responses and /props: "system_fingerprint": "b<build>-<commit>", "build_info": "b<build>-<commit>".
FINGERPRINT_RE = re.compile(r'"(?:system_fingerprint|build_info)"\s*:\s*"b(\d+)-([0-9a-fA-F]+|unknown)"')
KV_SIZE_RE = re.compile(
    rf"\bllama_kv_cache(?:_unified)?:\s+size\s*=\s*({F})\s*MiB\s*\(\s*({I})\s+cells,\s*({I})\s+layers,"
    rf"\s*({I})(?:\s*/\s*({I}))?\s+seqs\s*\)"
)
SLOTS_RE = re.compile(rf"\binitializing, n_slots\s*=\s*({I}),\s*n_ctx_slot\s*=\s*({I})")
SIDE_CONTEXT_RE = re.compile(
    r"loading draft model|fitting params to device memory|creating\s+(?:SWA|indexer) KV cache"
)
SIDE_CONTEXT_END_RE = re.compile(r"fitting params to free memory took")
MIB_PER_GIB = 1024
EVIDENCE_RE = re.compile(
    r"\bslot\s+\w+: id\s+\d+ \| task\b|\bsrv\s+\w+:|\bllama_(?:model_loader|context|kv_cache|init)\b"
    r"|main: server is listening|\bggml_(?:cuda|vulkan|metal|backend)\w*:"
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
            mean_acceptance_length=notes.take(mean_length_value(stats.group(6))) if stats.group(6) else None,
            per_position_rate=notes.take(rate_list(stats.group(7))) if stats.group(7) is not None else None,
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
    build = BUILD_RE.search(text) or VERSION_RE.search(text) or FINGERPRINT_RE.search(text)
    if build:
        found.append(
            Found(start=build.start(), message=build.group(), version=f"{build.group(1)} ({build.group(2)})")
        )
    found.extend(_kv(text, line))
    return found


def _kv(text: str, line: int) -> list[Found]:
    """The KV pool line, the slot setup line, and the lines that open or close a side context."""
    size = KV_SIZE_RE.search(text)
    if size:
        cells, streams = to_int(size.group(2)), to_int(size.group(5) or "1")
        mib = to_float(size.group(1))
        kv = KvCapacity(
            kv_cache_tokens=None if cells is None or streams is None else cells * streams,
            memory_gib=None if mib is None else mib / MIB_PER_GIB,
            line=line,
        )
        return [Found(start=size.start(), message=text[size.start() :], kv=kv)]
    slots = SLOTS_RE.search(text)
    if slots:
        kv = KvCapacity(window_tokens=to_int(slots.group(2)), slots=to_int(slots.group(1)), line=line)
        return [
            Found(
                start=slots.start(), message=text[slots.start() :], kv=kv, continues=True, side_context=False
            )
        ]
    side = SIDE_CONTEXT_RE.search(text) or SIDE_CONTEXT_END_RE.search(text)
    if side:
        opens = side.re is SIDE_CONTEXT_RE
        return [Found(start=side.start(), message=text[side.start() :], side_context=opens)]
    return []


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
