"""The measuring client against scripted local servers: real vLLM streams, framings, hostile servers."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from mtpverdict.collect import client as cl
from mtpverdict.collect import plain
from mtpverdict.engines.interface import ServerFields
from mtpverdict.engines.served import Seen, ServedFields, ServerTiming

from ..conftest import DATA

RECORDED = DATA / "recorded" / "vllm-0.32.0-cpu"
Script = Callable[[asyncio.StreamWriter, dict[str, Any]], Awaitable[None]]
MIB = 1024 * 1024


@asynccontextmanager
async def serve(script: Script) -> AsyncIterator[str]:
    """A local server that reads one request per connection and answers it with `script`."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            body = json.loads(await reader.readexactly(length)) if length else {}
            await script(writer, body)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def write_chunk(writer: asyncio.StreamWriter, payload: bytes) -> None:
    writer.write(b"%x\r\n%s\r\n" % (len(payload), payload))
    await writer.drain()


def replay(path: Path, framing: str = "chunked") -> Script:
    """Serve a recorded SSE body as uvicorn does (a chunk per event), or close-delimited, or with a length."""
    events = [e + b"\n\n" for e in path.read_bytes().split(b"\n\n") if e.strip()]
    metrics = final_metrics(path).get("metrics") or {}
    # the server's own intervals cannot exceed what the client waits: take as long as the recording did
    took = sum(
        metrics.get(k) or 0.0 for k in ("queue_time_ms", "time_to_first_token_ms", "generation_time_ms")
    )

    async def script(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        if framing == "chunked":
            writer.write(CHUNKED_HEAD)
            for i, event in enumerate(events):
                if i == len(events) - 2:
                    await asyncio.sleep(took / 1000)
                await write_chunk(writer, event)
            writer.write(b"0\r\n\r\n")
        else:
            await asyncio.sleep(took / 1000)
            data = b"".join(events)
            length = f"content-length: {len(data)}\r\n".encode() if framing == "length" else b""
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + length + b"\r\n" + data)
        await writer.drain()

    return script


async def one(
    base: str,
    *,
    max_tokens: int = 48,
    nonce: str | None = "3f9a0c1b2d4e",
    chat: bool = False,
    limits: cl.StreamLimits | None = None,
) -> cl.StreamResult:
    return await cl.stream_one(
        base,
        model="tiny",
        prompt="The capital of France is Paris.",
        max_tokens=max_tokens,
        chat=chat,
        ignore_eos=True,
        clock=cl.Clock(),
        stream_index=0,
        nonce=nonce,
        headers={},
        limits=limits,
    )


def final_metrics(path: Path) -> dict[str, Any]:
    last = [e for e in path.read_text().split("\n\n") if '"usage"' in e][-1]
    found = json.loads(last.removeprefix("data: "))
    assert isinstance(found, dict)
    return found


# --- real vLLM 0.32 streams ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "chat"),
    [
        ("draft-copy", False),
        ("draft-copy-chat", True),
        ("ngram", False),
        ("ngram-chat", True),
        ("none", False),
    ],
)
def test_recorded_vllm_streams_give_usage_server_timing_and_acceptance(name: str, chat: bool) -> None:
    path = RECORDED / f"sse-perreq-{name}.txt"
    expected = final_metrics(path)

    async def run() -> cl.StreamResult:
        async with serve(replay(path)) as base:
            return await one(base, chat=chat)

    r = asyncio.run(run())
    assert r.status == "ok", r.error
    assert r.completion_tokens == expected["usage"]["completion_tokens"]
    assert r.prompt_tokens == expected["usage"]["prompt_tokens"]
    assert r.t_first is not None and r.t_end is not None and r.t_start <= r.t_first <= r.t_end
    metrics = expected["metrics"]
    assert r.timing is not None
    assert r.timing.ttft_ms == metrics["time_to_first_token_ms"]
    assert r.timing.generation_ms == metrics["generation_time_ms"]
    assert r.timing.queue_ms == metrics["queue_time_ms"]
    assert r.timing.mean_itl_ms == metrics["mean_itl_ms"]
    spec = metrics.get("speculative_decoding")
    if spec is None:
        assert r.acceptance is None
        return
    assert r.acceptance is not None
    assert (r.acceptance.draft_tokens, r.acceptance.accepted_tokens, r.acceptance.steps, r.acceptance.k) == (
        spec["num_draft_tokens"],
        spec["num_accepted_draft_tokens"],
        spec["num_spec_steps"],
        spec["num_spec_tokens"],
    )
    per_step = spec["per_step_accepted"]
    assert r.acceptance.accepted_per_position == tuple(
        sum(1 for a in per_step if a > p) for p in range(spec["num_spec_tokens"])
    )


