"""The measuring client's cost per read: its event loop (uvloop where installed), one clock read per
network read, the usual read (one chunk, one event) taken straight to its event, one TLS context."""

from __future__ import annotations

import asyncio
import ssl
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.collect import client as cl
from mtpverdict.collect import sse
from mtpverdict.collect.http1 import ChunkedDecoder
from mtpverdict.formats.results_io import load_results

from .conftest import small_campaign

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
EVENT = (
    b'{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,'
    b'"text":" tok","logprobs":null,"finish_reason":null,"stop_reason":null}]}'
)
USAGE = b'{"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":5,"total_tokens":%d,"completion_tokens":%d}}'


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def stream_reads(n: int) -> list[bytes]:
    """A vLLM-shaped answer as a server writes it: the head, one chunk per event, the last chunk."""
    usage = b"data: " + USAGE % (n + 5, n) + b"\n\n"
    events = [b"data: " + EVENT + b"\n\n"] * n + [usage, b"data: [DONE]\n\n"]
    return [HEAD, *(chunk(e) for e in events), b"0\r\n\r\n"]


class Transport:
    """Stands in for the connection: the protocol writes its request here and closes it at the end."""

    def __init__(self) -> None:
        self.closed = False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class Clock:
    """time.perf_counter_ns as the client sees it: counts its reads, steps `step_ns` each."""

    def __init__(self, step_ns: int) -> None:
        self.step_ns = step_ns
        self.now = 1_000_000_000
        self.reads = 0

    def perf_counter_ns(self) -> int:
        self.reads += 1
        self.now += self.step_ns
        return self.now


def fed(
    reads: list[bytes], clock: Clock, monkeypatch: pytest.MonkeyPatch, n: int
) -> tuple[cl._Stream, list[int]]:
    """A measured stream fed `reads`, one network read each: the stream, and the clock at each read."""
    monkeypatch.setattr(cl, "time", clock)
    at: list[int] = []

    async def feed() -> cl._Stream:
        proto = cl._Stream(b"request", False, False, n, cl.StreamLimits())
        proto.connection_made(Transport())  # type: ignore[arg-type]
        for data in reads:
            proto.buffer[: len(data)] = data
            proto.buffer_updated(len(data))
            at.append(clock.now)
        proto._finish("the test ended the stream")  # a no-op once the stream ended itself
        return proto

    return asyncio.run(feed()), at


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the general framing and event splitting run (the usual read does not need them)."""
    calls = {"chunked": 0, "events": 0}
    chunked_feed, events_feed = ChunkedDecoder.feed, sse.EventSplitter.feed

    def count_chunked(self: ChunkedDecoder, data: bytes) -> list[bytes]:
        calls["chunked"] += 1
        return chunked_feed(self, data)

    def count_events(self: sse.EventSplitter, piece: bytes) -> list[bytes]:
        calls["events"] += 1
        return events_feed(self, piece)

    monkeypatch.setattr(ChunkedDecoder, "feed", count_chunked)
    monkeypatch.setattr(sse.EventSplitter, "feed", count_events)
    return calls


def test_one_clock_read_per_network_read_and_the_usual_read_goes_straight_to_its_event(
    monkeypatch: pytest.MonkeyPatch, counted: dict[str, int]
) -> None:
    n = 40
    clock = Clock(step_ns=1_000_000)  # 1 ms between reads: streamed, not bunched
    reads = stream_reads(n)
    proto, at = fed(reads, clock, monkeypatch, n)
    assert proto.error is None and proto.finished
    assert clock.reads == 1 + len(reads)  # the request's write, then one per network read
    assert proto.t_first_ns == at[1]  # the read that brought the first content event
    assert proto.t_end_ns == at[n]  # the read that brought the last one
    assert (proto.chunks, proto.bunched) == (n, 0)
    assert proto.final["usage"]["completion_tokens"] == n
    # every read after the head is one whole chunk holding one whole event: only the head's read (whose
    # rest, empty, goes to the chunked decoder) takes the general path
    assert counted == {"chunked": 1, "events": 0}


def test_bytes_cut_anywhere_measure_as_the_usual_reads_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """The general path (a read holding pieces of events) and the direct one agree on everything but the
    instants, which are those of the reads that brought the first and last content."""
    n = 12
    usual, _ = fed(stream_reads(n), Clock(step_ns=1_000_000), monkeypatch, n)
    body = b"".join(stream_reads(n))
    cuts = [body[i : i + 37] for i in range(0, len(body), 37)]
    clock = Clock(step_ns=1_000_000)
    cut, at = fed(cuts, clock, monkeypatch, n)
    assert clock.reads == 1 + len(cuts)
    for proto in (usual, cut):
        assert proto.error is None and proto.chunks == n and proto.bunched == 0
    assert usual.final == cut.final
    first_event_ends = body.index(b"\n\n", body.index(EVENT)) + 1  # its blank line's last byte
    assert cut.t_first_ns == at[first_event_ends // 37]
    whole, at_whole = fed([body], Clock(step_ns=1_000_000), monkeypatch, n)
    assert (whole.chunks, whole.bunched) == (n, n - 1)  # read in one burst: every delta after the first
    assert whole.t_first_ns == whole.t_end_ns == at_whole[0]


def loop_type() -> type[asyncio.AbstractEventLoop]:
    async def running() -> type[asyncio.AbstractEventLoop]:
        return type(asyncio.get_running_loop())

    return cl.run_loop(running())


def test_the_client_runs_on_uvloop_where_installed_and_on_asyncio_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.delenv(cl.EVENT_LOOP_ENV, raising=False)
    assert loop_type() is uvloop.Loop
    monkeypatch.setenv(cl.EVENT_LOOP_ENV, "asyncio")
    assert not issubclass(loop_type(), uvloop.Loop)


def test_without_uvloop_the_client_runs_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as where it is not built: its import fails
    monkeypatch.delenv(cl.EVENT_LOOP_ENV, raising=False)
    assert cl.loop_factory() is None
    assert issubclass(loop_type(), asyncio.BaseEventLoop)


@pytest.fixture
def loops_and_tls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Counts the event loops collect builds and the CA stores its TLS contexts load."""
    seen = {"loops": 0, "ca_loads": 0}
    factory = cl.loop_factory

    def counting() -> Callable[[], asyncio.AbstractEventLoop] | None:
        seen["loops"] += 1
        return factory()

    load = ssl.SSLContext.load_verify_locations

    def counting_load(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        seen["ca_loads"] += 1
        load(self, *args, **kwargs)

    monkeypatch.setattr(cl, "loop_factory", counting)
    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting_load)
    cl.httpx_tls.cache_clear()
    yield seen
    cl.httpx_tls.cache_clear()  # built under the counting patch: the next user builds its own


def test_a_collect_runs_each_boot_on_the_clients_loop_and_builds_one_tls_context(
    tmp_path: Path, port: int, cli: Any, loops_and_tls: dict[str, int]
) -> None:
    path = tmp_path / "campaign.toml"
    path.write_text(small_campaign(port, arms=(("off_A", "[]"), ("off_B", "[]"))))
    ran = cli("collect", path, "--out", tmp_path / "out")
    assert ran.returncode == 0, ran.stderr
    boots = load_results(tmp_path / "out").boots
    assert len(boots) == 2
    assert loops_and_tls["loops"] == 2  # one per boot, each from loop_factory
    assert loops_and_tls["ca_loads"] <= 1  # httpx's context is built once, not once per boot's client
