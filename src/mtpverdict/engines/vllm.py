"""vLLM (0.32): its speculative flags and config, /metrics, log and response parsers, short flags, schedule.

Sources: vllm/engine/arg_utils.py (flags and their short spellings), vllm/config/speculative.py (the
speculative config), vllm/v1/spec_decode/dynamic/utils.py (the per-batch-size schedule), and the text
recorded in tests/data/recorded/vllm-0.32.0-cpu/.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from mtpverdict.engines.interface import (
    Absent,
    EngineParts,
    KvConfigInfo,
    MetricNames,
    Programs,
    ResponseJson,
    ServerFields,
    SpecCounters,
    SpecNamespace,
)
from mtpverdict.engines.names import Engine
from mtpverdict.engines.served import (
    MAX_SPEC_TOKENS,
    RequestAcceptance,
    Seen,
    ServedFields,
    ServedValueError,
    ServerTiming,
    count,
    int_list,
    milliseconds,
    object_at,
    show,
    waited_ms,
)
from mtpverdict.engines.spec import (
    CONFIG_FLAG,
    DEPTH_KEY,
    MAX_K,
    SCHEDULE_KEY,
    DepthRange,
    FlagGroup,
    FoundFlag,
    ServeSpec,
    SpecRefusal,
    canonical,
    int_or_text,
    is_depth,
    is_int,
)
from mtpverdict.parse import vllm_log, vllm_response

__all__ = [
    "DATA_PARALLEL_FLAGS",
    "ENGINE",
    "NAME",
    "SHORT_FLAGS",
    "compile_schedule",
    "read_metrics",
    "read_spec",
    "timing",
    "vllm_acceptance",
]

NAME = Engine.VLLM

# Each line: a flag and its aliases (the first is the canonical name).
# vLLM 0.32, vllm/engine/arg_utils.py: the speculative config and its three shorthands.
_VLLM_FLAGS = """
--speculative-config -sc
--spec-method
--spec-model
--spec-tokens
"""
# Flags of vLLM before 0.10 that 0.32 refuses ("unrecognized arguments").
_VLLM_REMOVED = """
--speculative-model
--num-speculative-tokens
--speculative-draft-tensor-parallel-size
--speculative-max-model-len
--speculative-disable-by-batch-size
--speculative-model-quantization
--speculative-disable-mqa-scorer
--ngram-prompt-lookup-max
--ngram-prompt-lookup-min
--spec-decoding-acceptance-method
--typical-acceptance-sampler-posterior-threshold
--typical-acceptance-sampler-posterior-alpha
--disable-logprobs-during-spec-decoding
"""


# vllm/config/speculative.py (0.32): MTPModelTypes become mtp; the rest map to the results methods.
_VLLM_METHODS = {
    "mtp": "mtp", "ngram": "ngram", "[ngram]": "ngram", "ngram_gpu": "ngram", "eagle": "eagle",
    "eagle3": "eagle3", "draft_model": "draft_model", "medusa": "medusa", "suffix": "suffix",
    "mlp_speculator": "other", "dflash": "other", "dspark": "other", "custom_class": "other",
    "extract_hidden_states": "other",
}  # fmt: skip
_VLLM_MTP_SUFFIX = "_mtp"  # deepseek_mtp, qwen3_5_mtp, ...: vLLM replaces them with mtp


def _json_value(text: str) -> Any:
    """JSON that refuses duplicate keys and non-finite numbers (ValueError), or RecursionError."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def _vllm_config(found: list[FoundFlag]) -> tuple[dict[str, Any], list[str]]:
    """vLLM's speculative config dict as its parser builds it from the flags, with any contradiction."""
    reasons: list[str] = []
    whole = [f for f in found if f.flag == CONFIG_FLAG]
    dotted = [f for f in found if f.flag.startswith(f"{CONFIG_FLAG}.")]
    config: dict[str, Any] = {}
    if len(whole) > 1:
        reasons.append("--speculative-config is given more than once; vLLM keeps only the last")
    if whole and dotted:
        reasons.append(
            f"--speculative-config and {dotted[0].given} together: vLLM replaces the whole object "
            "with the dotted keys"
        )
    for f in whole:
        try:
            parsed = _json_value(f.value or "")
        except (ValueError, RecursionError) as exc:
            reasons.append(f"{f.given} {f.value!r:.80}: not valid JSON ({str(exc)[:80]})")
            continue
        if not isinstance(parsed, dict) or not parsed:
            reasons.append(f"{f.given}: must be a non-empty JSON object")
            continue
        config.update({k.replace("-", "_"): v for k, v in parsed.items()})
    for f in dotted:
        path = f.flag.split(".")[1:]
        path[0] = path[0].replace("-", "_")
        try:
            value: Any = _json_value(f.value or "")
        except (ValueError, RecursionError):
            value = f.value
        _set_path(config, path, value, f.given, reasons)
    return config, reasons


