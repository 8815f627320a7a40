"""What collect checks of a llama.cpp server (llama-server) once /health says ready: /props and /slots.

/health answers 200 once the model is loaded, and llama-server builds its speculative context before
that (tools/server/server-context.cpp ``load_model``), but when the context cannot be built it logs
"failed to initialize speculative decoding context" and serves without speculation. So a speculating
arm is ready only when /slots says its slots speculate (``"speculative": true``), and a control only
when they do not. A slot serves one request at a time: a concurrency above the slot count
(``--parallel``) would queue requests inside the server, where no per-request timing sees the wait, so
it is refused. /props gives the slot count, the per-slot context and the build; /slots is off with
``--no-slots``, and then speculation is seen only once a draft was verified (missing evidence, not a
failure). Pure: the caller fetches the bodies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mtpverdict.errors import EngineTextError
from mtpverdict.parse.llamacpp_server import (
    PROPS_PATH,
    SLOTS_PATH,
    ServerProps,
    SlotsInfo,
    read_props,
    read_slots,
)

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


@dataclass(frozen=True, slots=True)
class LlamaReady:
    """What /props and /slots said of a ready llama-server, and whether the arm may run on it."""

    refusal: str | None  # why the boot is refused; None when it may run
    missing: tuple[tuple[str, str], ...]  # evidence not shown, as (key, sentence)
    speculating: bool | None  # /slots; None when not read
    window_tokens: int | None  # the context one slot (one request) may use
    slots: int | None  # requests the server runs at once (/props total_slots, else /slots)
    version: str | None  # "<build> (<commit>)" from /props build_info


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
) -> LlamaReady:
    """Judge a ready server from its /props and /slots bodies (None when not answered 200)."""
    props, slots = _props(props_text), _slots(slots_text)
    absent = (
        (NO_PROPS, props is None),
        (NO_SLOTS, slots is None),
        (NO_METRICS, props is not None and props.endpoint_metrics is False),
    )
    missing = tuple(note for note, gone in absent if gone)
    speculating = None if slots is None else slots.speculating
    count = props.total_slots if props is not None else (None if slots is None else len(slots.n_ctx))
    refusal = None
    if speculating is False and speculates:
        refusal = (
            'the server is ready but no slot speculates (/slots "speculative": false): llama-server serves '
            "without speculation when it cannot build the speculative context (the log says why); refused"
        )
    elif speculating and not speculates:
        refusal = 'a control arm\'s server speculates (/slots "speculative": true); refused'
    elif count is not None and count < concurrency:
        refusal = (
            f"the server has {count} slots but the campaign runs concurrency {concurrency}: requests past "
            f"the slots would wait inside the server, unseen by its timing; serve with --parallel "
            f"{concurrency} or more; refused"
        )
    return LlamaReady(
        refusal=refusal,
        missing=missing,
        speculating=speculating,
        window_tokens=None if props is None else props.n_ctx_slot,
        slots=count,
        version=None if props is None else props.version,
    )
