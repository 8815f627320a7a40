"""Text recorded from a real vLLM 0.32.0 CPU server: /metrics pairs, streamed responses, bench results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpverdict.errors import EngineTextError
from mtpverdict.formats.results_io import load_results
from mtpverdict.importers import import_vllm_bench
from mtpverdict.parse import (
    AcceptanceReading,
    KvCapacity,
    acceptance_delta,
    observed_k,
    parse_file,
    parse_metrics,
    parse_text,
)

from .support import DATA, RECORDED

SERVER = RECORDED / "vllm-0.32.0-cpu"
KV = KvCapacity(kv_cache_tokens=524288, max_concurrency=512.0, num_blocks=4096, block_size=128)


def _scrape(name: str):  # type: ignore[no-untyped-def]
    return parse_metrics((SERVER / name).read_text(encoding="utf-8"), source=name)


def test_ngram_window_from_the_recorded_pair() -> None:
    before, after = _scrape("metrics-ngram-before.txt"), _scrape("metrics-ngram-after.txt")
    assert observed_k(before) == observed_k(after) == 2
    assert acceptance_delta(before, after) == AcceptanceReading(
        source="metrics",
        scoped="window",
        kind="counter_delta",
        drafts=256,
        draft_tokens=504,
        accepted_tokens=250,
        accepted_per_position=(150, 100),
    )
    assert after.kv_capacity == (KV,)
    assert before.warnings == after.warnings == ()


def test_unspeculated_server_shows_depth_zero_and_no_window() -> None:
    before, after = _scrape("metrics-none-before.txt"), _scrape("metrics-none-after.txt")
    assert observed_k(before) == observed_k(after) == 0
    assert acceptance_delta(before, after) is None
    assert after.generation_tokens is not None and before.generation_tokens is not None
    assert after.generation_tokens > before.generation_tokens
    assert after.kv_capacity == (KV,)


def test_metrics_files_parse_as_files() -> None:
    result = parse_file(SERVER / "metrics-ngram-after.txt")
    assert result.engine == "vllm"
    assert [r.kind for r in result.acceptance] == ["counter_total"]
    assert result.kv_capacity == (KV,)


@pytest.mark.parametrize("name", ["sse-ngram.txt", "sse-none.txt"])
def test_streamed_responses_name_the_version(name: str) -> None:
    result = parse_file(SERVER / name)
    assert result.engine == "vllm"
    assert result.engine_version == "0.32.0"
    assert result.acceptance == ()


def _control(tmp_path: Path) -> Path:
    """The control's bench file, naming the model the recorded server served: tests/data/vllm_bench's
    was written against a server that called its model `tiny-llama`, and one campaign serves one model
    (an import whose model_id differs from the campaign's is refused)."""
    data = json.loads((DATA / "vllm_bench" / "off_summary.json").read_text())
    data["model_id"] = json.loads((SERVER / "bench-serve-ngram.json").read_text())["model_id"]
    path = tmp_path / "off_summary.json"
    path.write_text(json.dumps(data))
    return path


def test_recorded_bench_results_import_and_load(tmp_path: Path) -> None:
    out = tmp_path / "results"
    with pytest.raises(EngineTextError, match="one campaign serves one model"):
        other = tmp_path / "other"
        import_vllm_bench([DATA / "vllm_bench" / "off_summary.json"], arm="off_A", out=other)
        import_vllm_bench([SERVER / "bench-serve-ngram.json"], arm="ngram2", boot=2, out=other)
    control = import_vllm_bench([_control(tmp_path)], arm="off_A", out=out)
    assert control.written
    detailed = import_vllm_bench(
        [SERVER / "bench-serve-ngram-detailed.json"], arm="ngram2", boot=1, out=out, method="ngram", k=2
    )
    assert dict(detailed.written) == {"acceptance": 1, "request": 8}
    assert detailed.warnings == ()
    plain = import_vllm_bench([SERVER / "bench-serve-ngram.json"], arm="ngram2", boot=2, out=out)
    assert dict(plain.written) == {"acceptance": 1, "summary": 3}

    loaded = load_results(out)
    requests = loaded.requests[loaded.requests["arm"] == "ngram2"]
    assert len(requests) == 8 and set(requests["status"]) == {"ok"}
    assert list(requests["completion_tokens"]) == [32] * 8
    assert list(requests["chunks"]) == [32] * 8  # 0% acceptance: one token per chunk
    assert list(zip(requests["rep"], requests["stream"], strict=True))[:3] == [(1, 0), (1, 1), (2, 0)]
    first = requests.iloc[0]
    assert first["t_start"] == pytest.approx(1521.274944876)
    assert first["t_first"] - first["t_start"] == pytest.approx(0.08406045499987158)
    assert first["t_end"] - first["t_start"] == pytest.approx(0.5893867979998504)
    assert set(requests["concurrency"]) == {2}

    windows = loaded.acceptance.set_index("boot")
    counts = ["drafts", "draft_tokens", "accepted_tokens"]
    assert tuple(windows.loc[[1], counts].iloc[0]) == (15, 30, 0)
    assert tuple(windows.loc[[2], counts].iloc[0]) == (24, 48, 0)
    assert windows.loc[2, "per_position_rate"] == (0.0, 0.0)
    assert set(windows["source"]) == {"metrics"} and set(windows["scoped"]) == {"window"}

    summaries = loaded.summaries[loaded.summaries["arm"] == "ngram2"].set_index("metric")
    assert summaries.loc["decode_tps", "median"] == pytest.approx(1000 / 19.620121774191684)
    assert summaries.loc["aggregate_tps", "median"] == pytest.approx(87.4962926094842)
    assert summaries.loc["ttft_ms", "n"] == 8

    again = import_vllm_bench([SERVER / "bench-serve-ngram.json"], arm="ngram2", boot=2, out=out)
    assert again.written == () and again.already_present == 4


def test_recorded_bench_stdout_spec_block_is_one_counter_window() -> None:
    """`vllm bench serve` prints the /metrics differences over its run; the JSON holds the same."""
    result = parse_file(SERVER / "bench-serve-ngram-stdout.txt")
    assert result.engine == "vllm"
    assert result.acceptance == (
        AcceptanceReading(
            source="metrics",
            scoped="window",
            kind="counter_delta",
            drafts=24,
            draft_tokens=48,
            accepted_tokens=0,
            acceptance_rate=0.0,
            mean_acceptance_length=1.0,
            per_position_rate=(0.0, 0.0),
            line=34,
        ),
    )
    assert result.warnings == ()
    copy = parse_file(SERVER / "bench-serve-draft-copy-greedy-stdout.txt").acceptance
    assert [(r.drafts, r.draft_tokens, r.accepted_tokens, r.per_position_rate) for r in copy] == [
        (88, 176, 176, (1.0, 1.0))
    ]


def test_bench_field_lines_outside_the_block_are_not_read() -> None:
    text = "Drafts:                                  24\nDraft tokens:                            48\n"
    assert parse_text(text).acceptance == ()
    shuffled = "---------------Speculative Decoding---------------\n  Position 1:  50.00\n"
    result = parse_text(shuffled)
    assert [r.per_position_rate for r in result.acceptance] == [None]
    assert any("position 1 follows 0 position(s)" in w for w in result.warnings)


def test_copy_of_the_target_drafts_accepts_everything() -> None:
    before, after = _scrape("metrics-draft-copy-before.txt"), _scrape("metrics-draft-copy-after.txt")
    delta = acceptance_delta(before, after)
    assert isinstance(delta, AcceptanceReading)
    assert (delta.drafts, delta.draft_tokens, delta.accepted_tokens) == (596, 1192, 1192)
    assert delta.accepted_per_position == (596, 596)
    assert after.kv_capacity == (
        KvCapacity(kv_cache_tokens=262144, max_concurrency=256.0, num_blocks=2048, block_size=128),
    )  # a draft model sharing the cache halves the pool
    fresh = _scrape("metrics-draft-random-before.txt")
    assert (fresh.drafts, fresh.draft_tokens, fresh.accepted_tokens, observed_k(fresh)) == (0, 0, 0, 2)


def test_greedy_bench_of_a_copy_drafter_is_full_acceptance(tmp_path: Path) -> None:
    out = tmp_path / "results"
    import_vllm_bench([_control(tmp_path)], arm="off_A", out=out)
    files = [SERVER / "bench-serve-draft-copy-greedy.json", SERVER / "bench-serve-draft-copy.json"]
    before = (out / "records.jsonl").read_bytes()
    with pytest.raises(EngineTextError, match="already recorded from another file"):
        import_vllm_bench(files, arm="copy2", out=out, method="draft_model", k=2)
    assert (out / "records.jsonl").read_bytes() == before  # the clash is found before any write
    greedy = import_vllm_bench(files[:1], arm="copy2", out=out, workload="greedy")
    sampled = import_vllm_bench(files[1:], arm="copy2", out=out, workload="sampled")
    assert dict(greedy.written) == dict(sampled.written) == {"acceptance": 1, "summary": 3}
    windows = load_results(out).acceptance.set_index("workload")
    counts = ["drafts", "draft_tokens", "accepted_tokens"]
    assert tuple(windows.loc[["greedy"], counts].iloc[0]) == (88, 176, 176)
    assert windows.loc["greedy", "mean_acceptance_length"] == pytest.approx(3.0)
    assert windows.loc["greedy", "per_position_rate"] == (1.0, 1.0)
    # without --temperature 0 the bench samples, and the copy drafter is almost never accepted
    assert tuple(windows.loc["sampled", ["drafts", "draft_tokens", "accepted_tokens"]]) == (247, 494, 1)


@pytest.mark.parametrize(
    ("name", "windows", "pool"),
    [
        ("server-none.log", 0, 524288),
        ("server-ngram.log", 5, 524288),
        ("server-ngram-color.log", 2, 524288),
        ("server-draft-copy.log", 6, 262144),
        ("server-draft-random.log", 4, 262144),
    ],
)
def test_recorded_server_logs(name: str, windows: int, pool: int) -> None:
    result = parse_file(SERVER / name)
    assert (result.engine, result.engine_version) == ("vllm", "0.32.0")
    assert len(result.acceptance) == windows
    assert all(r.kind == "log_window" and r.per_position_rate is not None for r in result.acceptance)
    assert [(kv.kv_cache_tokens, kv.window_tokens) for kv in result.kv_capacity] == [(pool, 1024)]
    assert result.warnings == ()