def _set_path(config: dict[str, Any], path: list[str], value: Any, given: str, reasons: list[str]) -> None:
    target = config
    for key in path[:-1]:
        nested = target.setdefault(key, {})
        if not isinstance(nested, dict):
            reasons.append(f"{given}: {key} is not an object")
            return
        target = nested
    if path[-1] in target:
        reasons.append(f"{given}: sets {'.'.join(path)} twice")
    target[path[-1]] = value


def read_spec(found: list[FoundFlag]) -> ServeSpec | SpecRefusal:
    config, reasons = _vllm_config(found)
    shorthand = {
        "--spec-method": "method",
        "--spec-model": "model",
        "--spec-tokens": "num_speculative_tokens",
    }
    for f in found:
        key = shorthand.get(f.flag)
        if key is None:
            continue
        if key in config:
            reasons.append(f"{f.given} and --speculative-config['{key}'] together: vLLM refuses both")
            continue
        config[key] = int_or_text(f.value or "") if key == DEPTH_KEY else f.value
    if reasons:
        return SpecRefusal(tuple(reasons))
    method, why = _vllm_method(config)
    k = config.get(DEPTH_KEY)
    if method is None:
        return SpecRefusal((why,))
    if not is_depth(k):
        return SpecRefusal(
            (
                f"num_speculative_tokens must be an integer from 1 to {MAX_K}, got {k!r}: without it "
                "the depth comes from the draft model's own config, which the gate does not read",
            )
        )
    schedule = _schedule(config.get(SCHEDULE_KEY), k)
    if isinstance(schedule, SpecRefusal):
        return schedule
    return ServeSpec(NAME, method, k, canonical(config), schedule)


def _vllm_method(config: Mapping[str, Any]) -> tuple[str | None, str]:
    method = config.get("method")
    model = config.get("model")
    if method is None:
        # vLLM 0.32 infers the method from `model` alone (SpeculativeConfig.__post_init__)
        if not isinstance(model, str) or not model:
            return None, "the speculative config names neither a method nor a model"
        if model in ("ngram", "[ngram]"):
            return "ngram", ""
        parts = model.split(".")
        custom = "/" not in model and len(parts) >= 2 and all(p.isidentifier() for p in parts)
        return ("other" if custom else "draft_model"), ""
    if not isinstance(method, str):
        return None, f"method must be a string, got {method!r}"
    if method.endswith(_VLLM_MTP_SUFFIX):
        return "mtp", ""
    if method not in _VLLM_METHODS:
        return None, f"method {method!r} is not one vLLM 0.32 knows"
    return _VLLM_METHODS[method], ""


def _schedule(value: object, k: int) -> tuple[DepthRange, ...] | SpecRefusal:
    """num_speculative_tokens_per_batch_size as vLLM validates it (v1/spec_decode/dynamic/utils.py)."""
    if value is None:
        return ()
    bad = SCHEDULE_KEY
    if not isinstance(value, list) or not value:
        return SpecRefusal((f"{bad} must be a non-empty list of [first, last, k] entries",))
    ranges: list[DepthRange] = []
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 3 and all(is_int(v) for v in entry)):
            return SpecRefusal((f"{bad}: {entry!r} is not [first batch, last batch, k] integers",))
        first, last, depth = entry
        if not 1 <= first <= last or depth < 0:
            return SpecRefusal((f"{bad}: {entry!r} needs 1 <= first <= last and k >= 0",))
        if depth > k:
            return SpecRefusal((f"{bad}: {entry!r} drafts more than num_speculative_tokens {k}",))
        ranges.append(DepthRange(first, last, depth))
    ranges.sort(key=lambda r: r.first_batch)
    if ranges[0].first_batch != 1:
        return SpecRefusal((f"{bad}: the first range must start at batch size 1",))
    if any(b.first_batch <= a.last_batch for a, b in zip(ranges, ranges[1:], strict=False)):
        return SpecRefusal((f"{bad}: ranges overlap",))
    return tuple(ranges)


# --------------------------------------------------------------------------------------------------
# what the gate and the schedule read