def test_recorded_per_request_acceptance_adds_up_to_the_metrics_counter_delta() -> None:
    """The two ngram requests were the only traffic between the recorded /metrics snapshots."""
    from mtpverdict.parse import acceptance_delta, parse_metrics

    before = parse_metrics((RECORDED / "perreq-metrics-ngram-before.txt").read_text())
    after = parse_metrics((RECORDED / "perreq-metrics-ngram-after.txt").read_text())
    delta: Any = acceptance_delta(before, after)
    found = []
    for name, chat in (("ngram", False), ("ngram-chat", True)):

        async def run(path: Path = RECORDED / f"sse-perreq-{name}.txt", chat: bool = chat) -> cl.StreamResult:
            async with serve(replay(path)) as base:
                return await one(base, chat=chat)

        r = asyncio.run(run())
        assert r.acceptance is not None and r.acceptance.accepted_per_position is not None
        found.append(r.acceptance)
    assert sum(a.steps or 0 for a in found) == delta.drafts
    assert sum(a.draft_tokens for a in found) == delta.draft_tokens
    assert sum(a.accepted_tokens for a in found) == delta.accepted_tokens
    per_pos = [sum(col) for col in zip(*(a.accepted_per_position or () for a in found), strict=True)]
    assert tuple(per_pos) == tuple(delta.accepted_per_position)


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
def test_every_framing_gives_the_same_result_and_the_text_of_an_unnonced_stream(framing: str) -> None:
    path = RECORDED / "sse-perreq-draft-copy.txt"
    text = "".join(
        json.loads(e.removeprefix("data: "))["choices"][0]["text"]
        for e in path.read_text().split("\n\n")
        if e.startswith("data: {") and '"choices":[{' in e
    )

    async def run() -> tuple[cl.StreamResult, cl.StreamResult]:
        async with serve(replay(path, framing)) as base:
            return await one(base, nonce=None), await one(base)

    plain, nonced = asyncio.run(run())
    assert plain.status == nonced.status == "ok", (plain.error, nonced.error)
    assert plain.text == text and plain.output_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert nonced.text is None and nonced.output_sha256 is None  # a nonced output is never compared
    deltas = sum(1 for e in path.read_text().split("\n\n") if '"text":"' in e and '"text":""' not in e)
    assert plain.chunks == nonced.chunks == deltas


# --- the server says no ------------------------------------------------------------------------------


def script_of(*parts: bytes, chunked: bool = True, then: float = 0.0) -> Script:
    async def script(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        writer.write(CHUNKED_HEAD if chunked else parts[0])
        for part in parts if chunked else parts[1:]:
            await write_chunk(writer, part) if chunked else writer.write(part)
        writer.write(b"0\r\n\r\n" if chunked else b"")
        await writer.drain()
        await asyncio.sleep(then)

    return script


def run_one(script: Script, **kw: Any) -> cl.StreamResult:
    async def run() -> cl.StreamResult:
        async with serve(script) as base:
            return await one(base, **kw)

    return asyncio.run(run())


CONTENT = b'data: {"choices":[{"index":0,"text":" tok"}]}\n\n'


def usage(completion: object, prompt: object = 12) -> bytes:
    return b'data: {"choices":[],"usage":{"prompt_tokens":%s,"completion_tokens":%s}}\n\n' % (
        json.dumps(prompt).encode(),
        json.dumps(completion).encode() if not isinstance(completion, bytes) else completion,
    )


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (
            script_of(b"HTTP/1.1 503 Busy\r\ncontent-length: 9\r\n\r\n", b"overload!", chunked=False),
            "HTTP 503: overload!",
        ),
        (
            script_of(CONTENT, b'data: {"error": {"message": "engine died"}}\n\n'),
            "server error in stream: {'message': 'engine died'}",
        ),
        (script_of(CONTENT, b"data: {not json\n\n"), "malformed SSE data"),
        (script_of(CONTENT, b"data: [DONE]\n\n"), "no usage block"),
        (script_of(b"data: [DONE]\n\n"), "no content"),
        (
            script_of(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:", chunked=False),
            "closed the connection before the end",
        ),
        (script_of(b"garbage\r\n\r\n", chunked=False), "not an HTTP/1.1 status line"),
        (
            script_of(CONTENT, b'data: {"choices":[{"text":"x"}], "usage": {"completion_tokens": 1}}\n\n'),
            "content deltas arrived",
        ),
    ],
)
def test_a_failing_server_makes_an_error_with_its_reason(script: Script, reason: str) -> None:
    r = run_one(script)
    assert r.status == "error" and r.error is not None and reason in r.error, r.error
    assert r.completion_tokens is None and r.t_first is None and r.output_sha256 is None


