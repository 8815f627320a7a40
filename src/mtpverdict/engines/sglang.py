"""SGLang: its speculative flags, /metrics prefix, log lines and per-request response fields (read only).

Sources: python/sglang/srt/server_args.py and docs/advanced_features/speculative_decoding.md (flags),
the scheduler's log lines and the tokenizer manager's ``meta_info`` (as docs/engine-formats.md lists).

Log lines (``find_log_lines``): decode-batch acceptance, prefix-cache hits of prefill batches, KV pool
size. Formats, as the engine's source prints them (see docs/engine-formats.md):

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

Response fields (``find_responses``, ``response_readings``): per-request ``meta_info`` spec fields in a
saved /generate (or OpenAI) response or an SSE capture. Names by release (SGLang ``tokenizer_manager``;
the rename is in 0.5.15): ``spec_verify_ct`` (verify steps) throughout; accepted and proposed draft
tokens as ``spec_num_correct_drafts`` / ``spec_num_proposed_drafts`` (aliases ``spec_accepted_drafts`` /
``spec_proposed_drafts``) from 0.5.15, ``spec_accept_token_num`` / ``spec_draft_token_num`` before;
per-step histogram ``spec_correct_drafts_histogram`` (older ``spec_accept_histogram``: steps by accepted
count); ``spec_accept_rate`` (newer also ``spec_acceptance_rate``: accepted / proposed, bonus token out)
and ``spec_accept_length`` (mean tokens per step, bonus token in). When both generations' names are
present the current ones are read (the older keys read 0 there), and a warning says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mtpverdict.engines.interface import (
    Absent,
    EngineParts,
    MetricNames,
    Programs,
    ResponseJson,
    SpecNamespace,
)
from mtpverdict.engines.names import Engine
from mtpverdict.engines.spec import (
    MAX_K,
    NO_SCHEDULE,
    FlagGroup,
    FoundFlag,
    ServeSpec,
    SpecRefusal,
    canonical,
    int_or_text,
    is_depth,
    is_int,
    single_values,
)
from mtpverdict.parse.model import AcceptanceReading, Found, KvCapacity
from mtpverdict.parse.response_json import count, counts, fraction, held_objects, length, line_object
from mtpverdict.parse.text import FLOAT_PATTERN, INT_PATTERN, Notes, mean_length_value, rate_value, to_int

__all__ = [
    "ENGINE",
    "NAME",
    "find_log_lines",
    "find_responses",
    "log_evidence",
    "read_spec",
    "response_readings",
]

NAME = Engine.SGLANG

# --------------------------------------------------------------------------------------------------
# speculative flags

# SGLang, python/sglang/srt/server_args.py and docs/advanced_features/speculative_decoding.md.
_SGLANG_FLAGS = """
--speculative-algorithm
--speculative-num-steps
--speculative-num-draft-tokens
--speculative-eagle-topk
--speculative-draft-model-path
--speculative-draft-model-revision
--speculative-draft-model-quantization
--speculative-draft-load-format
--speculative-token-map
--speculative-accept-threshold-single
--speculative-accept-threshold-acc
--speculative-attention-mode
--speculative-moe-runner-backend
--speculative-moe-a2a-backend
--speculative-draft-attention-backend
--speculative-dflash-block-size
"""


_SGLANG_METHODS = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "mtp",
    "STANDALONE": "draft_model",
    "NGRAM": "ngram",
}


def read_spec(found: list[FoundFlag]) -> ServeSpec | SpecRefusal:
    values, reasons = single_values(found)
    algorithm = (values.get("--speculative-algorithm") or "").upper()
    if reasons:
        return SpecRefusal(tuple(reasons))
    if not algorithm:
        return SpecRefusal(("SGLang speculative flags without --speculative-algorithm",))
    method = _SGLANG_METHODS.get(algorithm)
    if method is None:
        return SpecRefusal(
            (f"--speculative-algorithm {algorithm}: the gate does not know how it sets the depth",)
        )
    depth_flag = "--speculative-num-draft-tokens" if algorithm == "NGRAM" else "--speculative-num-steps"
    k = int_or_text(values.get(depth_flag) or "")
    if not is_depth(k):
        return SpecRefusal(
            (f"{algorithm} needs {depth_flag} (1 to {MAX_K}); left out, SGLang chooses it per model",)
        )
    topk = int_or_text(values.get("--speculative-eagle-topk") or "")
    drafts = int_or_text(values.get("--speculative-num-draft-tokens") or "")
    if algorithm != "NGRAM" and topk == 1 and is_int(drafts) and drafts != k + 1:
        return SpecRefusal(
            (
                f"--speculative-num-draft-tokens {drafts} with --speculative-eagle-topk 1 and "
                f"--speculative-num-steps {k}: SGLang resets it to num_steps + 1 = {k + 1}",
            )
        )
    settings = dict(values)
    settings["--speculative-algorithm"] = algorithm
    return ServeSpec(NAME, method, k, canonical(settings))


# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# log lines

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


def find_log_lines(text: str, line: int) -> list[Found]:
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


def log_evidence(text: str) -> bool:
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


# --------------------------------------------------------------------------------------------------
# response fields

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


def find_responses(text: str, line: int) -> list[Found]:
    """A per-request reading from one line holding a response or a streamed chunk with ``meta_info``."""
    held = line_object(text, META_KEY)
    if held is None or MARKER not in held[1]:
        return []
    start, payload, obj = held
    return [
        Found(start=start, message=payload, acceptance=reading, warnings=warnings)
        for reading, warnings in response_readings(obj, line)
    ]


def response_readings(obj: Any, line: int | None) -> Iterator[tuple[AcceptanceReading, tuple[str, ...]]]:
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


# --------------------------------------------------------------------------------------------------
# the parts


@dataclass(frozen=True, slots=True)
class _LogLines:
    """SGLang's log lines as the reader asks for them."""

    def find(self, text: str, line: int) -> list[Found]:
        return find_log_lines(text, line)

    def evidence(self, text: str) -> bool:
        return log_evidence(text)