# vLLM 0.32's short spellings of its settings (vllm/engine/arg_utils.py, add_argument with two names)
SHORT_FLAGS = {
    "-q": "--quantization",
    "-pp": "--pipeline-parallel-size",
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-tp": "--tensor-parallel-size",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpn": "--data-parallel-rank",
    "-dpr": "--data-parallel-start-rank",
    "-dpl": "--data-parallel-size-local",
    "-dpa": "--data-parallel-address",
    "-dpp": "--data-parallel-rpc-port",
    "-dpb": "--data-parallel-backend",
    "-dph": "--data-parallel-hybrid-lb",
    "-dpe": "--data-parallel-external-lb",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "-ep": "--enable-expert-parallel",
    "-sc": "--speculative-config",
    "-dc": "--diffusion-config",
    "-cc": "--compilation-config",
    "-ac": "--attention-config",
}
# the data-parallel size, under which vLLM turns a per-batch-size schedule off
DATA_PARALLEL_FLAGS = ("--data-parallel-size", "-dp")
# vLLM reports each request's own timing (the last chunk's `metrics`) with this flag, from 0.32
SERVER_CLOCK_FLAG = "--enable-per-request-metrics"
SERVER_CLOCK_SINCE = (0, 32)


# vLLM's /metrics (vllm/v1/metrics/loggers.py); the acceptance-rate gauge is vLLM 0's (before 0.10)
METRIC_NAMES = MetricNames(
    drafts="vllm:spec_decode_num_drafts",
    draft_tokens="vllm:spec_decode_num_draft_tokens",
    accepted_tokens="vllm:spec_decode_num_accepted_tokens",
    accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos",
    prompt_tokens="vllm:prompt_tokens",
    generation_tokens="vllm:generation_tokens",
    accept_rate="vllm:spec_decode_draft_acceptance_rate",
    kv_config=KvConfigInfo(
        "vllm:cache_config_info",
        "kv_cache_size_tokens",
        "kv_cache_max_concurrency",
        "num_gpu_blocks",
        "block_size",
    ),
)


def compile_schedule(base: Mapping[str, object], top: int, table: Sequence[DepthRange]) -> str:
    """The exact JSON for --speculative-config running `table` with num_speculative_tokens `top`."""
    config = dict(base)
    config[DEPTH_KEY] = top
    config[SCHEDULE_KEY] = [[r.first_batch, r.last_batch, r.k] for r in table]
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def depth_in_force(positions: int, spec_counters: bool) -> int | None:
    """The per-position series' count; 0 for an exposition without any spec-decode counter (off)."""
    if positions:
        return positions
    return None if spec_counters else 0


# --------------------------------------------------------------------------------------------------
# each request's own fields: the last chunk's `metrics` (vllm/entrypoints/generate/base/protocol.py
# PerRequestMetrics) and its `speculative_decoding` (vllm/v1/metrics/stats.py RequestSpecDecodeMetrics)


# the fields of a response's `metrics` read_metrics reads (its speculative_decoding object's among them)
SERVER_FIELDS = (
    "time_to_first_token_ms",
    "generation_time_ms",
    "queue_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
    "speculative_decoding",
    "num_spec_tokens",
    "num_spec_steps",
    "num_draft_tokens",
    "num_accepted_draft_tokens",
    "acceptance_histogram",
    "per_step_accepted",
    "per_step_drafted",
)


def read_metrics(obj: dict[str, Any], seen: Seen, completion_tokens: int) -> ServedFields:
    """A response's ``metrics``: the request's timing and, when it drafted, its acceptance."""
    found = timing(obj, seen)
    spec = object_at(obj, "speculative_decoding")
    return ServedFields(found, None if spec is None else vllm_acceptance(spec, completion_tokens))


def timing(obj: dict[str, Any], seen: Seen) -> ServerTiming:
    """vLLM's per-request timing: each interval finite, non-negative and within the client's wait."""
    high = waited_ms(seen)
    found = ServerTiming(
        ttft_ms=milliseconds(obj.get("time_to_first_token_ms"), "metrics.time_to_first_token_ms", high),
        generation_ms=milliseconds(obj.get("generation_time_ms"), "metrics.generation_time_ms", high),
        queue_ms=milliseconds(obj.get("queue_time_ms"), "metrics.queue_time_ms", high),
        mean_itl_ms=milliseconds(obj.get("mean_itl_ms"), "metrics.mean_itl_ms", high),
        tokens_per_second=None,
    )
    tps = obj.get("tokens_per_second")
    if tps is not None and (
        isinstance(tps, bool) or not isinstance(tps, int | float) or not math.isfinite(tps) or tps < 0
    ):
        raise ServedValueError(f"metrics.tokens_per_second is {show(tps)}, not a finite rate")
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
    k = count(obj.get("num_spec_tokens"), f"{where}.num_spec_tokens", 1, MAX_SPEC_TOKENS)
    steps = count(obj.get("num_spec_steps"), f"{where}.num_spec_steps", 0, completion_tokens)
    drafted = count(obj.get("num_draft_tokens"), f"{where}.num_draft_tokens", 0, steps * k)
    accepted = count(obj.get("num_accepted_draft_tokens"), f"{where}.num_accepted_draft_tokens", 0, drafted)
    per_position = _from_histogram(obj.get("acceptance_histogram"), k, steps, accepted)
    if obj.get("per_step_accepted") is not None or obj.get("per_step_drafted") is not None:
        from_steps = _from_steps(obj, k, steps, drafted, accepted)
        if per_position is not None and from_steps != per_position:
            raise ServedValueError(f"{where}: per_step_accepted disagrees with acceptance_histogram")
        per_position = from_steps
    return RequestAcceptance(NAME, drafted, accepted, steps, k, per_position)