def test_a_refused_connection_is_an_error_not_an_exception() -> None:
    r = asyncio.run(one("http://127.0.0.1:9"))
    assert r.status == "error" and r.error is not None and r.error.startswith("connect:")


# --- server-chosen values (issue 15 item 3) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("final", "max_tokens", "reason"),
    [
        (usage(16, prompt=-7), 16, "usage.prompt_tokens is -7, outside"),
        (usage(16, prompt=True), 16, "usage.prompt_tokens is True, not an integer"),
        (usage(True), 16, "usage.completion_tokens is True, not an integer"),
        (usage(b"1" * 400), 16, "usage.completion_tokens is a 400-digit integer, outside 1..16"),
        (usage(10**15), 16, "usage.completion_tokens is 1000000000000000, outside 1..16"),
        (usage(0), 16, "outside 1..16"),
        (usage(16.0), 16, "not an integer"),
        (usage(16, prompt=10**9), 16, "usage.prompt_tokens is 1000000000, outside"),
    ],
)
def test_server_chosen_values_out_of_range_or_type_make_an_error(
    final: bytes, max_tokens: int, reason: str
) -> None:
    r = run_one(
        script_of(*[CONTENT] * min(max_tokens, 16), final, b"data: [DONE]\n\n"), max_tokens=max_tokens
    )
    assert r.status == "error" and r.error is not None and reason in r.error, r.error
    assert r.completion_tokens is None and r.prompt_tokens is None


METRICS = {  # small enough to fit in the few ms a local answer takes (the bound allows 10 ms of slack)
    "time_to_first_token_ms": 1.0,
    "generation_time_ms": 2.0,
    "queue_time_ms": 0.1,
    "mean_itl_ms": 2.0,
    "tokens_per_second": 500.0,
}


def with_metrics(metrics: object) -> bytes:
    return b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2},"metrics":%s}\n\n' % (
        json.dumps(metrics).encode()
    )


@pytest.mark.parametrize(
    ("metrics", "reason"),
    [
        ({**METRICS, "time_to_first_token_ms": -1}, "time_to_first_token_ms is -1, outside"),
        ({**METRICS, "generation_time_ms": "20"}, "generation_time_ms is '20', not a finite number"),
        ({**METRICS, "queue_time_ms": 1e12}, "queue_time_ms is 1000000000000.0, outside"),
        ({**METRICS, "tokens_per_second": True}, "tokens_per_second"),
        ([1, 2], "metrics is [1, 2], not an object"),
        (
            {
                **METRICS,
                "speculative_decoding": {
                    "num_spec_tokens": 2,
                    "num_spec_steps": 3,
                    "num_draft_tokens": 4,
                    "num_accepted_draft_tokens": 1,
                },
            },
            "num_spec_steps is 3, outside 0..2",
        ),
        (
            {
                **METRICS,
                "speculative_decoding": {
                    "num_spec_tokens": 2,
                    "num_spec_steps": 2,
                    "num_draft_tokens": 4,
                    "num_accepted_draft_tokens": 5,
                },
            },
            "num_accepted_draft_tokens is 5, outside 0..4",
        ),
        (
            {
                **METRICS,
                "speculative_decoding": {
                    "num_spec_tokens": 2,
                    "num_spec_steps": 2,
                    "num_draft_tokens": 4,
                    "num_accepted_draft_tokens": 1,
                    "acceptance_histogram": [0, 2, 0],
                },
            },
            "does not add up",
        ),
        (
            {
                **METRICS,
                "speculative_decoding": {
                    "num_spec_tokens": 2,
                    "num_spec_steps": 2,
                    "num_draft_tokens": 4,
                    "num_accepted_draft_tokens": 1,
                    "per_step_accepted": [1, 0],
                    "per_step_drafted": [2],
                },
            },
            "per_step_drafted is not a list of 2",
        ),
    ],
)
def test_per_request_metrics_are_validated(metrics: object, reason: str) -> None:
    r = run_one(script_of(CONTENT, CONTENT, with_metrics(metrics), b"data: [DONE]\n\n"), max_tokens=2)
    assert r.status == "error" and r.error is not None and reason in r.error, r.error


