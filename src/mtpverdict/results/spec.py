"""Field specs of results format v1: the one source of the loader's checks and of the JSON Schemas."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

RESULTS_FORMAT = "mtpverdict.results/1"

METHODS = ("mtp", "ngram", "eagle", "eagle3", "draft_model", "medusa", "suffix", "other")
ROLES = ("control", "candidate")
SOURCES = ("metrics", "log", "response", "report")
SCOPES = ("run", "window")
SUMMARY_METRICS = ("decode_tps", "ttft_ms", "aggregate_tps")

_SHA256 = r"^[0-9a-f]{64}$"
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$"


@dataclass(frozen=True, slots=True)
class Field:
    """One key of a JSON object: its type, whether it must be present, and its bounds."""

    name: str
    type: str  # str | int | num | bool | str_list | int_list | num_list | obj | str_map
    required: bool = True
    nullable: bool = False
    minimum: float | None = None
    maximum: float | None = None
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    description: str = ""


def _f(name: str, type_: str, description: str, **kw: Any) -> Field:
    return Field(name=name, type=type_, description=description, **kw)


_ARM = _f("arm", "str", "Arm name, one of campaign.json's arms.", pattern=_NAME)
_BOOT = _f("boot", "int", "Boot number of this arm, 1 for its first boot.", minimum=1)
_NOTE = _f("note", "str", "Free text kept with the record.", required=False, nullable=True)

# What the server reported about one request (vLLM --enable-per-request-metrics and
# --per-request-spec-decode-metrics, llama.cpp timings), kept beside the client's own timing, and the
# collector's CPU use during the run. All optional: absent when the server does not report them.
_SERVER_REQUEST_FIELDS: tuple[Field, ...] = (
    _f(
        "server_ttft_ms",
        "num",
        "The server's time to first token for this request, ms (vLLM metrics.time_to_first_token_ms: "
        "from scheduling to the first token; queue wait excluded).",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "server_queue_ms",
        "num",
        "The server's queue wait for this request, ms (vLLM metrics.queue_time_ms).",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "server_generation_ms",
        "num",
        "The server's decode time for this request, first to last token, ms (vLLM "
        "metrics.generation_time_ms); compare with t_end - t_first.",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "server_mean_itl_ms",
        "num",
        "The server's mean inter-token latency for this request, ms: generation time / (tokens - 1) "
        "(vLLM metrics.mean_itl_ms).",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "spec_steps",
        "int",
        "Verify steps that drafted for this request (vLLM metrics.speculative_decoding.num_spec_steps; "
        "the per-request share of vllm:spec_decode_num_drafts).",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "spec_draft_tokens",
        "int",
        "Draft tokens proposed for this request (vLLM num_draft_tokens, llama.cpp timings.draft_n).",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "spec_accepted_tokens",
        "int",
        "Draft tokens accepted for this request (vLLM num_accepted_draft_tokens, llama.cpp "
        "timings.draft_n_accepted).",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "spec_accepted_per_position",
        "int_list",
        "Verify steps of this request that accepted draft position 0..k-1 (from vLLM's "
        "per_step_accepted, or its acceptance_histogram): the per-request share of "
        "vllm:spec_decode_num_accepted_tokens_per_pos.",
        required=False,
        nullable=True,
        minimum=0,
    ),
    _f(
        "client_cpu_share",
        "num",
        "CPU seconds the collector process used during this request's run over the run's wall seconds "
        "(1.0 = one core busy the whole run); the same on every request of the run. A high share means the "
        "harness may have read deltas late.",
        required=False,
        nullable=True,
        minimum=0,
    ),
)
SERVER_REQUEST_FIELDS = tuple(f.name for f in _SERVER_REQUEST_FIELDS)

RECORD_FIELDS: dict[str, tuple[Field, ...]] = {
    "request": (
        _ARM,
        _BOOT,
        _f("workload", "str", "Workload id from campaign.json.", pattern=_NAME),
        _f("concurrency", "int", "Requests in flight together in this run.", minimum=1),
        _f("rep", "int", "Repetition number of the run inside its cell, from 1.", minimum=1),
        _f(
            "stream",
            "int",
            "Index of the request inside its run, 0..concurrency-1.",
            required=False,
            minimum=0,
        ),
        _f("warmup", "bool", "True for a harness warm-up run: reported, never measured."),
        _f("t_start", "num", "Seconds when the request was sent (monotonic clock of the boot).", minimum=0),
        _f(
            "t_first",
            "num",
            "Seconds at the first content delta; null when none arrived.",
            nullable=True,
            minimum=0,
        ),
        _f(
            "t_end",
            "num",
            "Seconds at the last content delta; null when none arrived.",
            nullable=True,
            minimum=0,
        ),
        _f(
            "prompt_tokens",
            "int",
            "Prompt tokens as the server's usage reports them.",
            nullable=True,
            minimum=0,
        ),
        _f(
            "completion_tokens",
            "int",
            "Completion tokens as the server's usage reports them.",
            nullable=True,
            minimum=0,
        ),
        _f("status", "str", "ok, or error when the request failed.", enum=("ok", "error")),
        _f("error", "str", "What failed, for status error.", required=False, nullable=True),
        _f(
            "output_sha256",
            "str",
            "SHA-256 of the completion text.",
            required=False,
            nullable=True,
            pattern=_SHA256,
        ),
        _f(
            "nonce",
            "str",
            "The unseeded nonce prefixed to the prompt (defeats prefix caching); null when none.",
            required=False,
            nullable=True,
        ),
        _f(
            "bunched_chunks",
            "int",
            "Content deltas that arrived within 200 us of the previous one: read from a buffer in a burst "
            "(a starved client or server), so the decode window and TTFT of this stream are not measured.",
            required=False,
            nullable=True,
            minimum=0,
        ),
        _f(
            "chunks",
            "int",
            "Content deltas received (several tokens each under speculation).",
            required=False,
            nullable=True,
            minimum=0,
        ),
        *_SERVER_REQUEST_FIELDS,
        _NOTE,
    ),
    "acceptance": (
        _ARM,
        _BOOT,
        _f(
            "workload",
            "str",
            "Workload the window covers; null for a window spanning several.",
            nullable=True,
            pattern=_NAME,
        ),
        _f("concurrency", "int", "Concurrency of the window; null when mixed.", nullable=True, minimum=1),
        _f(
            "rep",
            "int",
            "Rep of the run the window covers; null when the window is not one run.",
            nullable=True,
            minimum=1,
        ),
        _f(
            "source",
            "str",
            "metrics (counter delta), log (engine log line), response (per-response "
            "fields) or report (transcribed from a write-up that does not name its surface).",
            enum=SOURCES,
        ),
        _f("scoped", "str", "run when the numbers cover exactly one run, window otherwise.", enum=SCOPES),
        _f(
            "status",
            "str",
            "ok, or void when the window is unusable (e.g. a counter reset).",
            required=False,
            enum=("ok", "void"),
        ),
        _f("drafts", "int", "Draft rounds (speculation steps) in the window.", nullable=True, minimum=0),
        _f("draft_tokens", "int", "Draft tokens proposed in the window.", nullable=True, minimum=0),
        _f("accepted_tokens", "int", "Draft tokens accepted in the window.", nullable=True, minimum=0),
        _f(
            "accepted_per_position",
            "int_list",
            "Accepted counts per draft position 0..k-1.",
            required=False,
            nullable=True,
            minimum=0,
        ),
        _f(
            "per_position_rate",
            "num_list",
            "Acceptance rate per position when only rates are known.",
            required=False,
            nullable=True,
            minimum=0,
            maximum=1,
        ),
        _f(
            "acceptance_rate",
            "num",
            "Reported rate (fraction) when the counts are not known.",
            required=False,
            nullable=True,
            minimum=0,
            maximum=1,
        ),
        _f(
            "mean_acceptance_length",
            "num",
            "Reported mean acceptance length (bonus token included).",
            required=False,
            nullable=True,
            minimum=0,
        ),
        _f("raw", "str", "Path under raw/ of the text this was read from.", required=False, nullable=True),
        _f("line", "int", "1-based line in the raw file.", required=False, nullable=True, minimum=1),
        _f("error", "str", "Why the window is void.", required=False, nullable=True),
        _NOTE,
    ),
    "boot": (
        _ARM,
        _BOOT,
        _f("order", "int", "Position of this boot in the whole campaign, from 1.", minimum=1),
        _f("status", "str", "ready, or failed when the server never served.", enum=("ready", "failed")),
        _f("ready_seconds", "num", "Seconds from launch to ready.", nullable=True, minimum=0),
        _f(
            "kv_cache_tokens",
            "int",
            "KV cache pool in tokens, as the server reports it.",
            nullable=True,
            minimum=0,
        ),
        _f("block_size", "int", "KV block size in tokens.", nullable=True, minimum=1),
        _f("num_blocks", "int", "KV blocks in the pool.", nullable=True, minimum=0),
        _f("max_model_len", "int", "The server's context window.", nullable=True, minimum=1),
        _f("engine_version", "str", "Engine version as the server reports it.", nullable=True),
        _f("argv", "str_list", "The serve command line of this boot.", nullable=True),
        _f("error", "str", "Why the boot failed.", nullable=True),
        _f(
            "observed_k",
            "int",
            "Speculative depth seen in force (per-position counter labels).",
            required=False,
            nullable=True,
            minimum=0,
        ),
        _f("log", "str", "Path under raw/ of this boot's server log.", required=False, nullable=True),
        _NOTE,
    ),
    "coherence": (
        _ARM,
        _BOOT,
        _f("case", "str", "Coherence case id.", pattern=_NAME),
        _f("passed", "bool", "Whether the output met the expectation."),
        _f("expected", "str", "What the output had to contain.", nullable=True),
        _f("output_sha256", "str", "SHA-256 of the output.", nullable=True, pattern=_SHA256),
        _f("output", "str", "The output text (may be truncated).", nullable=True),
        _NOTE,
    ),
    "likelihood": (
        _ARM,
        _BOOT,
        _f("rep", "int", "Repetition, from 1; null when not repeated.", nullable=True, minimum=1),
        _f("tokens", "int", "Teacher-forced tokens scored.", minimum=1),
        _f("mean_nll", "num", "Mean negative log-likelihood per token (nats).", minimum=0),
        _NOTE,
    ),
    "summary": (
        _ARM,
        _f(
            "boot",
            "int",
            "Boot the summary comes from; null when not known.",
            required=False,
            nullable=True,
            minimum=1,
        ),
        _f("workload", "str", "Workload id from campaign.json.", pattern=_NAME),
        _f("concurrency", "int", "Concurrency of the cell.", minimum=1),
        _f("metric", "str", "decode_tps, ttft_ms or aggregate_tps.", enum=SUMMARY_METRICS),
        _f("n", "int", "Runs the summary stands for.", minimum=1),
        _f("median", "num", "Median over the runs.", minimum=0),
        _f("min", "num", "Smallest run; null when not known.", nullable=True, minimum=0),
        _f("max", "num", "Largest run; null when not known.", nullable=True, minimum=0),
        _f(
            "distinct_outputs",
            "int",
            "Distinct output hashes among the runs, when known.",
            required=False,
            nullable=True,
            minimum=1,
        ),
        _NOTE,
    ),
}

SCOPE_FIELDS: tuple[Field, ...] = (
    _f("device", "str", "Accelerator and host.", nullable=True),
    _f("engine", "str", "Serving engine (vllm, sglang, llamacpp, ...).", nullable=True),
    _f("engine_version", "str", "Engine version or image.", nullable=True),
    _f("model", "str", "Served checkpoint.", nullable=True),
    _f("claim", "str", "What the evidence may be used to claim, and what not.", nullable=True),
)

SPEC_FIELDS: tuple[Field, ...] = (
    _f("method", "str", "Speculative method; null for speculation off.", nullable=True, enum=METHODS),
    _f("k", "int", "Speculative tokens per step; null or 0 when off.", nullable=True, minimum=0),
    _f(
        "config",
        "obj",
        "The engine's speculative config as given to the server.",
        required=False,
        nullable=True,
    ),
)

ARM_FIELDS: tuple[Field, ...] = (
    _f("name", "str", "Arm name, unique in the campaign.", pattern=_NAME),
    _f("role", "str", "control (the unspeculated baseline) or candidate.", enum=ROLES),
    _f("spec", "obj", "Speculative configuration of the arm."),
    _f("order", "int", "Boot order of the arm's first boot, from 1.", minimum=1),
    _f(
        "serve_argv",
        "str_list",
        "Serve command line, identical across arms but for speculation.",
        nullable=True,
    ),
    _f("labels", "str_map", "Free labels (e.g. quantization, graph mode).", required=False),
    _f(
        "family",
        "str",
        "Arms sharing a family compare against that family's control arms.",
        required=False,
        pattern=_NAME,
    ),
)

WORKLOAD_FIELDS: tuple[Field, ...] = (
    _f("id", "str", "Workload id.", pattern=_NAME),
    _f("prompt_tokens", "int", "Prompt tokens (server-reported where known).", nullable=True, minimum=0),
    _f("max_tokens", "int", "Completion tokens asked for.", nullable=True, minimum=1),
    _f("expect_identical", "bool", "Greedy outputs must be byte-identical across arms."),
    _f("description", "str", "What the workload is.", required=False, nullable=True),
)

CAMPAIGN_FIELDS: tuple[Field, ...] = (
    _f("format", "str", f'Always "{RESULTS_FORMAT}".', enum=(RESULTS_FORMAT,)),
    _f("id", "str", "Campaign id.", pattern=_NAME),
    _f("title", "str", "One line saying what the campaign measures."),
    _f("scope", "obj", "Where the evidence comes from and what it may claim."),
    _f("arms", "obj_list", "Arms in boot order."),
    _f("workloads", "obj_list", "Workloads."),
    _f(
        "window_tokens",
        "int",
        "Context window used for KV ceilings (pool / window).",
        nullable=True,
        minimum=1,
    ),
    _f("notes", "str", "Free text.", required=False, nullable=True),
    _f("synthetic", "bool", "True when the records were generated, not measured.", required=False),
    _f(
        "source", "str", "Where the records come from (a write-up, a harness).", required=False, nullable=True
    ),
    _f(
        "sequential_looks",
        "int",
        "Interim decisions the campaign was designed for (collect --until-resolved); decide tests each look "
        "at alpha / sequential_looks.",
        required=False,
        minimum=1,
    ),
)

_TYPE_NAMES = {
    "str": "a string",
    "int": "an integer",
    "num": "a number",
    "bool": "true or false",
    "str_list": "a list of strings",
    "int_list": "a list of integers",
    "num_list": "a list of numbers",
    "obj": "an object",
    "obj_list": "a list of objects",
    "str_map": "an object of string values",
}


def _is_num(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_ok(field: Field, value: object) -> bool:
    kind = field.type
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "num":
        return _is_num(value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "int_list":
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if kind == "num_list":
        return isinstance(value, list) and all(_is_num(v) for v in value)
    if kind == "obj":
        return isinstance(value, dict)
    if kind == "obj_list":
        return isinstance(value, list) and all(isinstance(v, dict) for v in value)
    if kind == "str_map":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    raise AssertionError(f"unknown field type {kind}")


def _bounds_problem(field: Field, value: object) -> str | None:
    if isinstance(value, list):
        for v in value:
            bad = _scalar_bounds_problem(field, v)
            if bad:
                return bad
        return None
    return _scalar_bounds_problem(field, value)


@functools.cache
def _matcher(pattern: str) -> Callable[[str], re.Match[str] | None]:
    return re.compile(pattern).match


def _scalar_bounds_problem(field: Field, v: object) -> str | None:
    if isinstance(v, str):
        if field.enum is not None and v not in field.enum:
            return f"must be one of {', '.join(field.enum)}; got {v!r}"
        if field.pattern is not None and not _matcher(field.pattern)(v):
            return f"{v[:80]!r} does not match {field.pattern}"
        return None
    if _is_num(v):
        x = float(v)  # type: ignore[arg-type]
        if not math.isfinite(x):
            return "must be a finite number"
        if field.minimum is not None and x < field.minimum:
            return f"must be >= {field.minimum:g}, got {v}"
        if field.maximum is not None and x > field.maximum:
            return f"must be <= {field.maximum:g}, got {v}"
    return None


def _value_problem(field: Field, value: object) -> str | None:
    """The problem of a non-null value: its type, then its bounds; None when valid."""
    if not _type_ok(field, value):
        return f"must be {_TYPE_NAMES[field.type]}, got {type(value).__name__}"
    if field.type == "bool":
        return None
    return _bounds_problem(field, value)


def _checker(field: Field) -> Callable[[object], str | None]:
    """_value_problem specialised for one field, with a fast path for the exact JSON types.

    check_object runs once per record, so this is the loader's inner loop; any value off the fast
    path goes through _value_problem, which gives the same messages.
    """
    if field.type == "str":
        enum, pattern = field.enum, field.pattern
        match = _matcher(pattern) if pattern is not None else None

        def check_str(v: object) -> str | None:
            if type(v) is not str:
                return _value_problem(field, v)
            if enum is not None and v not in enum:
                return f"must be one of {', '.join(enum)}; got {v!r}"
            if match is not None and not match(v):
                return f"{v[:80]!r} does not match {pattern}"
            return None

        return check_str
    if field.type in ("int", "num"):
        fast: tuple[type, ...] = (int,) if field.type == "int" else (int, float)
        low, high = field.minimum, field.maximum

        def check_number(v: object) -> str | None:
            if type(v) not in fast:
                return _value_problem(field, v)
            x = float(v)  # type: ignore[arg-type]
            if not math.isfinite(x):
                return "must be a finite number"
            if low is not None and x < low:
                return f"must be >= {low:g}, got {v}"
            if high is not None and x > high:
                return f"must be <= {high:g}, got {v}"
            return None

        return check_number
    if field.type == "bool":
        return lambda v: None if type(v) is bool else _value_problem(field, v)
    return lambda v: _value_problem(field, v)


# Each field tuple's names and checkers, built once: the tuples are module constants. Keyed by
# identity; the tuple is kept in the value so its id cannot be reused by another object.
_COMPILED: dict[
    int,
    tuple[tuple[Field, ...], frozenset[str], tuple[tuple[Field, Callable[[object], str | None]], ...]],
] = {}


def _compiled(
    fields: tuple[Field, ...],
) -> tuple[frozenset[str], tuple[tuple[Field, Callable[[object], str | None]], ...]]:
    found = _COMPILED.get(id(fields))
    if found is None or found[0] is not fields:
        found = (fields, frozenset(f.name for f in fields), tuple((f, _checker(f)) for f in fields))
        _COMPILED[id(fields)] = found
    return found[1], found[2]


def check_object(
    obj: Mapping[str, Any], fields: tuple[Field, ...], prefix: str = "", skip: str | None = None
) -> list[tuple[str, str]]:
    """Check one JSON object against its fields; return (key, message) pairs, empty when valid.

    `skip` names one key that is not a field and is checked elsewhere (a record's `kind`).
    """
    problems: list[tuple[str, str]] = []
    known, checkers = _compiled(fields)
    for key in obj:
        if key not in known and key != skip:
            allowed = ", ".join(sorted(known))
            problems.append((f"{prefix}{key}", f"unknown key; allowed keys are {allowed}"))
    for field, check in checkers:
        if field.name not in obj:
            if field.required:
                problems.append((f"{prefix}{field.name}", f"missing; it must be {_TYPE_NAMES[field.type]}"))
            continue
        value = obj[field.name]
        if value is None:
            if not field.nullable:
                problems.append((f"{prefix}{field.name}", f"must be {_TYPE_NAMES[field.type]}, not null"))
            continue
        bad = check(value)
        if bad:
            problems.append((f"{prefix}{field.name}", bad))
    return problems


# ---------------------------------------------------------------------------------------------------
# JSON Schema generation: the shipped schema files are generated from the fields above.

_JSON_TYPES: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "num": {"type": "number"},
    "bool": {"type": "boolean"},
    "str_list": {"type": "array", "items": {"type": "string"}},
    "int_list": {"type": "array", "items": {"type": "integer"}},
    "num_list": {"type": "array", "items": {"type": "number"}},
    "obj": {"type": "object"},
    "obj_list": {"type": "array", "items": {"type": "object"}},
    "str_map": {"type": "object", "additionalProperties": {"type": "string"}},
}


def _field_schema(field: Field) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(json.dumps(_JSON_TYPES[field.type]))
    target = schema["items"] if field.type in ("int_list", "num_list", "str_list") else schema
    if field.minimum is not None:
        target["minimum"] = field.minimum if field.type != "int" else int(field.minimum)
    if field.maximum is not None:
        target["maximum"] = field.maximum
    if field.enum is not None:
        target["enum"] = list(field.enum)
    if field.pattern is not None:
        target["pattern"] = field.pattern
    if field.nullable:
        schema = {"anyOf": [schema, {"type": "null"}]}
    schema["description"] = field.description
    return schema


def _object_schema(fields: tuple[Field, ...], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    props = {f.name: _field_schema(f) for f in fields}
    if extra:
        props.update(extra)
    return {
        "type": "object",
        "properties": props,
        "required": sorted([f.name for f in fields if f.required] + list(extra or {})),
        "additionalProperties": False,
    }


def records_schema() -> dict[str, Any]:
    """JSON Schema of one line of records.jsonl."""
    variants = []
    for kind, fields in RECORD_FIELDS.items():
        variant = _object_schema(fields, {"kind": {"const": kind}})
        variant["title"] = f"{kind} record"
        variants.append(variant)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://mtpverdict.dev/schemas/records-1.json",
        "title": f"{RESULTS_FORMAT} records.jsonl line",
        "oneOf": variants,
    }


def campaign_schema() -> dict[str, Any]:
    """JSON Schema of campaign.json."""
    top = _object_schema(CAMPAIGN_FIELDS)
    top["properties"]["scope"] = _object_schema(SCOPE_FIELDS)
    arm = _object_schema(ARM_FIELDS)
    arm["properties"]["spec"] = _object_schema(SPEC_FIELDS)
    top["properties"]["arms"] = {"type": "array", "minItems": 1, "items": arm}
    top["properties"]["workloads"] = {
        "type": "array",
        "minItems": 1,
        "items": _object_schema(WORKLOAD_FIELDS),
    }
    top["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    top["$id"] = "https://mtpverdict.dev/schemas/campaign-1.json"
    top["title"] = f"{RESULTS_FORMAT} campaign.json"
    return top


SCHEMAS = {"campaign-1.schema.json": campaign_schema, "records-1.schema.json": records_schema}


def render_schema(name: str) -> str:
    """The text of a shipped schema file, as generated from the field specs."""
    return json.dumps(SCHEMAS[name](), indent=2, sort_keys=True) + "\n"


def write_schemas(directory: str | None = None) -> list[str]:
    """Regenerate the shipped schema files (run after changing a field spec); return their paths."""
    from pathlib import Path

    target = Path(directory) if directory else Path(__file__).resolve().parent.parent / "schemas"
    written = []
    for name in SCHEMAS:
        path = target / name
        path.write_text(render_schema(name), encoding="utf-8")
        written.append(str(path))
    return written