def _from_histogram(value: object, k: int, steps: int, accepted: int) -> tuple[int, ...] | None:
    """Per-position acceptance from the steps by accepted count: position p was accepted in every step
    that accepted more than p tokens (drafts are accepted as a prefix)."""
    if value is None:
        return None
    where = "metrics.speculative_decoding.acceptance_histogram"
    hist = int_list(value, where, k + 1, steps)
    if sum(hist) != steps or sum(j * n for j, n in enumerate(hist)) != accepted:
        raise ServedValueError(f"{where} does not add up to num_spec_steps and num_accepted_draft_tokens")
    return tuple(sum(hist[p + 1 :]) for p in range(k))


def _from_steps(obj: dict[str, Any], k: int, steps: int, drafted: int, accepted: int) -> tuple[int, ...]:
    where = "metrics.speculative_decoding"
    acc = int_list(obj.get("per_step_accepted"), f"{where}.per_step_accepted", steps, k)
    dra = int_list(obj.get("per_step_drafted"), f"{where}.per_step_drafted", steps, k)
    if sum(acc) != accepted or sum(dra) != drafted or any(a > d for a, d in zip(acc, dra, strict=True)):
        raise ServedValueError(
            f"{where}: per_step_accepted / per_step_drafted do not add up to the request's counts"
        )
    return tuple(sum(1 for a in acc if a > p) for p in range(k))


ENGINE = EngineParts(
    name=NAME,
    title="vLLM",
    flags=(
        FlagGroup(_VLLM_FLAGS),
        FlagGroup(_VLLM_REMOVED, removed="removed from vLLM (0.32 takes --speculative-config)"),
    ),
    spec_namespace=SpecNamespace(("--spec-", "--speculative")),
    read_spec=read_spec,
    programs=Programs(
        executables=("vllm",),  # `vllm serve MODEL`
        subcommand="serve",
        modules=(("vllm.entrypoints.openai.api_server", False), ("vllm.entrypoints.cli.main", True)),
    ),
    image_words=("vllm",),
    config_variables=("VLLM_",),  # vllm/envs.py
    metric_prefix="vllm:",
    metric_names=METRIC_NAMES,
    metric_counters=SpecCounters(
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:generation_tokens_total",
    ),
    log_lines=vllm_log,
    responses=vllm_response,
    response_json=ResponseJson(
        re.compile(r'"speculative_decoding"\s*:\s*\{'),
        "vLLM metrics.speculative_decoding",
        tool_keys=("completed", "output_throughput"),
        tool_note="this is a `vllm bench serve` result; import it with `mtpverdict import vllm-bench`",
    ),
    rate_caveat=Absent("vLLM's acceptance rate means one thing in every release", needed=False),
    depth_in_force=depth_in_force,
    readiness=Absent(
        "/health answering 200 is ready: vLLM serves only once its engine and drafter are built",
        needed=False,
    ),
    server_fields=ServerFields(
        "metrics",
        read_metrics,
        SERVER_CLOCK_FLAG,
        SERVER_CLOCK_SINCE,
        timed=True,
        fields=SERVER_FIELDS,
        report_flags=(("--per-request-spec-decode-metrics", 1),),  # the per-request acceptance report
    ),
    boot_log=Absent(
        "vLLM's log prints acceptance per logging interval (no per-request lines to match to runs), and "
        "its KV pool shows on /metrics",
        needed=False,
    ),
    context_flags=("--max-model-len",),
    data_parallel_flags=DATA_PARALLEL_FLAGS,
    short_flags=SHORT_FLAGS,
    compile_schedule=compile_schedule,
)
