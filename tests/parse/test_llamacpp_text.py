"""llama.cpp text users paste and the server prints: bare timings, the KV cache line, build lines."""

from __future__ import annotations

import json

from mtpverdict.parse import AcceptanceReading, KvCapacity, parse_text

# The `timings` object of a real llama-server response (draft-copy, depth 2), pasted on its own.
BARE_TIMINGS = {
    "cache_n": 0,
    "prompt_n": 22,
    "prompt_ms": 2.92,
    "prompt_per_token_ms": 0.13272727272727272,
    "prompt_per_second": 7534.246575342466,
    "predicted_n": 48,
    "predicted_ms": 25.266,
    "predicted_per_token_ms": 0.5375744680851063,
    "predicted_per_second": 1860.2073933349168,
    "draft_n": 31,
    "draft_n_accepted": 31,
}
KV_LINE = (
    "0.00.030.271 I llama_kv_cache: size =    8.00 MiB (  1024 cells,   2 layers,  4/4 seqs), "
    "K (f16):    4.00 MiB, V (f16):    4.00 MiB"
)
SLOTS_LINE = (
    "0.00.053.705 I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 1024, kv_unified = 'false'"
)


def test_a_bare_timings_object_parses() -> None:
    for text in (json.dumps(BARE_TIMINGS, indent=2), json.dumps(BARE_TIMINGS)):
        result = parse_text(text)
        assert result.engine == "llamacpp"
        assert result.acceptance == (
            AcceptanceReading(
                source="response",
                scoped="run",
                kind="response",
                draft_tokens=31,
                accepted_tokens=31,
                line=11 if "\n" in text else 1,
            ),
        )
        assert result.warnings == ()


def test_the_kv_cache_line_gives_the_pool_over_all_streams() -> None:
    result = parse_text(KV_LINE + "\n" + SLOTS_LINE + "\n")
    assert result.engine == "llamacpp"
    assert result.kv_capacity == (
        KvCapacity(kv_cache_tokens=4096, window_tokens=1024, slots=4, memory_gib=8.0 / 1024, line=1),
    )


def test_the_current_build_line_names_the_version() -> None:
    line = (
        "0.00.002.634 I cmn  common_param: common_params_print_info: build 1 (0c1e570) with GNU 12.2.0 "
        "for Linux x86_64"
    )
    assert parse_text(line).engine_version == "1 (0c1e570)"
    assert parse_text("version: 0.5.0-dev (build 1, commit 0c1e570)").engine_version == "1 (0c1e570)"
