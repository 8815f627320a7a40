"""What driving llama.cpp's server needs: endpoints, readiness, depth in force, KV, per-request acceptance.

Pure functions and named constants (the speculative flags, the depth they ask for and the /metrics
names read are the engine module's, mtpverdict.engines.llamacpp), checked against llama-server built
from llama.cpp 0.5.0-dev (commit 0c1e570, vendored by llama-cpp-python 0.3.36): its ``--help``,
``tools/server/server-context.cpp``, ``server-http.cpp``, ``server-task.cpp``, ``server-common.cpp``,
``common/arg.cpp``, ``common/speculative.cpp``, and the text recorded in
``tests/data/recorded/llamacpp-0.5.0-dev-0c1e570-cpu/``.

    health_state(status)                      -> Health          /health: ready, loading or failed
    endpoint_refusal(status, body)            -> str | None      a 501 "Start it with --metrics"
    read_props(doc, source=...)               -> ServerProps     GET /props
    read_slots(doc, source=...)               -> SlotsInfo       GET /slots
    depth_in_force(snapshot, slots)           -> int | None      per-position series; 0 when off
    kv_capacity(props)                        -> KvCapacity      window (per-slot context) and slots
    response_acceptance(obj)                  -> AcceptanceReading | None   one response's timings
    cached_prompt_tokens(obj)                 -> int | None      timings.cache_n (prefix cache)
    build_version(text)                       -> str | None      "b1-0c1e570" -> "1 (0c1e570)"
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mtpverdict.errors import EngineTextError, Problem
from mtpverdict.parse.llamacpp_response import readings
from mtpverdict.parse.metrics import MetricsSnapshot
from mtpverdict.parse.model import AcceptanceReading, KvCapacity

CHECKED_VERSION = "0.5.0-dev (build 1, commit 0c1e570)"  # `llama-server --version` of the build read

# Endpoints (tools/server/server.cpp). /health and /v1/health need no API key.
HEALTH_PATH = "/health"
PROPS_PATH = "/props"
SLOTS_PATH = "/slots"
METRICS_PATH = "/metrics"
MODELS_PATH = "/v1/models"
READY_STATUS = 200
LOADING_STATUS = 503  # server-http.cpp: {"error": {"code": 503, "message": "Loading model", ...}}
REFUSED_STATUS = 501  # server-common.cpp: ERROR_TYPE_NOT_SUPPORTED, "not_supported_error"

# Which endpoint needs which flag (server-context.cpp, `--help`): name, flag, on by default.
ENDPOINT_FLAGS: tuple[tuple[str, str, bool], ...] = (
    ("GET /metrics", "--metrics", False),
    ("GET /slots", "--slots", True),  # --no-slots turns it off
    ("POST /props", "--props", False),  # GET /props always answers
)


class Health(StrEnum):
    """What one /health answer says about a booting server."""

    READY = "ready"
    LOADING = "loading"
    FAILED = "failed"


FINGERPRINT_RE = re.compile(r"^b(\d+)-([0-9a-fA-F]+|unknown)$")


@dataclass(frozen=True, slots=True)
class ServerProps:
    """GET /props: what the server says of itself."""

    total_slots: int
    n_ctx_slot: int  # default_generation_settings.n_ctx: the context each slot may use
    build_info: str | None
    version: str | None  # "<build> (<commit>)", as the log parser names it
    model_path: str | None
    endpoint_metrics: bool | None
    endpoint_slots: bool | None


@dataclass(frozen=True, slots=True)
class SlotsInfo:
    """GET /slots: one entry per slot."""

    n_ctx: tuple[int, ...]
    speculative: tuple[bool, ...]  # false when no speculative context was built, whatever the flags
    processing: tuple[bool, ...]
    spec_types: tuple[str, ...]  # `params["speculative.types"]` of slots that ran a task, distinct

    @property
    def speculating(self) -> bool:
        return any(self.speculative)


def health_state(status: int) -> Health:
    """One /health status: 200 ready; 503 still loading the model; anything else a failure.

    While loading, the body is ``{"error": {"code": 503, "message": "Loading model", ...}}``; once
    ready, ``{"status": "ok"}``. Speculation may still be off when /health says ready: a
    ``--spec-type`` whose context cannot be built is logged as an error and the server serves without
    it, so readiness of a speculating arm also needs /slots (``SlotsInfo.speculating``).
    """
    if status == READY_STATUS:
        return Health.READY
    if status == LOADING_STATUS:
        return Health.LOADING
    return Health.FAILED


def endpoint_refusal(status: int, body: str) -> str | None:
    """The server's message when an endpoint is off (HTTP 501, e.g. "Start it with `--metrics`")."""
    if status != REFUSED_STATUS:
        return None
    error = _json_field(body, "error")
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else "not supported (HTTP 501)"


