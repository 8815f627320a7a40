"""The measuring client's framing: HTTP/1.1 chunked bodies (h11 as the reference) and SSE events."""

from __future__ import annotations

import json

import h11
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtpverdict.collect import client as cl
from mtpverdict.collect import served as sv
from mtpverdict.collect import sse
from mtpverdict.collect.http1 import (
    MAX_CHUNK_LINE_BYTES,
    ChunkedDecoder,
    WireError,
    build_request,
    parse_head,
)

from ..conftest import DATA

RECORDED = DATA / "recorded" / "vllm-0.32.0-cpu"


def _h11_chunked(pieces: list[bytes]) -> bytes:
    """A chunked response body as h11 writes one."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    conn.next_event()
    out = conn.send(h11.Response(status_code=200, headers=[("Transfer-Encoding", "chunked")]))
    assert out is not None
    body = b""
    for piece in pieces:
        sent = conn.send(h11.Data(data=piece))
        assert sent is not None
        body += sent
    end = conn.send(h11.EndOfMessage())
    assert end is not None
    return body + end


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(
    pieces=st.lists(st.binary(min_size=1, max_size=300), min_size=0, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=12),
)
def test_chunked_decoding_matches_h11_however_the_bytes_are_split(
    pieces: list[bytes], cuts: list[int]
) -> None:
    wire = _h11_chunked(pieces)
    decoder = ChunkedDecoder()
    got = b"".join(b"".join(decoder.feed(part)) for part in _split(wire, cuts))
    assert got == b"".join(pieces)
    assert decoder.done


@given(cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=12))
def test_chunk_extensions_and_trailers_are_read_and_ignored(cuts: list[int]) -> None:
    wire = b"4;name=value\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\n"
    decoder = ChunkedDecoder()
    assert b"".join(b"".join(decoder.feed(p)) for p in _split(wire, cuts)) == b"Wikipedia"
    assert decoder.done


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        (b"zz\r\nab\r\n", "invalid chunk-size"),
        (b"2\r\nabXY", "not followed by CRLF"),
        (b"1" * (MAX_CHUNK_LINE_BYTES + 10), "longer than"),
        (b"0\r\n" + b"X-T: 1\r\n" * 5000, "trailers longer"),
    ],
)
def test_broken_chunked_framing_is_refused_with_its_reason(wire: bytes, reason: str) -> None:
    with pytest.raises(WireError, match=reason):
        ChunkedDecoder().feed(wire)


def test_response_heads_and_their_framing() -> None:
    head = parse_head(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked")
    assert (head.status, head.framing, head.header("content-type")) == (200, "chunked", "text/event-stream")
    assert parse_head(b"HTTP/1.1 503 Busy\r\nContent-Length: 12").framing == "length"
    assert parse_head(b"HTTP/1.0 200 OK").framing == "close"
    for bad, reason in [
        (b"HTTP/2 200", "status line"),
        (b"HTTP/1.1 200 OK\r\n folded: x", "malformed"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip", "compressed"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked", "transfer-encoding"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2", "content-length"),
    ]:
        with pytest.raises(WireError, match=reason):
            parse_head(bad)


def test_a_request_cannot_be_split_by_a_header_value() -> None:
    request = build_request("POST", "/v1/completions", "h:1", {"Authorization": "Bearer k"}, b"{}")
    assert request.startswith(b"POST /v1/completions HTTP/1.1\r\nHost: h:1\r\nConnection: close\r\n")
    assert request.endswith(b"Content-Length: 2\r\n\r\n{}")
    with pytest.raises(WireError, match="Authorization"):
        build_request("POST", "/", "h:1", {"Authorization": "k\r\nX-Evil: 1"}, b"")


@given(
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=20000), max_size=20),
)
def test_events_split_the_same_whatever_the_line_endings_and_reads(ending: str, cuts: list[int]) -> None:
    text = (RECORDED / "sse-perreq-ngram.txt").read_text()
    wire = text.replace("\n", ending).encode()
    splitter = sse.EventSplitter(1 << 20)
    events = [e for part in _split(wire, cuts) for e in splitter.feed(part)]
    expected = [e.encode() for e in text.split("\n\n") if e]
    assert events == expected


def test_an_event_over_its_bound_is_refused_before_it_grows() -> None:
    splitter = sse.EventSplitter(1000)
    splitter.feed(b"data: " + b"a" * 900)
    with pytest.raises(sse.EventTooLarge, match="longer than 1000 bytes"):
        splitter.feed(b"a" * 200)


def test_event_data_follows_the_sse_fields() -> None:
    assert sse.event_data(b'data: {"a":1}') == b'{"a":1}'
    assert sse.event_data(b'data:{"a":1}') == b'{"a":1}'
    assert sse.event_data(b": keep-alive") is None
    assert sse.event_data(b"event: ping\nid: 3") is None
    assert sse.event_data(b'id: 1\ndata: {"a":\ndata: 1}') == b'{"a":\n1}'
    assert sse.event_data(b': {"choices":[{"text":"x"}]}\ndata: {"b":2}') == b'{"b":2}'


@pytest.mark.parametrize(
    ("data", "chat", "content"),
    [
        (b'{"choices":[{"index":0,"text":" Paris"}]}', False, True),
        (b'{"choices": [{"index": 0, "text": " Paris"}]}', False, True),
        (b'{"choices":[{"index":0,"text":"","finish_reason":"length"}]}', False, False),
        (b'{"choices":[{"index":0,"text":"\\"quoted\\""}]}', False, True),
        (b'{"choices":[{"delta":{"role":"assistant","content":""}}]}', True, False),
        (b'{"choices":[{"delta":{"content":" Paris"}}]}', True, True),
        (b'{"choices":[{"delta":{"content":null}}]}', True, False),
        (b'{"choices":[{"delta":{"reasoning_content":"hm"}}]}', True, False),
        (b'{"choices":[{"delta":{"content":""},"x":"say \\"content\\":\\"x\\""}]}', True, False),
        (b'{"choices":[],"usage":{"completion_tokens":3}}', False, False),
    ],
)
def test_content_is_read_from_the_bytes_as_the_decoder_would(data: bytes, chat: bool, content: bool) -> None:
    assert sse.has_content(data, chat) is content
    assert bool(sse.delta_text(json.loads(data), chat)) is content


KEPT = cl.final_keys(sv.EVERY_ENGINE)  # usage and every engine's own object


def test_only_events_that_may_carry_a_kept_key_or_an_error_are_decoded() -> None:
    assert KEPT == ("usage", *(f.response_key for f in sv.EVERY_ENGINE))
    assert sse.needs_decoding(b'{"choices":[],"usage":{"completion_tokens":3}}', KEPT)
    assert sse.needs_decoding(b'{"error": {"message": "boom"}}', KEPT)
    assert sse.needs_decoding(b'{"choices":[],"timings":{"draft_n":1}}', KEPT)
    assert not sse.needs_decoding(b'{"choices":[],"timings":{"draft_n":1}}', ("usage",))
    assert sse.needs_decoding(b'{"choices":[],"toy.stats":{"n":1}}', ("usage", "toy.stats"))
    assert not sse.needs_decoding(b'{"choices":[],"toyXstats":{"n":1}}', ("usage", "toy.stats"))
    assert not sse.needs_decoding(b'{"choices":[{"text":"x"}],"usage":null}', KEPT)
    assert not sse.needs_decoding(b'{"choices":[{"text":"the \\"usage\\" of words"}]}', KEPT)
    for line in (RECORDED / "sse-perreq-draft-copy.txt").read_bytes().split(b"\n\n"):
        data = sse.event_data(line.strip()) if line.strip() else None
        if data is None or data == sse.DONE:
            continue
        decoded = json.loads(data)
        assert sse.needs_decoding(data, KEPT) is ("usage" in decoded), data[:80]
        assert sse.framed_object(data)


def test_decode_refuses_what_is_not_one_finite_json_object() -> None:
    for bad in (b"[1]", b'{"a": NaN}', b"[" * 100_000, b'{"a": 1'):
        with pytest.raises(ValueError):
            sse.decode(bad)
