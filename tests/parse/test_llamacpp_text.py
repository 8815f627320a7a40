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


def test_older_kv_cache_lines_have_one_stream() -> None:
    older = (
        "llama_kv_cache_unified: size = 1536.00 MiB (  4096 cells,  32 layers,  1 seqs), "
        "K (f16):  768.00 MiB, V (f16):  768.00 MiB"
    )
    spaced = "llama_kv_cache_unified: size = 18432.00 MiB (131072 cells,  36 layers,  1/ 1 seqs)"
    assert [kv.kv_cache_tokens for kv in parse_text(older).kv_capacity] == [4096]
    assert [kv.memory_gib for kv in parse_text(older).kv_capacity] == [1.5]
    assert [kv.kv_cache_tokens for kv in parse_text(spaced).kv_capacity] == [131072]


def test_side_contexts_keep_only_the_serving_pool() -> None:
    """A dry run (debug level), a sliding-window cache and a draft model print KV lines of their own."""
    text = "\n".join(
        [
            "I cmn  common_init_: fitting params to device memory ...",
            "I llama_kv_cache: size =    2.00 MiB (   256 cells,   2 layers,  4/4 seqs), K (f16): 1.00 MiB",
            "I common_fit_params: fitting params to free memory took 0.01 seconds",
            "I llama_kv_cache_iswa: creating non-SWA KV cache, size = 8192 cells",
            "I llama_kv_cache: size =  512.00 MiB (  8192 cells,   8 layers,  1/1 seqs), K (f16): 256.00 MiB",
            "I llama_kv_cache_iswa: creating     SWA KV cache, size = 1536 cells",
            "I llama_kv_cache: size =   96.00 MiB (  1536 cells,  24 layers,  1/1 seqs), K (f16): 48.00 MiB",
            "I common_speculative_init_result: loading draft model 'draft.gguf'",
            "I llama_kv_cache: size =   64.00 MiB (  8192 cells,   4 layers,  1/1 seqs), K (f16): 32.00 MiB",
            "I srv    load_model: initializing, n_slots = 1, n_ctx_slot = 8192",
            "I llama_kv_cache: size =   64.00 MiB (  8192 cells,   4 layers,  1/1 seqs), K (f16): 32.00 MiB",
        ]
    )
    result = parse_text(text)
    assert result.kv_capacity == (
        KvCapacity(kv_cache_tokens=8192, window_tokens=8192, slots=1, memory_gib=0.5, line=5),
        KvCapacity(kv_cache_tokens=8192, memory_gib=64 / 1024, line=11),  # after setup: a new context
    )
