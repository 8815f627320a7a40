"""llama.cpp (llama-server): its speculative flags, /metrics prefix, log and response parsers, readiness.

Sources: common/arg.cpp and common/speculative.cpp of the tree vendored by llama-cpp-python 0.3.36
(llama.cpp 0.5.0-dev, commit 0c1e570), tools/server/, and the text recorded in
tests/data/recorded/llamacpp-0.5.0-dev-0c1e570-cpu/. What driving the server needs beyond these parts
(endpoints, /props and /slots) is in mtpverdict.parse.llamacpp_server.
"""

from __future__ import annotations

from collections.abc import Mapping

from mtpverdict.engines.interface import Absent, EngineParts, Programs, Readiness, ServerFields, SpecCounters
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
    single_values,
)
from mtpverdict.parse import llamacpp_log, llamacpp_response
from mtpverdict.parse.llamacpp_server import PROPS_PATH, SLOTS_PATH

__all__ = ["ENGINE", "NAME", "NGRAM_CACHE_K", "SPEC_DEFAULT_K", "read_spec"]

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
# the parts


def depth_in_force(positions: int, spec_counters: bool) -> int | None:
    """The per-position series' count; None before the first verified draft (they appear with it)."""
    return positions or None


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
    read_spec=read_spec,
    programs=Programs(executables=("llama-server",), builds=True),
    image_words=("llama-server", "llama.cpp", "llama-cpp"),
    metric_prefix="llamacpp:",
    metric_counters=SpecCounters(
        "llamacpp:spec_decode_num_drafts_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    log_lines=llamacpp_log,
    responses=llamacpp_response,
    depth_in_force=depth_in_force,
    readiness=Readiness(
        (PROPS_PATH, SLOTS_PATH),
        "/health answers before a speculative context that failed to build is known: /slots says whether "
        "the slots speculate (collect/llamacpp.py)",
    ),
    server_fields=ServerFields("timings"),
    context_flags=("--ctx-size", "-c"),
    short_flags=Absent(
        "the gate compares llama-server's short flags as written (its -n is --n-predict, not vLLM's --nnodes)"
    ),
    compile_schedule=Absent(NO_SCHEDULE),
)
