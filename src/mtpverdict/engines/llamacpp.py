"""llama.cpp (llama-server): its speculative flags, /metrics prefix, log and response parsers, readiness,
per-request timings and what its boot log shows.

Sources: common/arg.cpp and common/speculative.cpp of the tree vendored by llama-cpp-python 0.3.36
(llama.cpp 0.5.0-dev, commit 0c1e570), tools/server/, and the text recorded in
tests/data/recorded/llamacpp-0.5.0-dev-0c1e570-cpu/. What driving the server needs beyond these parts
(endpoints, reading /props and /slots) is in mtpverdict.parse.llamacpp_server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from mtpverdict.engines.interface import (
    Absent,
    BootLog,
    EngineParts,
    MetricNames,
    Programs,
    Readiness,
    Ready,
    ResponseJson,
    ServerFields,
    SpecCounters,
    SpecNamespace,
)
from mtpverdict.engines.names import Engine
from mtpverdict.engines.served import (
    MAX_SPEC_TOKENS,
    TEMPLATE_TOKENS_ALLOWANCE,
    PhaseTimings,
    RequestAcceptance,
    Seen,
    ServedFields,
    ServedValueError,
    count,
    milliseconds,
    waited_ms,
)
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
    single_values,
)
from mtpverdict.errors import EngineTextError
from mtpverdict.parse import llamacpp_log, llamacpp_response
from mtpverdict.parse.llamacpp_server import (
    PROPS_PATH,
    SLOTS_PATH,
    ServerProps,
    SlotsInfo,
    read_props,
    read_slots,
)
from mtpverdict.parse.model import AcceptanceReading

__all__ = [
    "ENGINE",
    "NAME",
    "NGRAM_CACHE_K",
    "NO_KV_LINE",
    "NO_METRICS",
    "NO_PROPS",
    "NO_REQUEST_LINES",
    "NO_SLOTS",
    "SPEC_DEFAULT_K",
    "judge",
    "judge_ready",
    "llama_timings",
    "per_request_line",
    "read_spec",
    "read_timings",
]

NAME = Engine.LLAMACPP
NGRAM_CACHE_K = 8  # llama.cpp's ngram-cache drafts 8 tokens (common/speculative.cpp common_speculative_n_max)
SPEC_DEFAULT_K = 64  # llama.cpp --spec-default: ngram-mod with n_max 64 (common/arg.cpp)

# llama.cpp, common/arg.cpp (the tree vendored by llama-cpp-python 0.3.36), flags that take one value;
# the last three lines are older builds' flags (newer ones refuse them as removed parameters).
_LLAMACPP_FLAGS = """
--spec-type
--spec-draft-model -md --model-draft
--spec-draft-n-max
--spec-draft-n-min
--spec-draft-hf -hfd -hfrd --hf-repo-draft
--spec-draft-threads -td --threads-draft
--spec-draft-threads-batch -tbd --threads-batch-draft
--spec-draft-cpu-mask -Cd --cpu-mask-draft
--spec-draft-cpu-range -Crd --cpu-range-draft
--spec-draft-cpu-strict --cpu-strict-draft
--spec-draft-prio --prio-draft
--spec-draft-poll --poll-draft
--spec-draft-cpu-mask-batch -Cbd --cpu-mask-batch-draft
--spec-draft-cpu-range-batch -Crbd --cpu-range-batch-draft
--spec-draft-cpu-strict-batch --cpu-strict-batch-draft
--spec-draft-prio-batch --prio-batch-draft
--spec-draft-poll-batch --poll-batch-draft
--spec-draft-type-k -ctkd --cache-type-k-draft
--spec-draft-type-v -ctvd --cache-type-v-draft
--spec-draft-override-tensor -otd --override-tensor-draft
--spec-draft-n-cpu-moe --spec-draft-ncmoe -ncmoed --n-cpu-moe-draft
--spec-synth-len
--spec-synth-rates
--spec-draft-p-split --draft-p-split
--spec-draft-p-min --draft-p-min
--spec-draft-device -devd --device-draft
--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft
--spec-ngram-mod-n-min
--spec-ngram-mod-n-max
--spec-ngram-mod-n-match
--spec-ngram-simple-size-n
--spec-ngram-simple-size-m
--spec-ngram-simple-min-hits
--spec-ngram-map-k-size-n
--spec-ngram-map-k-size-m
--spec-ngram-map-k-min-hits
--spec-ngram-map-k4v-size-n
--spec-ngram-map-k4v-size-m
--spec-ngram-map-k4v-min-hits
--ctx-size-draft -cd
--draft-max --draft --draft-n
--draft-min --draft-n-min
"""
_LLAMACPP_SWITCHES = """
--spec-draft-cpu-moe -cmoed --cpu-moe-draft
--spec-draft-backend-sampling
--no-spec-draft-backend-sampling
--spec-default
"""
_LLAMACPP_REMOVED = """
--spec-ngram-size-n
--spec-ngram-size-m
--spec-ngram-min-hits
"""
_LLAMACPP_PRESETS = """
--fim-qwen-7b-spec
--fim-qwen-14b-spec
"""


# --spec-type names (common/speculative.cpp) -> results method and the flag that sets the depth
_LLAMACPP_TYPES: dict[str, tuple[str, str | None]] = {
    "draft-simple": ("draft_model", "--spec-draft-n-max"),
    "draft-eagle3": ("eagle3", "--spec-draft-n-max"),
    "draft-mtp": ("mtp", "--spec-draft-n-max"),
    "draft-dflash": ("other", "--spec-draft-n-max"),
    "draft-dspark": ("other", "--spec-draft-n-max"),
    "ngram-simple": ("ngram", "--spec-ngram-simple-size-m"),
    "ngram-map-k": ("ngram", "--spec-ngram-map-k-size-m"),
    "ngram-map-k4v": ("ngram", "--spec-ngram-map-k4v-size-m"),
    "ngram-mod": ("ngram", "--spec-ngram-mod-n-max"),
    "ngram-cache": ("ngram", None),  # a fixed depth, NGRAM_CACHE_K
}
_OLD_LLAMACPP = ("--draft-max", "--draft-min", "--ctx-size-draft")


def read_spec(found: list[FoundFlag]) -> ServeSpec | SpecRefusal:
    values, reasons = single_values(found, repeatable=("--spec-type",))
    types = [
        t.strip() for f in found if f.flag == "--spec-type" for t in (f.value or "").split(",") if t.strip()
    ]
    if "--spec-default" in values:
        types.append("ngram-mod")
        if "--spec-ngram-mod-n-max" in values:
            reasons.append("--spec-default and --spec-ngram-mod-n-max together: the last one wins")
        values.setdefault("--spec-ngram-mod-n-max", str(SPEC_DEFAULT_K))
    old = [f.given for f in found if f.flag in _OLD_LLAMACPP]
    if reasons:
        return SpecRefusal(tuple(reasons))
    settings = canonical({name: True if value is None else value for name, value in values.items()})
    if not types:
        return _llamacpp_untyped(values, old, settings)
    if old:
        return SpecRefusal((f"{', '.join(old)} with --spec-type: builds that have --spec-type removed them",))
    if types == ["none"]:
        if len(values) > 1:
            return SpecRefusal(("--spec-type none with other speculative flags",))
        return ServeSpec(NAME, None, None)
    if len(types) != 1:
        return SpecRefusal(
            (f"--spec-type {','.join(types)}: several types; the gate compares one at a time",)
        )
    if types[0] not in _LLAMACPP_TYPES:
        return SpecRefusal((f"--spec-type {types[0]}: not a type llama.cpp lists",))
    method, depth_flag = _LLAMACPP_TYPES[types[0]]
    k = NGRAM_CACHE_K if depth_flag is None else int_or_text(values.get(depth_flag) or "")
    if not is_depth(k):
        return SpecRefusal(
            (f"--spec-type {types[0]} needs {depth_flag} (1 to {MAX_K}); the build's default is not assumed",)
        )
    return ServeSpec(NAME, method, int(k), settings)


def _llamacpp_untyped(
    values: Mapping[str, str | None], old: list[str], settings: str
) -> ServeSpec | SpecRefusal:
    """Builds before --spec-type: a draft model (-md) drafts --draft-max tokens."""
    model = values.get("--spec-draft-model")
    if model is None:
        return SpecRefusal(("llama.cpp speculative flags without --spec-type or a draft model (-md)",))
    if not old:
        return SpecRefusal(
            (
                "-md without --spec-type: llama.cpp reads the type from the draft's metadata; "
                "add --spec-type and its depth",
            )
        )
    k = int_or_text(values.get("--draft-max") or "")
    if not is_depth(k):
        return SpecRefusal((f"--draft-max must be 1 to {MAX_K} with -md in builds before --spec-type",))
    return ServeSpec(NAME, "draft_model", int(k), settings)


# --------------------------------------------------------------------------------------------------
# readiness: what collect checks of llama-server once /health says ready, /props and /slots
#
# /health answers 200 once the model is loaded, and llama-server builds its speculative context before
# that (tools/server/server-context.cpp ``load_model``), but when the context cannot be built it logs
# "failed to initialize speculative decoding context" and serves without speculation. So a speculating
# arm is ready only when /slots says its slots speculate (``"speculative": true``), and a control only
# when they do not. A slot serves one request at a time: a concurrency above the slot count
# (``--parallel``) would queue requests inside the server, where no per-request timing sees the wait, so
# it is refused. /props gives the slot count, the per-slot context and the build; /slots is off with
# ``--no-slots``, and then speculation is seen only once a draft was verified (missing evidence, not a
# failure). Pure: the caller fetches the bodies.

# Evidence llama-server may not show, each said once per collect (key, sentence).
NO_SLOTS = (
    "slots",
    "/slots is not served (llama-server --no-slots): whether an arm speculates is seen only once it has "
    "drafted, on /metrics",
)
NO_PROPS = ("props", "/props did not answer: the per-slot context and the slot count are not recorded")
NO_METRICS = (
    "metrics",
    "/metrics is not served (llama-server without --metrics, as /props endpoint_metrics says): the "
    "/metrics acceptance surface and the depth in force are missing",
)
NO_KV_LINE = (
    "kv",
    "no `llama_kv_cache: size` line in the server log (llama-server prints it from -lv 4 on): the KV pool "
    "is not recorded",
)
NO_REQUEST_LINES = (
    "lines",
    "the server log has no per-request `draft acceptance` lines (llama-server prints them from -lv 3 on): "
    "the log surface is missing",
)


def per_request_line(reading: AcceptanceReading) -> bool:
    """A per-request line with its counts (``draft acceptance = …``, one per request that drafted), as
    llamacpp_log reads it: a log window with both counts (the cumulative `statistics` lines are
    counter totals)."""
    return (
        reading.source == "log"
        and reading.kind == "log_window"
        and reading.draft_tokens is not None
        and reading.accepted_tokens is not None
    )


def _props(text: str | None) -> ServerProps | None:
    try:
        return None if text is None else read_props(json.loads(text), source=PROPS_PATH)
    except (ValueError, EngineTextError):
        return None


def _slots(text: str | None) -> SlotsInfo | None:
    try:
        return None if text is None else read_slots(json.loads(text), source=SLOTS_PATH)
    except (ValueError, EngineTextError):
        return None


def judge_ready(
    props_text: str | None, slots_text: str | None, *, speculates: bool, concurrency: int
) -> Ready:
    """Judge a ready server from its /props and /slots bodies (None when not answered 200)."""
    props, slots = _props(props_text), _slots(slots_text)
    absent = (
        (NO_PROPS, props is None),
        (NO_SLOTS, slots is None),
        (NO_METRICS, props is not None and props.endpoint_metrics is False),
    )
    missing = tuple(note for note, gone in absent if gone)
    speculating = None if slots is None else slots.speculating
    total = props.total_slots if props is not None else (None if slots is None else len(slots.n_ctx))
    refusal = None
    if speculating is False and speculates:
        refusal = (
            'the server is ready but no slot speculates (/slots "speculative": false): llama-server serves '
            "without speculation when it cannot build the speculative context (the log says why); refused"
        )
    elif speculating and not speculates:
        refusal = 'a control arm\'s server speculates (/slots "speculative": true); refused'
    elif total is not None and total < concurrency:
        refusal = (
            f"the server has {total} slots but the campaign runs concurrency {concurrency}: requests past "
            f"the slots would wait inside the server, unseen by its timing; serve with --parallel "
            f"{concurrency} or more; refused"
        )
    return Ready(
        refusal=refusal,
        missing=missing,
        speculating=speculating,
        window_tokens=None if props is None else props.n_ctx_slot,
        slots=total,
        version=None if props is None else props.version,
    )


def judge(bodies: Mapping[str, str | None], *, speculates: bool, concurrency: int) -> Ready:
    """The readiness part: judge_ready on the bodies of /props and /slots."""
    return judge_ready(
        bodies.get(PROPS_PATH), bodies.get(SLOTS_PATH), speculates=speculates, concurrency=concurrency
    )


# --------------------------------------------------------------------------------------------------
# each response's own `timings` (tools/server, checked at 0.5.0-dev commit 0c1e570)


# the fields of a response's `timings` read_timings reads
TIMINGS_FIELDS = ("prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "draft_n", "draft_n_accepted")


def read_timings(obj: dict[str, Any], seen: Seen, completion_tokens: int) -> ServedFields:
    """A response's ``timings``: the server's intervals and, when it drafted, its acceptance."""
    found, acceptance = llama_timings(obj, seen, completion_tokens)
    return ServedFields(None, acceptance, found)


def llama_timings(
    obj: dict[str, Any], seen: Seen, completion_tokens: int
) -> tuple[PhaseTimings, RequestAcceptance | None]:
    """llama.cpp's ``timings``: intervals within the client's wait; draft counts when drafting ran."""
    high = waited_ms(seen)
    prompt_n = obj.get("prompt_n")
    predicted_n = obj.get("predicted_n")
    found = PhaseTimings(
        prompt_n=None
        if prompt_n is None
        else count(prompt_n, "timings.prompt_n", 0, seen.prompt_bytes + TEMPLATE_TOKENS_ALLOWANCE),
        prompt_ms=milliseconds(obj.get("prompt_ms"), "timings.prompt_ms", high),
        predicted_n=None
        if predicted_n is None
        else count(predicted_n, "timings.predicted_n", 0, seen.max_tokens),
        predicted_ms=milliseconds(obj.get("predicted_ms"), "timings.predicted_ms", high),
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
    drafted = count(obj.get("draft_n"), "timings.draft_n", 0, completion_tokens * MAX_SPEC_TOKENS)
    accepted = count(obj.get("draft_n_accepted"), "timings.draft_n_accepted", 0, drafted)
    return found, RequestAcceptance(NAME, drafted, accepted, None, None, None)


# --------------------------------------------------------------------------------------------------
# the parts


def depth_in_force(positions: int, spec_counters: bool) -> int | None:
    """The per-position series' count; None before the first verified draft (they appear with it)."""
    return positions or None


