"""Reader behaviour around the cases: empty, binary, mixed engines, big files, errors, JSON documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpverdict.engines import registry
from mtpverdict.engines.interface import present
from mtpverdict.errors import EngineTextError
from mtpverdict.parse import parse_file, parse_text

from .support import ENGINE_CASES

V1_LINE = (
    "(APIServer pid=1) INFO 05-07 04:56:17 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
    "2.00, Accepted throughput: 1.00 tokens/s, Drafted throughput: 3.00 tokens/s, Accepted: {a} tokens, "
    "Drafted: 30 tokens, Per-position acceptance rate: 0.600, 0.300, 0.100, Avg Draft acceptance rate: 33.3%"
)


def _either(words: list[str]) -> str:
    """ "a, b or c", as the reader's warnings list alternatives (one word alone)."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def test_empty_text_warns() -> None:
    result = parse_text("")
    assert result.engine is None
    assert result.acceptance == () and result.kv_capacity == ()
    assert result.warnings == ("empty input",)


def test_unrecognised_text_warns() -> None:
    result = parse_text("hello\nworld\n")
    assert result.engine is None
    titles = [registry.title(e) for e in registry.ENGINES]  # every engine, however many are registered
    assert result.warnings[0].startswith(f"no {_either(titles)} output recognised; parse reads")


def test_binary_input_warns_and_reads_what_it_can(tmp_path: Path) -> None:
    path = tmp_path / "core.bin"
    path.write_bytes(bytes(range(256)) * 64 + b"\n" + V1_LINE.format(a=10).encode() + b"\n\xff\xfe\x00")
    result = parse_file(path)
    assert any("does not look like text" in w for w in result.warnings)
    assert [r.accepted_tokens for r in result.acceptance] == [10]


def test_mixed_engines_keep_the_dominant_one() -> None:
    text = "\n".join(
        [
            V1_LINE.format(a=10),
            V1_LINE.format(a=11),
            "[2025-01-01 10:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.00, "
            "accept len: 2.00, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 1.00, ",
        ]
    )
    result = parse_text(text)
    assert result.engine == "vllm"
    assert [r.accepted_tokens for r in result.acceptance] == [10, 11]
    assert any("SGLang, left out" in w for w in result.warnings)
    assert [r.mean_acceptance_length for r in parse_text(text, "sglang").acceptance] == [2.0]


def test_named_engine_without_its_output_warns() -> None:
    result = parse_text(V1_LINE.format(a=10), "llamacpp")
    assert result.engine == "llamacpp"
    assert result.acceptance == ()
    assert result.warnings == ("no llama.cpp output recognised",)


def test_exposition_of_another_engine_is_left_out() -> None:
    text = (ENGINE_CASES / "sglang" / "metrics_sglang.txt").read_text()
    result = parse_text(text, "vllm")
    assert result.acceptance == ()
    assert "holds SGLang metrics, not vLLM" in result.warnings[0]


def test_broken_exposition_falls_back_to_log_reading() -> None:
    text = "# TYPE vllm:x counter\nvllm:x_total{engine=0} 1\n"
    result = parse_text(text)
    assert "looks like a Prometheus exposition but <text>:2" in result.warnings[0]


def test_unknown_engine_choice_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="engine must be one of"):
        parse_text("", "tgi")


def test_missing_file_is_an_engine_text_error(tmp_path: Path) -> None:
    with pytest.raises(EngineTextError) as info:
        parse_file(tmp_path / "absent.log")
    assert str(info.value.problems[0]).endswith("absent.log: not found")
    with pytest.raises(EngineTextError, match="is a directory"):
        parse_file(tmp_path)