def test_a_server_interval_longer_than_the_client_waited_is_refused() -> None:
    r = run_one(
        script_of(CONTENT, CONTENT, with_metrics({**METRICS, "generation_time_ms": 60_000.0})), max_tokens=2
    )
    assert r.status == "error" and r.error is not None and "generation_time_ms is 60000.0, outside" in r.error


def test_llamacpp_timings_give_per_request_acceptance() -> None:
    final = (
        b'data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"usage":{"completion_tokens":2,'
        b'"prompt_tokens":12},"timings":{"prompt_n":12,"prompt_ms":2.0,"predicted_n":2,"predicted_ms":4.0,'
        b'"draft_n":4,"draft_n_accepted":3}}\n\n'
    )
    chat = b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}]}\n\n'
    r = run_one(script_of(chat, chat, final, b"data: [DONE]\n\n"), max_tokens=2, chat=True)
    assert r.status == "ok", r.error
    assert r.acceptance is not None and (
        r.acceptance.source,
        r.acceptance.draft_tokens,
        r.acceptance.accepted_tokens,
    ) == ("llamacpp", 4, 3)
    assert r.phases is not None and r.phases.predicted_ms == 4.0 and r.timing is None


def _toy_reader(obj: dict[str, Any], seen: Seen, completion_tokens: int) -> ServedFields:
    return ServedFields(ServerTiming(float(obj["ttft"]), None, None, None, None))


TOY_FIELDS = (ServerFields("toy_stats", _toy_reader),)  # an engine whose object is none of the others'


@pytest.mark.parametrize(
    "events",
    [
        # the object on an event of its own, after the usage block
        (CONTENT, CONTENT, usage(2), b'data: {"choices":[],"toy_stats":{"ttft":1.5}}\n\n'),
        # on the last content event, with the usage block
        (
            CONTENT,
            b'data: {"choices":[{"index":0,"text":" tok"}],"toy_stats":{"ttft":1.5},'
            b'"usage":{"prompt_tokens":12,"completion_tokens":2}}\n\n',
        ),
    ],
)
def test_the_client_keeps_the_object_the_engines_part_names(events: tuple[bytes, ...]) -> None:
    r = run_one(
        script_of(*events, b"data: [DONE]\n\n"),
        max_tokens=2,
        limits=cl.StreamLimits(server_fields=TOY_FIELDS),
    )
    assert r.status == "ok", r.error
    assert r.timing is not None and r.timing.ttft_ms == 1.5
    # without the part, the object is not read
    r = run_one(
        script_of(*events, b"data: [DONE]\n\n"), max_tokens=2, limits=cl.StreamLimits(server_fields=())
    )
    assert r.status == "ok" and r.timing is None


# --- hostile servers: bounded time and memory (issue 15 item 2) --------------------------------------