# llama-server's /metrics (tools/server/server.cpp, with --metrics); the per-position series appear
# with the first verified draft
METRIC_NAMES = MetricNames(
    drafts="llamacpp:spec_decode_num_drafts",
    draft_tokens="llamacpp:spec_decode_num_draft_tokens",
    accepted_tokens="llamacpp:spec_decode_num_accepted_tokens",
    accepted_per_position="llamacpp:spec_decode_num_accepted_tokens_per_pos",
    prompt_tokens="llamacpp:prompt_tokens",
    generation_tokens="llamacpp:tokens_predicted",
)


ENGINE = EngineParts(
    name=NAME,
    title="llama.cpp",
    flags=(
        FlagGroup(_LLAMACPP_FLAGS),
        FlagGroup(_LLAMACPP_SWITCHES, values=0),
        FlagGroup("--spec-replace", values=2),
        FlagGroup(_LLAMACPP_REMOVED, removed="removed from llama.cpp (use the --spec-ngram-<type>-* sizes)"),
        FlagGroup(
            _LLAMACPP_PRESETS, values=0, removed="a preset that turns speculation on; write its flags out"
        ),
    ),
    spec_namespace=SpecNamespace(("--spec-", "--draft"), infixes=("-draft-",), suffixes=("-draft",)),
    read_spec=read_spec,
    programs=Programs(executables=("llama-server",), builds=True),
    image_words=("llama-server", "llama.cpp", "llama-cpp"),
    config_variables=("LLAMA_ARG_",),  # every flag (common/arg.cpp set_env)
    metric_prefix="llamacpp:",
    metric_names=METRIC_NAMES,
    metric_counters=SpecCounters(
        "llamacpp:spec_decode_num_drafts_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    log_lines=llamacpp_log,
    responses=llamacpp_response,
    response_json=ResponseJson(re.compile(r'"draft_n"\s*:'), "llama.cpp timings.draft_n", versioned=True),
    rate_caveat=Absent("llama.cpp's acceptance rate means one thing in every build", needed=False),
    depth_in_force=depth_in_force,
    readiness=Readiness(
        (PROPS_PATH, SLOTS_PATH),
        judge,
        "/health answers before a speculative context that failed to build is known: /slots says whether "
        "the slots speculate (judge_ready)",
    ),
    server_fields=ServerFields("timings", read_timings, timed=True, fields=TIMINGS_FIELDS),
    boot_log=BootLog(NO_KV_LINE, NO_REQUEST_LINES, per_request_line),
    context_flags=("--ctx-size", "-c"),
    data_parallel_flags=Absent(NO_SCHEDULE, needed=False),
    short_flags=Absent(
        "the gate compares llama-server's short flags as written (its -n is --n-predict, not vLLM's --nnodes)"
    ),
    compile_schedule=Absent(NO_SCHEDULE),
)