@pytest.mark.slow
def test_large_log_streams_with_overlong_lines(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    noise = "x" * 4096 + "\n"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(2000):
            fh.write(noise)
            if i % 500 == 0:
                fh.write(V1_LINE.format(a=i // 500 + 1) + "\n")
        fh.write("\r".join(["progress"] * 10) + "y" * (3 << 20) + "\n")  # one line longer than the cap
        fh.write(V1_LINE.format(a=29) + "\n")
    result = parse_file(path)
    assert [r.accepted_tokens for r in result.acceptance] == [1, 2, 3, 4, 29]
    assert result.acceptance[-1].line == 2000 + 4 + 2
    assert any("overlong line" in w for w in result.warnings)


def test_bench_result_json_points_to_the_importer() -> None:
    text = json.dumps({"completed": 3, "output_throughput": 12.5, "duration": 1.0})
    result = parse_text(text)
    assert result.engine == "vllm"
    assert "mtpverdict import vllm-bench" in result.warnings[0]


def test_json_document_without_timings() -> None:
    result = parse_text('{"content": "x", "timings": {"predicted_n": 3}}')
    assert result.engine is None
    assert result.acceptance == ()
    # every engine's JSON surface, in the registry's order, however many are registered
    held = [present(parts.response_json) for parts in registry.ENGINES.values()]
    holds = [part.holds for part in held if part is not None]
    assert len(holds) >= 3
    assert result.warnings[0] == f"a JSON document without {_either(holds)} (no drafting, or another surface)"


def test_json_document_of_a_chosen_engine_names_its_own_fields() -> None:
    document = '{"content": "x", "timings": {"predicted_n": 3}, "system_fingerprint": "b6100-abc1234"}'
    vllm = parse_text(document, "vllm")
    assert (vllm.engine, vllm.engine_version) == ("vllm", None)
    assert vllm.warnings[0].startswith("a JSON document without vLLM metrics.speculative_decoding (no")
    llama = parse_text(document, "llamacpp")
    assert llama.engine == "llamacpp" and llama.warnings[0].startswith("a JSON document without llama.cpp")


def test_bare_lines_repeated_are_not_taken_for_rank_duplicates() -> None:
    line = "draft acceptance rate = 1.00000 (   48 accepted /    48 generated)"
    result = parse_text(f"{line}\n{line}\n")
    assert len(result.acceptance) == 2
    assert result.warnings == ()


def test_versions_differing_in_one_text_warn() -> None:
    text = (
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.9.0\n"
        "INFO 01-01 01:00:00 [api_server.py:1] vLLM API server version 0.10.0\n"
    )
    result = parse_text(text)
    assert result.engine_version == "0.9.0"
    assert any("several vLLM versions" in w for w in result.warnings)


def test_result_json_shape_is_exact() -> None:
    result = parse_text(V1_LINE.format(a=10))
    payload = result.to_json()
    assert list(payload) == ["engine", "engine_version", "acceptance", "kv_capacity", "warnings"]
    assert list(payload["acceptance"][0]) == [
        "source",
        "scoped",
        "kind",
        "drafts",
        "draft_tokens",
        "accepted_tokens",
        "acceptance_rate",
        "mean_acceptance_length",
        "per_position_rate",
        "accepted_per_position",
        "line",
    ]
    kv = parse_text(
        "CPU KV cache size: 1,024 tokens, Maximum concurrency for 1,024 tokens per request: 1.00x"
    )
    assert list(kv.to_json()["kv_capacity"][0]) == [
        "kv_cache_tokens",
        "window_tokens",
        "max_concurrency",
        "num_blocks",
        "block_size",
        "slots",
        "memory_gib",
        "line",
    ]
    json.dumps(payload, allow_nan=False)


def test_a_document_quoting_a_log_line_is_no_engine_log() -> None:
    # a README that quotes one llama.cpp prefix in a table was called llama.cpp
    prose = "".join(f"Paragraph {i} of the tool's documentation.\n" for i in range(30))
    readme = f"# Tool\n\n{prose}| engine | notes |\n|---|---|\n| llama.cpp | srv  load_model: loads |\n"
    result = parse_text(readme)
    assert result.engine is None
    assert "docs/engine-formats.md" in result.warnings[0]
