"""What collect reads of llama-server, on text a real one served (tests/data/recorded/llamacpp-0.5.0-*).

Per-request log lines matched to the request groups that printed them, readiness from /props and
/slots, and the server's per-request timing from a recorded stream and a recorded plain answer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from mtpverdict.collect import client as cl
from mtpverdict.collect import plain
from mtpverdict.collect import served as sv
from mtpverdict.collect.logruns import (
    Sent,
    match_lines,
    run_record,
    sent_from_json,
    sent_to_json,
    window_record,
)
from mtpverdict.collect.measure import _served_fields
from mtpverdict.engines.llamacpp import (
    NO_METRICS,
    NO_PROPS,
    NO_SLOTS,
    judge_ready,
    llama_timings,
    per_request_line,
)
from mtpverdict.parse import AcceptanceReading, acceptance_delta, parse_file, parse_metrics

from ..conftest import DATA
from .test_client_stream import CHUNKED_HEAD, one, serve, write_chunk

RECORDED = DATA / "recorded" / "llamacpp-0.5.0-dev-0c1e570-cpu"
# The probe's requests on the draft-copy-k2 server (RECORDED/README.md), in order: a plain and a streamed
# completion (31 of 31 drafted tokens accepted each: completion-draft-copy-k2.json, sse-draft-copy-k2.txt),
# then four streamed at once; the four printed 20/20, 22/24, 42/42 and 42/42 (accepted/drafted), in an
# order the client cannot know, given here in another.
PLAIN = Sent(None, ((31, 31),), "plain completion")
STREAMED = Sent(("probe", 1, 1), ((31, 31),), "streamed completion")
TOGETHER = Sent(("probe", 4, 1), ((42, 42), (24, 22), (42, 42), (20, 20)), "four at once")


def _lines(name: str) -> list[AcceptanceReading]:
    return [r for r in parse_file(RECORDED / name, "llamacpp").acceptance if per_request_line(r)]


def test_recorded_lines_are_placed_in_their_groups_and_add_up_to_the_metrics_delta() -> None:
    lines = _lines("server-draft-copy-k2.log")
    matched = match_lines(lines, [PLAIN, STREAMED, TOGETHER])
    assert matched.reason is None and not matched.unmatched and matched.set_aside == 1
    assert [(r.run, [x.line for x in r.lines]) for r in matched.runs] == [
        (("probe", 1, 1), [367]),
        (("probe", 4, 1), [470, 478, 486, 494]),
    ]
    delta = acceptance_delta(
        parse_metrics((RECORDED / "metrics-draft-copy-k2-before.txt").read_text()),
        parse_metrics((RECORDED / "metrics-draft-copy-k2-after.txt").read_text()),
    )
    assert isinstance(delta, AcceptanceReading)
    records = [run_record("a", 1, "raw/logs/a.log", found) for found in matched.runs]
    set_aside = (31, 31)
    assert sum(r["draft_tokens"] for r in records) + set_aside[0] == delta.draft_tokens == 190
    assert sum(r["accepted_tokens"] for r in records) + set_aside[1] == delta.accepted_tokens == 188
    single, four = records
    assert single["scoped"] == "run" and single["per_position_rate"] == [1.0, 0.938]
    assert single["mean_acceptance_length"] == 2.94 and "note" not in single
    assert (four["concurrency"], four["draft_tokens"], four["accepted_tokens"]) == (4, 128, 126)
    assert four["per_position_rate"] is None and four["mean_acceptance_length"] is None
    assert four["note"] == "log lines 470, 478, 486, 494 (4 requests)" and four["line"] == 470


def test_the_cumulative_statistics_lines_are_not_per_request_lines() -> None:
    parsed = parse_file(RECORDED / "server-draft-copy-k2.log", "llamacpp").acceptance
    totals = [r for r in parsed if r.kind == "counter_total"]
    assert len(totals) == 6 and not any(per_request_line(r) for r in totals)
    assert totals[-1].draft_tokens == 190  # the drafter's total since boot, not one request's


def test_the_default_verbosity_still_prints_the_per_request_lines() -> None:
    lines = _lines("server-draft-copy-k2-verbosity3.log")
    matched = match_lines(lines, [PLAIN, STREAMED, TOGETHER])
    assert matched.reason is None and len(matched.runs) == 2
    assert all(r.per_position_rate is None for r in lines)  # the `acc per pos` trace line needs -lv 4


@pytest.mark.parametrize(
    ("groups", "placed", "reason"),
    [
        (  # a request of the run failed: whether its line exists is unknown
            [PLAIN, STREAMED, Sent(("probe", 4, 1), None, "four at once")],
            1,
            "four at once: a request has no readable response",
        ),
        (  # the responses say otherwise than the lines
            [PLAIN, STREAMED, Sent(("probe", 4, 1), ((42, 42), (24, 24), (42, 42), (20, 20)), "four")],
            1,
            "four: the responses counted 42/42, 24/24, 42/42, 20/20 accepted/drafted, the lines 20/20, 22/24",
        ),
        (  # more lines than requests that drafted
            [PLAIN, STREAMED],
            1,
            "4 lines more than the requests that drafted",
        ),
        (  # fewer: a log cut short (a killed server) leaves its last group unplaced
            [PLAIN, STREAMED, TOGETHER, Sent(("probe", 1, 2), ((5, 5),), "one more")],
            2,
            None,
        ),
    ],
)
def test_matching_stops_at_the_first_group_it_cannot_place(
    groups: list[Sent], placed: int, reason: str | None
) -> None:
    lines = _lines("server-draft-copy-k2.log")
    matched = match_lines(lines, groups)
    assert len(matched.runs) == placed
    if reason is None:
        assert matched.reason is None and not matched.unmatched
        return
    assert matched.reason is not None and matched.reason.startswith(reason), matched.reason
    assert [r.line for r in matched.unmatched] == [470, 478, 486, 494]
    window = window_record("a", 1, "raw/logs/a.log", matched.unmatched[0])
    assert (window["scoped"], window["rep"], window["draft_tokens"]) == ("window", None, 20)


def test_a_group_with_a_failed_request_is_unknown_and_one_that_drafted_nothing_is_empty() -> None:
    assert Sent.of(("w", 4, 1), [(True, (3, 2)), (False, None)], "run").drafted is None
    assert Sent.of(("w", 4, 1), [(True, None), (True, (3, 2))], "run").drafted == ((3, 2),)
    nothing = match_lines([], [Sent.of(("w", 1, 1), [(True, None)], "run")])
    assert nothing.runs == () and nothing.reason is None


def _text(name: str) -> str:
    return (RECORDED / name).read_text()


def test_ready_when_the_slots_speculate_as_the_arm_asks() -> None:
    ready = judge_ready(
        _text("props-draft-copy-k2.json"),
        _text("slots-draft-copy-k2-before.json"),
        speculates=True,
        concurrency=4,
    )
    assert ready.refusal is None and ready.missing == ()
    assert (ready.speculating, ready.window_tokens, ready.version) == (True, 1024, "1 (0c1e570)")
    control = judge_ready(
        _text("props-none.json"), _text("slots-none-before.json"), speculates=False, concurrency=4
    )
    assert control.refusal is None and control.speculating is False


def test_a_server_that_does_not_serve_the_arm_is_refused() -> None:
    props = _text("props-none.json")
    off = judge_ready(props, _text("slots-none-before.json"), speculates=True, concurrency=1)
    assert off.refusal is not None and '"speculative": false' in off.refusal
    on = judge_ready(props, _text("slots-draft-copy-k2-before.json"), speculates=False, concurrency=1)
    assert on.refusal is not None and "control" in on.refusal
    few = judge_ready(props, _text("slots-none-before.json"), speculates=False, concurrency=8)
    assert few.refusal is not None and "4 slots but the campaign runs concurrency 8" in few.refusal
    assert "--parallel 8" in few.refusal


def test_endpoints_turned_off_are_missing_evidence_not_a_refusal() -> None:
    """--no-slots answers 501 with an error body; a caller that got no 200 passes None."""
    for slots in (_text("slots-disabled.json"), None):
        ready = judge_ready(_text("props-none.json"), slots, speculates=True, concurrency=4)
        assert ready.refusal is None and ready.missing == (NO_SLOTS,) and ready.speculating is None
    blind = judge_ready(None, None, speculates=True, concurrency=64)
    assert blind.refusal is None and blind.missing == (NO_PROPS, NO_SLOTS) and blind.window_tokens is None


def test_a_server_without_metrics_says_so_once_from_its_props() -> None:
    """llama-server serves /metrics only with --metrics; /props says so in `endpoint_metrics`."""
    props = _text("props-draft-copy-k2.json").replace('"endpoint_metrics":true', '"endpoint_metrics":false')
    ready = judge_ready(props, _text("slots-draft-copy-k2-before.json"), speculates=True, concurrency=4)
    assert ready.refusal is None and ready.missing == (NO_METRICS,)
    assert "--metrics" in NO_METRICS[1] and "depth in force" in NO_METRICS[1]


def test_llamacpp_timings_are_the_servers_ttft_and_decode_time_in_a_recorded_stream() -> None:
    """prompt_ms (slot start to first token) and predicted_ms (first to last token) of a real stream."""
    events = [
        e + b"\n\n" for e in (RECORDED / "sse-draft-copy-k2.txt").read_bytes().split(b"\n\n") if e.strip()
    ]

    async def script(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        writer.write(CHUNKED_HEAD)
        for event in events[:-2]:
            await write_chunk(writer, event)
        await asyncio.sleep(0.05)  # as long as the server said it took (1.1 + 31.6 ms), and more
        for event in events[-2:]:
            await write_chunk(writer, event)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def run() -> cl.StreamResult:
        async with serve(script) as base:
            return await one(base, max_tokens=48)

    r = asyncio.run(run())
    assert r.status == "ok", r.error
    fields = _served_fields(r)
    assert (fields["server_ttft_ms"], fields["server_generation_ms"]) == (1.125, 31.585)
    assert (fields["spec_draft_tokens"], fields["spec_accepted_tokens"]) == (31, 31)
    assert "server_queue_ms" not in fields and "spec_steps" not in fields  # llama.cpp reports neither


def test_a_plain_completion_carries_its_timings() -> None:
    """The identity probe and coherence cases are plain completions: their draft counts place their log
    lines (recorded completion-draft-copy-k2.json)."""
    data = (RECORDED / "completion-draft-copy-k2.json").read_bytes()

    async def script(writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        await asyncio.sleep(0.05)  # longer than its prompt_ms + predicted_ms (34.7 ms)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(data)
        writer.write(head + data)
        await writer.drain()

    async def run() -> plain.Completion:
        async with serve(script) as base, httpx.AsyncClient() as client:
            return await plain.complete(
                client,
                base,
                model="m",
                prompt="The capital of Spain is",
                max_tokens=48,
                chat=False,
                headers={},
            )

    done = asyncio.run(run())
    assert done.error is None and done.text == json.loads(data)["choices"][0]["text"]
    assert done.served is not None and done.served.phases is not None and done.served.acceptance is not None
    assert (done.served.acceptance.draft_tokens, done.served.acceptance.accepted_tokens) == (31, 31)


def test_llamacpp_intervals_longer_together_than_the_client_waited_are_refused() -> None:
    seen = sv.Seen(max_tokens=48, prompt_bytes=40, content_events=48, elapsed_ms=20.0)
    # each within 20 ms x 1.02 + 10 ms of slack (served.py), together past it
    timings = {"prompt_n": 4, "prompt_ms": 16.0, "predicted_n": 48, "predicted_ms": 16.0}
    with pytest.raises(sv.ServedValueError, match="add up to 32.0 ms, more than the 20.0 ms"):
        llama_timings(timings, seen, 48)
    found, acceptance = llama_timings({**timings, "predicted_ms": 5.0}, seen, 48)
    assert found.prompt_ms == 16.0 and acceptance is None  # no draft_n: the request drafted nothing


def test_groups_survive_a_start_file_and_a_malformed_one_is_not_trusted() -> None:
    groups = [PLAIN, STREAMED, TOGETHER, Sent(("w", 4, 2), None, "failed run")]
    assert sent_from_json(json.loads(json.dumps(sent_to_json(groups)))) == groups
    for bad in (
        {"a": 1},
        [[None, None]],
        [[["w", 1], None, "x"]],
        [[None, [[1, -2]], "x"]],
        [[None, [[1, True]], "x"]],
    ):
        assert sent_from_json(bad) is None, bad
