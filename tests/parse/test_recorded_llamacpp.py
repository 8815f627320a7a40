"""Text recorded from a real llama-server (llama.cpp 0.5.0-dev, commit 0c1e570) on CPU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mtpverdict.parse import (
    AcceptanceReading,
    KvCapacity,
    MetricsSnapshot,
    VoidWindow,
    acceptance_delta,
    observed_k,
    parse_file,
    parse_metrics,
)

from .support import RECORDED

SERVER = RECORDED / "llamacpp-0.5.0-dev-0c1e570-cpu"
VERSION = "1 (0c1e570)"
# -c 4096 --parallel 4: four streams of 1024 cells (one per slot), 8 MiB of f16 K and V in all.
POOL = KvCapacity(kv_cache_tokens=4096, window_tokens=1024, slots=4, memory_gib=8.0 / 1024)


def _scrape(name: str) -> MetricsSnapshot:
    return parse_metrics((SERVER / name).read_text(encoding="utf-8"), source=name)


@pytest.mark.parametrize(
    ("arm", "counts", "per_position"),
    [
        ("draft-copy-k2", (96, 190, 188), (95, 93)),
        ("draft-copy-k4", (59, 226, 226), (59, 57, 55, 55)),
        ("draft-random-k2", (279, 554, 0), (0, 0)),
        ("ngram-mod-k2", (35, 69, 48), (26, 22)),
    ],
)
def test_first_window_after_boot_counts_positions_that_appear_with_the_first_draft(
    arm: str, counts: tuple[int, int, int], per_position: tuple[int, ...]
) -> None:
    """llama.cpp exports the per-position series only once a draft was verified; before, all are 0."""
    before, after = _scrape(f"metrics-{arm}-before.txt"), _scrape(f"metrics-{arm}-after.txt")
    assert before.accepted_per_position == () and (before.drafts, before.draft_tokens) == (0, 0)
    assert observed_k(before) is None and observed_k(after) == len(per_position)
    assert acceptance_delta(before, after) == AcceptanceReading(
        source="metrics",
        scoped="window",
        kind="counter_delta",
        drafts=counts[0],
        draft_tokens=counts[1],
        accepted_tokens=counts[2],
        accepted_per_position=per_position,
    )


def test_positions_that_change_after_drafting_still_void_the_window() -> None:
    before = _scrape("metrics-draft-copy-k2-after.txt")
    after = _scrape("metrics-draft-copy-k4-after.txt")  # as if the server came back with depth 4
    assert isinstance(acceptance_delta(before, after), VoidWindow)


def test_speculation_off_keeps_zero_counters_and_shows_no_depth() -> None:
    before, after = _scrape("metrics-none-before.txt"), _scrape("metrics-none-after.txt")
    assert (after.drafts, after.draft_tokens, after.accepted_tokens) == (0, 0, 0)
    assert observed_k(after) is None  # zero counters: off, or on and not drafted yet; /slots tells
    delta = acceptance_delta(before, after)
    assert isinstance(delta, AcceptanceReading) and delta.draft_tokens == 0
    assert after.generation_tokens == 337 and after.kv_capacity == ()


@pytest.mark.parametrize(
    ("arm", "requests"),
    [
        (
            "draft-copy-k2",
            [(31, 31, 2.94), (31, 31, 2.94), (20, 20, 3.0), (24, 22, 2.83), (42, 42, 3.0), (42, 42, 3.0)],
        ),
        (
            "draft-random-k2",
            [(91, 0, 1.0), (91, 0, 1.0), (58, 0, 1.0), (68, 0, 1.0), (123, 0, 1.0), (123, 0, 1.0)],
        ),
    ],
)
def test_server_log_one_reading_per_request_and_the_pool(
    arm: str, requests: list[tuple[int, int, float]]
) -> None:
    result = parse_file(SERVER / f"server-{arm}.log")
    assert (result.engine, result.engine_version) == ("llamacpp", VERSION)
    per_request = [r for r in result.acceptance if r.kind == "log_window"]
    assert all(r.scoped == "run" and r.per_position_rate is not None for r in per_request)
    got = [(r.draft_tokens, r.accepted_tokens, r.mean_acceptance_length) for r in per_request]
    assert sorted(got) == sorted(requests)  # four requests ran at once and ended in any order
    totals = [r for r in result.acceptance if r.kind == "counter_total"]
    assert len(totals) == len(requests) and all(r.scoped == "window" for r in totals)
    assert result.kv_capacity == (replace(POOL, line=137),)  # the draft's own KV line (265) is set aside
    assert result.warnings == ()


def test_server_log_without_speculation() -> None:
    result = parse_file(SERVER / "server-none.log")
    assert (result.engine, result.engine_version) == ("llamacpp", VERSION)
    assert result.acceptance == ()
    assert result.kv_capacity == (replace(POOL, line=134),)
    assert result.warnings == ()


def test_default_verbosity_prints_acceptance_and_slots_but_no_pool_or_version() -> None:
    result = parse_file(SERVER / "server-draft-copy-k2-verbosity3.log")
    assert result.engine_version is None
    assert [(r.draft_tokens, r.accepted_tokens) for r in result.acceptance] == [
        (31, 31),
        (31, 31),
        (20, 20),
        (24, 22),
        (42, 42),
        (42, 42),
    ]
    assert all(r.per_position_rate is None for r in result.acceptance)  # a trace-level line
    assert result.kv_capacity == (KvCapacity(window_tokens=1024, slots=4, line=9),)


@pytest.mark.parametrize(
    ("arm", "plain_counts", "streamed_counts"),
    [
        ("draft-copy-k2", (31, 31), (31, 31)),
        ("draft-random-k2", (91, 0), (91, 0)),
        # ngram-mod keeps its n-gram pool across requests: the same prompt drafts more the second time
        ("ngram-mod-k2", (10, 2), (22, 21)),
    ],
)
def test_streamed_and_plain_responses_carry_the_request_timings(
    arm: str, plain_counts: tuple[int, int], streamed_counts: tuple[int, int]
) -> None:
    plain, streamed = parse_file(SERVER / f"completion-{arm}.json"), parse_file(SERVER / f"sse-{arm}.txt")
    assert streamed.engine == plain.engine == "llamacpp"
    assert streamed.engine_version == plain.engine_version == VERSION  # system_fingerprint "b1-0c1e570"
    for result, counts in ((plain, plain_counts), (streamed, streamed_counts)):
        assert [(r.kind, r.scoped, r.draft_tokens, r.accepted_tokens) for r in result.acceptance] == [
            ("response", "run", *counts)
        ]
        assert result.warnings == ()


def test_responses_without_drafting_have_no_draft_counts() -> None:
    for name in ("sse-none.txt", "completion-none.json", "completion-native-none.json"):
        result = parse_file(SERVER / name)
        assert result.acceptance == ()