def read_props(doc: Any, *, source: str = PROPS_PATH) -> ServerProps:
    """GET /props as a typed value; EngineTextError naming the key when the document lacks one."""
    if not isinstance(doc, Mapping):
        raise EngineTextError([Problem(source, "is not a JSON object")])
    settings = doc.get("default_generation_settings")
    n_ctx = _whole(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    total = _whole(doc.get("total_slots"))
    if total is None:
        raise EngineTextError([Problem(source, "needs a whole number of slots", key="total_slots")])
    if n_ctx is None:
        key = "default_generation_settings.n_ctx"
        raise EngineTextError([Problem(source, "needs the per-slot context as a whole number", key=key)])
    build = doc.get("build_info")
    return ServerProps(
        total_slots=total,
        n_ctx_slot=n_ctx,
        build_info=build if isinstance(build, str) else None,
        version=build_version(build) if isinstance(build, str) else None,
        model_path=_str_or_none(doc.get("model_path")),
        endpoint_metrics=_bool_or_none(doc.get("endpoint_metrics")),
        endpoint_slots=_bool_or_none(doc.get("endpoint_slots")),
    )


def read_slots(doc: Any, *, source: str = SLOTS_PATH) -> SlotsInfo:
    """GET /slots as a typed value; EngineTextError naming the slot when an entry is malformed."""
    if not isinstance(doc, list) or not doc:
        raise EngineTextError([Problem(source, "is not a non-empty JSON list of slots")])
    n_ctx: list[int] = []
    speculative: list[bool] = []
    processing: list[bool] = []
    types: list[str] = []
    for index, slot in enumerate(doc):
        context = _whole(slot.get("n_ctx")) if isinstance(slot, Mapping) else None
        if context is None:
            raise EngineTextError([Problem(source, "needs a whole n_ctx", key=f"[{index}].n_ctx")])
        n_ctx.append(context)
        speculative.append(slot.get("speculative") is True)
        processing.append(slot.get("is_processing") is True)
        params = slot.get("params")
        kinds = params.get("speculative.types") if isinstance(params, Mapping) else None
        if isinstance(kinds, str) and kinds not in types:
            types.append(kinds)
    return SlotsInfo(tuple(n_ctx), tuple(speculative), tuple(processing), tuple(types))


def depth_in_force(snapshot: MetricsSnapshot, slots: SlotsInfo | None) -> int | None:
    """The draft length in force: the per-position series' count; 0 when no slot speculates.

    None while a speculating server has verified no draft yet (the series appear with the first),
    or when /slots was not read and the counters cannot tell speculation off from not yet drafted.
    """
    if slots is not None and not slots.speculating:
        return 0
    if snapshot.accepted_per_position:
        return len(snapshot.accepted_per_position)
    return None


def kv_capacity(props: ServerProps) -> KvCapacity:
    """The window (per-slot context) and slots from /props; the pool in tokens is only in the log.

    A unified KV cache (``--kv-unified``, the default when the slot count is automatic) shares one pool
    among the slots, so slots x window is not the pool; the ``llama_kv_cache: size`` log line is.
    """
    return KvCapacity(window_tokens=props.n_ctx_slot, slots=props.total_slots)


def response_acceptance(obj: Any) -> AcceptanceReading | None:
    """The draft counts of one response (plain JSON, or the last SSE chunk); None when nothing drafted.

    ``timings.draft_n`` / ``draft_n_accepted`` are present only when the request drafted; they have no
    verification-step count, so mean length and per-position rates need /metrics or the log.
    """
    found = [reading for reading, _ in readings(obj, None)]
    return found[-1] if found else None


def cached_prompt_tokens(obj: Any) -> int | None:
    """``timings.cache_n``: prompt tokens served from the prefix cache (prefill not cold when > 0)."""
    timings = obj.get("timings") if isinstance(obj, Mapping) else None
    return _whole(timings.get("cache_n")) if isinstance(timings, Mapping) else None


def build_version(text: str) -> str | None:
    """``b<build>-<commit>`` (/props build_info, responses' system_fingerprint) as "<build> (<commit>)"."""
    match = FINGERPRINT_RE.match(text.strip())
    return f"{match.group(1)} ({match.group(2)})" if match else None


def _whole(value: Any) -> int | None:
    """A count from JSON: a non-negative integer (not a bool); None otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bool_or_none(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _json_field(body: str, key: str) -> Any:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc.get(key) if isinstance(doc, dict) else None