@dataclass(frozen=True, slots=True)
class _Responses:
    """SGLang's per-request ``meta_info`` as the reader asks for it."""

    def find(self, text: str, line: int) -> list[Found]:
        return find_responses(text, line)

    def readings(self, obj: Any, line: int | None) -> Iterator[tuple[AcceptanceReading, tuple[str, ...]]]:
        return response_readings(obj, line)

    def version(self, text: str) -> str | None:
        """SGLang's responses name no version."""
        return None


def depth_in_force(positions: int, spec_counters: bool) -> int | None:
    """The per-position series' count; None without them (the depth cannot be seen)."""
    return positions or None


# SGLang's /metrics (python/sglang/srt/metrics/collector.py): acceptance only as gauges of the latest
# logging interval, set to 0 when speculation is off
METRIC_NAMES = MetricNames(
    prompt_tokens="sglang:prompt_tokens",
    generation_tokens="sglang:generation_tokens",
    accept_length="sglang:spec_accept_length",
    accept_rate="sglang:spec_accept_rate",
    kv_tokens="sglang:max_total_num_tokens",
)
_NO_COLLECT = "collect does not launch or measure SGLang yet; its text is read by `mtpverdict parse`"
ENGINE = EngineParts(
    name=NAME,
    title="SGLang",
    flags=(FlagGroup(_SGLANG_FLAGS),),
    spec_namespace=SpecNamespace(("--speculative",)),
    read_spec=read_spec,
    programs=Programs(modules=(("sglang.launch_server", False),)),
    image_words=("sglang",),
    config_variables=("SGLANG_",),  # SGLANG_ENABLE_SPEC_V2 switches its speculative scheduler
    metric_prefix="sglang:",
    metric_names=METRIC_NAMES,
    metric_counters=Absent(
        "SGLang's /metrics gives spec_accept_length and spec_accept_rate as gauges of its latest logging "
        "interval, no counters a rate() could read"
    ),
    log_lines=_LogLines(),
    responses=_Responses(),
    response_json=ResponseJson(re.compile(r'"meta_info"\s*:\s*\{'), "SGLang meta_info spec fields"),
    rate_caveat=(
        "SGLang's accept rate changed meaning between releases (bonus token in or out); "
        "compare it only within one release"
    ),
    depth_in_force=depth_in_force,
    readiness=Absent(_NO_COLLECT),
    server_fields=Absent(_NO_COLLECT),
    boot_log=Absent(_NO_COLLECT),
    context_flags=("--context-length",),
    data_parallel_flags=Absent(NO_SCHEDULE, needed=False),
    short_flags=Absent("the gate reads no short spelling of SGLang's settings (its flags are all long)"),
    compile_schedule=Absent(NO_SCHEDULE),
)
