"""The measuring client against a real vLLM 0.32 CPU server with per-request metrics on.

Checks what the engine itself reports per request: the client's decode window agrees with the server's
own generation time (median ratio within 2%), and per-request acceptance summed over a run equals the
run's /metrics counter delta. One ngram k=2 server, a few runs at concurrency 1 and 4: under a minute
after the boot, two at most when the host starves the server. Needs MTPVERDICT_VLLM_PYTHON and
MTPVERDICT_MODELS (collectors/vllm-cpu/ci.sh); skipped without them unless MTPVERDICT_REQUIRE_REAL_SERVER
is set. The server is conftest's `ngram_vllm_server`, which watch's test uses after this file.
"""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

import httpx
import pytest

from mtpverdict.collect import client as cl
from mtpverdict.collect import plain
from mtpverdict.parse import acceptance_delta, parse_metrics
from mtpverdict.stats.runs import BURST_MIN_CHUNKS

from .conftest import ROOT

pytestmark = pytest.mark.real_server
VLLM = ROOT / "collectors" / "vllm-cpu"
PROMPT = (
    "The capital of France is Paris. The capital of Japan is Tokyo. The capital of Italy is Rome. "
    "Paris is a large city on the river Seine."
)
RUNS = ((1, 3), (4, 3))  # (concurrency, runs)
MAX_RATIO_OFF = 0.02  # issue 14: the two timing surfaces agree within 2% (median ratio)
MIN_STREAMED = 5  # streams not read in a burst, to compare the two timing surfaces on
EXTRA_SECONDS = 60.0  # single streams sent for more of them when the runs had too few


@pytest.fixture(scope="module")
def server(ngram_vllm_server: str) -> str:
    return ngram_vllm_server


async def _runs(base: str) -> list[tuple[cl.RunResult, Any]]:
    """Every run with the /metrics counter delta around it."""
    out: list[tuple[cl.RunResult, Any]] = []
    clock = cl.Clock()
    async with httpx.AsyncClient(timeout=60.0) as http:
        for concurrency, runs in RUNS:
            for _ in range(runs):
                before = await plain.fetch_text(http, base + "/metrics", {})
                run = await cl.run_concurrent(
                    base,
                    concurrency=concurrency,
                    model="tiny",
                    prompt=PROMPT,
                    max_tokens=48,
                    chat=False,
                    ignore_eos=True,
                    clock=clock,
                    nonce=True,
                    headers={},
                )
                after = await plain.fetch_text(http, base + "/metrics", {})
                assert before.text is not None and after.text is not None, (before.error, after.error)
                out.append((run, acceptance_delta(parse_metrics(before.text), parse_metrics(after.text))))
    return out


@pytest.fixture(scope="module")
def runs(server: str) -> list[tuple[cl.RunResult, Any]]:
    asyncio.run(_runs(server))  # the first requests after a boot are cold: warm up, then measure
    return asyncio.run(_runs(server))


def test_every_request_carries_the_servers_timing_and_acceptance(
    runs: list[tuple[cl.RunResult, Any]],
) -> None:
    for run, _ in runs:
        for s in run.streams:
            assert s.status == "ok", s.error
            assert s.completion_tokens == 48
            assert s.timing is not None and s.timing.generation_ms and s.timing.ttft_ms is not None
            assert s.acceptance is not None and s.acceptance.k == 2 and s.acceptance.accepted_per_position
        assert run.cpu_share is not None and run.cpu_share > 0


def _ratio(s: cl.StreamResult) -> float | None:
    """Client decode window over the server's generation time, for a stream not read in a burst (the
    rule decide uses, stats/runs.py): only such a stream was timed by the client at all."""
    if s.t_end is None or s.t_first is None or s.timing is None or not s.timing.generation_ms:
        return None
    if s.chunks >= BURST_MIN_CHUNKS and s.bunched * 2 > s.chunks - 1:
        return None
    return (s.t_end - s.t_first) * 1000.0 / s.timing.generation_ms


async def _more_streamed(base: str, found: list[float]) -> list[float]:
    """Single streams until MIN_STREAMED were not read in a burst, for at most EXTRA_SECONDS."""
    clock = cl.Clock()
    deadline = clock.now() + EXTRA_SECONDS
    while len(found) < MIN_STREAMED and clock.now() < deadline:
        run = await cl.run_concurrent(
            base,
            concurrency=1,
            model="tiny",
            prompt=PROMPT,
            max_tokens=128,
            chat=False,
            ignore_eos=True,
            clock=clock,
            nonce=True,
            headers={},
        )
        found += [r for r in map(_ratio, run.streams) if r is not None]
    return found


def test_client_decode_window_agrees_with_the_servers_generation_time(
    server: str, runs: list[tuple[cl.RunResult, Any]]
) -> None:
    """On a host whose cores are busy, vLLM's API server releases a stream's deltas in bursts (issue 14;
    seen here on and off, for seconds at a time, with the previous client as well): the client then
    times the burst, not the decode, and decide drops such streams. The surfaces must agree on the rest."""
    found = [r for run, _ in runs for r in map(_ratio, run.streams) if r is not None]
    found = asyncio.run(_more_streamed(server, found))
    assert len(found) >= MIN_STREAMED, (
        f"only {len(found)} streams in {EXTRA_SECONDS:.0f} s were not read in a burst: the host starves "
        "the server, so the client's timing cannot be compared"
    )
    median = statistics.median(found)
    assert abs(median - 1.0) <= MAX_RATIO_OFF, (median, sorted(found))


def test_per_request_acceptance_sums_to_the_metrics_delta_of_its_run(
    runs: list[tuple[cl.RunResult, Any]],
) -> None:
    drafted = 0
    for run, delta in runs:
        found = [s.acceptance for s in run.streams if s.acceptance is not None]
        assert len(found) == len(run.streams)
        assert delta is not None and not hasattr(delta, "reason"), delta
        assert sum(a.steps or 0 for a in found) == delta.drafts
        assert sum(a.draft_tokens for a in found) == delta.draft_tokens
        assert sum(a.accepted_tokens for a in found) == delta.accepted_tokens
        per_position = [sum(col) for col in zip(*(a.accepted_per_position or () for a in found), strict=True)]
        assert tuple(per_position) == tuple(delta.accepted_per_position)
        drafted += delta.draft_tokens
    assert drafted > 0  # the ngram drafter drafted on this prompt: the sums compared something
