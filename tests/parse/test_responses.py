"""Per-request spec fields of saved responses and SSE captures (vLLM metrics, SGLang meta_info)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpverdict.parse import parse_file, parse_text

from .support import RECORDED

VLLM = RECORDED / "vllm-0.32.0-cpu"


def _final_chunk(name: str) -> dict[str, object]:
    """The last data: object of a recorded stream: the one carrying usage and metrics."""
    lines = [
        line[len("data: ") :] for line in (VLLM / name).read_text().splitlines() if line.startswith("data: {")
    ]
    chunk: dict[str, object] = json.loads(lines[-1])
    return chunk


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sse-perreq-draft-copy.txt", (16, 32, 32, (16, 16))),
        ("sse-perreq-ngram-chat.txt", (6, 12, 2, (1, 1))),
    ],
)
def test_vllm_sse_capture(name: str, expected: tuple[int, int, int, tuple[int, ...]]) -> None:
    result = parse_file(VLLM / name)
    assert result.engine == "vllm" and result.engine_version == "0.32.0"
    (reading,) = result.acceptance
    assert (reading.source, reading.scoped, reading.kind) == ("response", "run", "response")
    assert (
        reading.drafts,
        reading.draft_tokens,
        reading.accepted_tokens,
        reading.accepted_per_position,
    ) == expected
    spec = _final_chunk(name)["metrics"]["speculative_decoding"]  # type: ignore[index]
    assert reading.mean_acceptance_length == spec["mean_acceptance_length"]
    assert reading.acceptance_rate == spec["draft_acceptance_rate"]
    lines = (VLLM / name).read_text().splitlines()
    assert reading.line == max(i for i, line in enumerate(lines, 1) if line.startswith("data: {"))


@pytest.mark.parametrize("name", ["response-perreq-ngram-summary.json", "sse-perreq-ngram-summary.txt"])
def test_vllm_summary_level_response_and_stream(name: str) -> None:
    """A real server at --per-request-spec-decode-metrics summary: no per-step lists, the histogram only."""
    result = parse_file(VLLM / name)
    assert result.engine == "vllm" and result.engine_version == "0.32.0"
    (reading,) = result.acceptance
    assert (reading.drafts, reading.draft_tokens, reading.accepted_tokens) == (7, 14, 7)
    assert reading.accepted_per_position == (5, 2)  # histogram [2, 3, 2]: steps accepting > p tokens
    assert reading.acceptance_rate == 0.5 and reading.mean_acceptance_length == 2.0
    assert not result.warnings


def test_vllm_stream_without_per_request_metrics_has_no_reading() -> None:
    result = parse_file(VLLM / "sse-perreq-none.txt")
    assert result.acceptance == ()


def test_vllm_saved_response_document(tmp_path: Path) -> None:
    saved = tmp_path / "response.json"
    saved.write_text(json.dumps(_final_chunk("sse-perreq-draft-copy.txt"), indent=2))
    result = parse_file(saved)
    assert result.engine == "vllm" and result.engine_version == "0.32.0"
    (reading,) = result.acceptance
    assert (reading.draft_tokens, reading.accepted_tokens, reading.accepted_per_position) == (
        32,
        32,
        (16, 16),
    )
    assert reading.line is not None and reading.line > 1


def test_vllm_histogram_that_does_not_add_up_is_left_out_with_a_warning() -> None:
    chunk = _final_chunk("sse-perreq-ngram-chat.txt")
    spec = chunk["metrics"]["speculative_decoding"]  # type: ignore[index]
    spec["acceptance_histogram"] = [0, 0, 6]
    spec.pop("per_step_accepted", None)
    result = parse_text(json.dumps(chunk))
    (reading,) = result.acceptance
    assert reading.accepted_per_position is None and reading.accepted_tokens == 2
    assert any("acceptance_histogram does not add up" in w for w in result.warnings)


def test_vllm_accepted_beyond_drafted_is_refused() -> None:
    chunk = _final_chunk("sse-perreq-ngram-chat.txt")
    chunk["metrics"]["speculative_decoding"]["num_accepted_draft_tokens"] = 99  # type: ignore[index]
    result = parse_text("data: " + json.dumps(chunk), "vllm")
    (reading,) = result.acceptance
    assert reading.accepted_tokens is None and reading.draft_tokens is None
    assert any("99 tokens accepted but 12 drafted" in w for w in result.warnings)


# SGLang cannot run on this machine's CPU (no AMX, FIELD.md section 5-8): its meta_info shapes below follow
# the field names of its tokenizer manager, current (0.5.15 on) and older.
SGLANG_CURRENT = {
    "text": "x",
    "meta_info": {
        "id": "a",
        "prompt_tokens": 12,
        "completion_tokens": 40,
        "spec_verify_ct": 20,
        "spec_num_correct_drafts": 25,
        "spec_num_proposed_drafts": 60,
        "spec_correct_drafts_histogram": [5, 5, 10, 0],
        "spec_accept_rate": 25 / 60,
        "spec_accept_length": 2.0,
    },
}
SGLANG_OLDER = {
    "text": "x",
    "meta_info": {
        "completion_tokens": 40,
        "spec_verify_ct": 20,
        "spec_accept_token_num": 25,
        "spec_draft_token_num": 60,
    },
}


def test_sglang_current_names() -> None:
    result = parse_text(json.dumps(SGLANG_CURRENT))
    assert result.engine == "sglang"
    (reading,) = result.acceptance
    assert (reading.drafts, reading.draft_tokens, reading.accepted_tokens) == (20, 60, 25)
    assert reading.accepted_per_position == (15, 10, 0)
    assert reading.mean_acceptance_length == 2.0 and reading.acceptance_rate == pytest.approx(25 / 60)


def test_sglang_older_names() -> None:
    (reading,) = parse_text(json.dumps(SGLANG_OLDER), "sglang").acceptance
    assert (reading.drafts, reading.draft_tokens, reading.accepted_tokens) == (20, 60, 25)


def test_sglang_both_generations_read_the_current_names() -> None:
    both = json.loads(json.dumps(SGLANG_CURRENT))
    both["meta_info"].update(spec_accept_token_num=0, spec_draft_token_num=0)
    result = parse_text(json.dumps(both))
    (reading,) = result.acceptance
    assert (reading.draft_tokens, reading.accepted_tokens) == (60, 25)
    assert any("the current names were read" in w for w in result.warnings)


def test_sglang_stream_lines() -> None:
    lines = [
        "data: " + json.dumps({"text": "a", "meta_info": {"completion_tokens": 1}}),
        "data: " + json.dumps(SGLANG_CURRENT),
        "data: [DONE]",
    ]
    result = parse_text("\n".join(lines) + "\n")
    assert result.engine == "sglang"
    (reading,) = result.acceptance
    assert reading.line == 2 and reading.accepted_tokens == 25