def bounded(
    script: Script, limits: cl.StreamLimits, max_tokens: int = 16
) -> tuple[cl.StreamResult, float, int]:
    """(result, seconds, peak bytes allocated by Python during the request)."""
    tracemalloc.start()
    start = time.monotonic()
    try:
        r = run_one(script, max_tokens=max_tokens, limits=limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return r, time.monotonic() - start, peak


async def endless_content(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(CHUNKED_HEAD)
    while True:
        await write_chunk(writer, CONTENT * 64)


async def keepalive_forever(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(CHUNKED_HEAD)
    await write_chunk(writer, CONTENT)
    while True:
        await write_chunk(writer, b": keep-alive\n\n")
        await asyncio.sleep(0.05)


async def endless_line(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(CHUNKED_HEAD)
    await write_chunk(writer, CONTENT + b'data: {"choices":[{"text":"')
    while True:
        await write_chunk(writer, b"a" * 65536)


async def slow_progress(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(CHUNKED_HEAD)
    while True:
        await write_chunk(writer, CONTENT)
        await asyncio.sleep(0.1)


async def never_answers(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    for _ in range(10_000):
        writer.write(b"H")  # a head that never ends, one byte at a time
        await writer.drain()
        await asyncio.sleep(0.01)


async def endless_comments(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(CHUNKED_HEAD)
    await write_chunk(writer, CONTENT)
    while True:
        await write_chunk(writer, b": " + b"x" * 60000 + b"\n\n")


# Each case's reason must be the first bound it meets on any machine, however loaded: the stall cases
# have a total bound (0.5 s + 16 tokens at 2 tok/s = 8.5 s) a late event loop cannot reach before the
# 0.5 s stall (at 1000 tok/s it was 0.516 s, which a busy scheduler's late wake-up beat), and the slow
# stream's 1 s stall leaves its content every 0.1 s ten times the room it needs.
STALL = cl.StreamLimits(stall_seconds=0.5, slowest_tokens_per_second=2.0)
SLOW = cl.StreamLimits(stall_seconds=1.0, slowest_tokens_per_second=1000.0)


@pytest.mark.parametrize(
    ("script", "limits", "max_tokens", "reason"),
    [
        (endless_content, STALL, 16, "more than max_tokens (16) content deltas"),
        (keepalive_forever, STALL, 16, "stalled: no content for 0.5 s"),
        (endless_line, STALL, 16, "an SSE event longer than"),
        (slow_progress, SLOW, 500, "took longer than 1.5 s, the bound for max_tokens 500"),
        (never_answers, STALL, 16, "stalled: no content for 0.5 s"),
        (endless_comments, STALL, 16, "the response passed"),
    ],
)
def test_a_hostile_stream_ends_as_an_error_in_bounded_time_and_memory(
    script: Script, limits: cl.StreamLimits, max_tokens: int, reason: str
) -> None:
    r, seconds, peak = bounded(script, limits, max_tokens)
    assert r.status == "error" and r.error is not None and reason in r.error, r.error
    assert seconds < limits.total_seconds(max_tokens) - limits.connect_seconds + 2.0
    assert peak < 8 * MIB, peak


async def huge_metrics(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    block = b'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 1.0\n' * 1000
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n" % (200 * MIB))
    for _ in range(200 * MIB // len(block)):
        writer.write(block)
        await writer.drain()


async def endless_metrics(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    block = b"# HELP x y\n" * 5000
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n")
    while True:
        writer.write(block)
        await writer.drain()


async def slow_metrics(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n")
    while True:
        writer.write(b"#\n")
        await writer.drain()
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        (huge_metrics, "passed 4194304 bytes (the bound)"),
        (endless_metrics, "passed 4194304 bytes (the bound)"),
        (slow_metrics, "took longer than 1 s (the bound)"),
    ],
)
def test_a_hostile_metrics_endpoint_is_refused_in_bounded_time_and_memory(
    script: Script, reason: str
) -> None:
    async def run() -> plain.Fetched:
        async with serve(script) as base, httpx.AsyncClient() as client:
            return await plain.fetch_text(client, base + "/metrics", {}, max_bytes=4 * MIB, seconds=1.0)

    tracemalloc.start()
    start = time.monotonic()
    try:
        fetched = asyncio.run(run())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fetched.text is None and fetched.breached and fetched.error is not None and reason in fetched.error
    assert time.monotonic() - start < 5.0
    assert peak < 16 * MIB, peak


def test_a_run_reports_the_collectors_cpu_share() -> None:
    async def run() -> cl.RunResult:
        async with serve(replay(RECORDED / "sse-perreq-none.txt")) as base:
            return await cl.run_concurrent(
                base,
                concurrency=3,
                model="tiny",
                prompt="p",
                max_tokens=48,
                chat=False,
                ignore_eos=True,
                clock=cl.Clock(),
                nonce=True,
                headers={},
            )

    found = asyncio.run(run())
    assert [s.status for s in found.streams] == ["ok"] * 3 and [s.stream for s in found.streams] == [0, 1, 2]
    assert found.cpu_seconds > 0 and found.wall_seconds > 0
    assert found.cpu_share is not None and 0 < found.cpu_share <= 2.0  # this machine's cores, at most
