"""The measuring client: streamed OpenAI-compatible requests timed on one monotonic clock, no statistics.

Timestamps are seconds on time.perf_counter_ns() relative to a campaign epoch: t_start when the request
is written on an open connection, t_first at the network read that brought the first content event,
t_end at the read that brought the last. Token counts come from the server's usage block
(stream_options.include_usage), never from counting deltas: under speculation one delta carries several.

Cost per delta is small and flat: each measured stream is an asyncio Protocol that takes the bytes of
every network read, frames them (collect/http1.py), cuts them into SSE events and classifies each event
on its bytes (collect/sse.py), with one clock read per network read. It decodes in full only what it
needs: the first content event, the events carrying usage, an engine's per-request object (the key of its
`server_fields` part) or an error, and the last content event (to confirm the byte scan); every content
event only for streams whose text is hashed (un-nonced prompts, compared across arms). Why not httpx
here: docs/performance.md, "The measuring client". httpx serves everything else, each response read
through a bounded reader.

Bounds (a hostile or broken server ends a request as an error record with its reason, never a hang,
a crash or unbounded memory): a total time per request from max_tokens at SLOWEST_TOKENS_PER_SECOND
plus the stall allowance; progress is content, so keep-alive comments do not reset the stall clock;
bounded head, event, body, and (for plain GETs) response sizes; every server value validated
(collect/served.py).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import ssl
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

import httpx

from mtpverdict.collect import served as sv
from mtpverdict.collect import sse
from mtpverdict.collect.datasets import DatasetPrompt, Messages, with_nonce
from mtpverdict.collect.http1 import (
    MAX_HEAD_BYTES,
    ChunkedDecoder,
    ResponseHead,
    WireError,
    build_request,
    parse_head,
)
from mtpverdict.engines.interface import ServerFields

# A content delta that arrives within this long of the previous one was read from a buffer in a burst
# (a starved client or server), not streamed as generated: 200 us is below any real per-token interval.
BUNCH_SECONDS = 0.0002
# The slowest decode a request is allowed on top of its stall allowance: a request lasts at most
# stall_seconds + max_tokens / SLOWEST_TOKENS_PER_SECOND. One token per second is far below any seat
# measured for speed (the tiny CPU model streams ~100 tok/s, a loaded GPU seat 5-100 per stream).
SLOWEST_TOKENS_PER_SECOND = 1.0
DEFAULT_STALL_SECONDS = 120.0
CONNECT_SECONDS = 30.0
# One SSE event: a vLLM delta is ~300 bytes (tests/data/recorded); its final usage event with detailed
# per-step arrays adds ~4 bytes per token (two small integers per verify step): 16 leaves 4x room.
BASE_EVENT_BYTES = 64 * 1024
EVENT_BYTES_PER_TOKEN = 16
# A whole streamed body: every delta event carries at least one token; 2 KiB per token is ~7x a vLLM
# delta, the base covers the head, the role and usage events and keep-alive comments.
BASE_BODY_BYTES = 1024 * 1024
BODY_BYTES_PER_TOKEN = 2048
ERROR_BODY_BYTES = 4096  # of a non-200 answer, read for its message
READ_BUFFER_BYTES = 32 * 1024  # one network read at most; a longer arrival takes several
BACKSTOP_SECONDS = 5.0  # past the total bound, a request ends even if its watchdog never ran
EVENT_LOOP_ENV = "MTPVERDICT_EVENT_LOOP"  # "asyncio" keeps asyncio's own loop where uvloop is installed
_NS = 1_000_000_000
T = TypeVar("T")
_BUNCH_NS = int(BUNCH_SECONDS * _NS)


USAGE_KEY = "usage"  # the OpenAI usage block (stream_options.include_usage)


def final_keys(fields: Sequence[ServerFields]) -> tuple[str, ...]:
    """The keys of a stream's events the client keeps: the usage block, then each engine's object."""
    return tuple(dict.fromkeys((USAGE_KEY, *(f.response_key for f in fields))))


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """Bounds of one measured request (the defaults are the module's constants), and the response
    objects its server reports the request's own fields in (the engine's, collect/served.py)."""

    stall_seconds: float = DEFAULT_STALL_SECONDS
    slowest_tokens_per_second: float = SLOWEST_TOKENS_PER_SECOND
    connect_seconds: float = CONNECT_SECONDS
    base_event_bytes: int = BASE_EVENT_BYTES
    base_body_bytes: int = BASE_BODY_BYTES
    server_fields: tuple[ServerFields, ...] = sv.EVERY_ENGINE

    def total_seconds(self, max_tokens: int) -> float:
        """The longest a request may take, connection included."""
        return self.connect_seconds + self.stall_seconds + max_tokens / self.slowest_tokens_per_second

    def event_bytes(self, max_tokens: int) -> int:
        return self.base_event_bytes + EVENT_BYTES_PER_TOKEN * max_tokens

    def body_bytes(self, max_tokens: int) -> int:
        return self.base_body_bytes + BODY_BYTES_PER_TOKEN * max_tokens


@dataclass(frozen=True, slots=True)
class StreamResult:
    """One streamed request as measured, with what the server reported about it."""

    stream: int
    t_start: float
    t_first: float | None
    t_end: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    status: Literal["ok", "error"]
    error: str | None
    text: str | None  # the output, kept only for streams whose output is hashed
    chunks: int
    nonce: str | None
    bunched: int = 0  # content deltas read within BUNCH_SECONDS of the previous one
    timing: sv.ServerTiming | None = None
    acceptance: sv.RequestAcceptance | None = None
    phases: sv.PhaseTimings | None = None
    own_read: bool = False  # the engine's own response object was read (collect/served.py Served)

    @property
    def output_sha256(self) -> str | None:
        if self.status != "ok" or self.text is None:
            return None
        return text_sha256(self.text)


def text_sha256(text: str) -> str:
    """SHA-256 of a completion's UTF-8 (a lone surrogate a JSON escape can carry hashed as itself)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run: its streams, and the collector process's CPU and wall time over it."""

    streams: tuple[StreamResult, ...]
    cpu_seconds: float
    wall_seconds: float

    @property
    def cpu_share(self) -> float | None:
        """Process CPU seconds over wall seconds: 1.0 is one core busy for the whole run."""
        return self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else None


class Clock:
    """Seconds since the campaign epoch on the monotonic performance counter."""

    def __init__(self) -> None:
        self.epoch_ns = time.perf_counter_ns()

    def now(self) -> float:
        return (time.perf_counter_ns() - self.epoch_ns) / 1e9

    def at(self, ns: int) -> float:
        return (ns - self.epoch_ns) / 1e9


def make_nonce() -> str:
    """An unseeded nonce for the start of a prompt, so prefix caching cannot fake prefill."""
    return uuid.uuid4().hex[:12]


def _payload(
    model: str,
    prompt: str,
    max_tokens: int,
    chat: bool,
    ignore_eos: bool,
    stream: bool,
    messages: Messages | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0.0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    if messages is not None:
        body["messages"] = [{"role": role, "content": content} for role, content in messages]
    elif chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


@dataclass(frozen=True, slots=True)
class _Endpoint:
    host: str
    port: int
    host_header: str
    prefix: str
    tls: bool


def _endpoint(base_url: str) -> _Endpoint:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WireError(f"{base_url!r} is not an http:// or https:// URL")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return _Endpoint(parts.hostname, port, f"{name}:{port}", parts.path.rstrip("/"), tls)


class _Stream(asyncio.BufferedProtocol):
    """One measured streamed request on its own connection: all the per-read work happens here.

    A buffered protocol: the event loop reads into this stream's buffer (asyncio's plain protocols
    allocate a 256 KiB bytes object for every read, about 7 us here).
    """

    def __init__(
        self, request: bytes, chat: bool, keep_text: bool, max_tokens: int, limits: StreamLimits
    ) -> None:
        self.request = request
        self.chat = chat
        self.keep_text = keep_text
        self.max_tokens = max_tokens
        self.limits = limits
        self.stall_ns = int(limits.stall_seconds * _NS)
        self.max_body = limits.body_bytes(max_tokens)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.watchdog: asyncio.TimerHandle | None = None
        self.deadline_ns = 0
        self.error: str | None = None
        self.finished = False
        self.head: ResponseHead | None = None
        self.head_buf = b""
        self.chunked: ChunkedDecoder | None = None
        self.events: ChunkedDecoder | None = None  # the decoder of a 200 answer's chunked SSE body
        self.remaining: int | None = None  # bytes left of a Content-Length body
        self.splitter = sse.EventSplitter(limits.event_bytes(max_tokens))
        self.error_body = bytearray()
        self.received = 0
        self.t_start_ns = 0
        self.t_first_ns: int | None = None
        self.t_end_ns = 0
        self.t_last_read_ns = 0
        self.progress_ns = 0
        self.chunks = 0
        self.bunched = 0
        self.pieces: list[str] = []
        self.last_content: bytes | None = None
        self.final: dict[str, Any] = {}
        self.keys = final_keys(limits.server_fields)
        self.buffer = memoryview(bytearray(READ_BUFFER_BYTES))

    # --- connection events ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport
        self.t_start_ns = self.progress_ns = time.perf_counter_ns()
        self.deadline_ns = self.t_start_ns + int(
            (self.limits.total_seconds(self.max_tokens) - self.limits.connect_seconds) * _NS
        )
        self._arm_watchdog(self.t_start_ns)
        self.transport.write(self.request)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.buffer[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        now = self.t_last_read_ns = time.perf_counter_ns()
        if self.finished:
            return
        self.received += len(data)
        try:
            if self.received > self.max_body:
                raise WireError(
                    f"the response passed {self.max_body} bytes, the bound for max_tokens "
                    f"{self.max_tokens}; not read further"
                )
            if self.events is not None:  # the usual read of a streamed answer: one chunk, one event
                payload = self.events.whole(data)
                event = None if payload is None else self.splitter.whole(payload)
                if event is not None:
                    self._event(event, now)
                    return
            if self.head is None:
                rest = self._read_head(data)
                if rest is None:
                    return
                data = rest
            self._body(data, now)
        except (WireError, sse.EventTooLarge) as exc:
            self._finish(str(exc))
        except ValueError as exc:
            self._finish(f"malformed SSE data: {exc}")
        except Exception as exc:  # never let a server's bytes end the collector: the request fails instead
            self._finish(f"internal error reading the stream: {type(exc).__name__}: {exc}")

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost settles the request

    def connection_lost(self, exc: Exception | None) -> None:
        if self.finished:
            return
        if self.head is None:
            self._finish("the server closed the connection before answering")
        elif self.head.status != 200:
            self._finish(self._status_error())
        elif self.head.framing == "close" and exc is None:
            self._finish(None)
        else:
            self._finish("the server closed the connection before the end of the response")

    # --- framing -------------------------------------------------------------------------------------

    def _read_head(self, data: bytes) -> bytes | None:
        """The body bytes after the head, or None while the head is incomplete."""
        buf = self.head_buf + data
        cut = buf.find(b"\r\n\r\n")
        if cut < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise WireError(f"a response head longer than {MAX_HEAD_BYTES} bytes")
            self.head_buf = buf
            return None
        self.head_buf = b""
        head = parse_head(buf[:cut])
        self.head = head
        if head.framing == "chunked":
            self.chunked = ChunkedDecoder()
            self.events = self.chunked if head.status == 200 else None
        elif head.framing == "length":
            self.remaining = head.length
        rest = buf[cut + 4 :]
        return rest[3:] if rest[:3] == b"\xef\xbb\xbf" else rest  # an SSE stream may open with a BOM

    def _body(self, data: bytes, now: int) -> None:
        assert self.head is not None
        ended = False
        if self.chunked is not None:
            pieces = self.chunked.feed(data)
            ended = self.chunked.done
        elif self.remaining is not None:
            pieces = [data[: self.remaining]]
            self.remaining -= len(pieces[0])
            ended = self.remaining == 0
        else:
            pieces = [data]
        if self.head.status != 200:
            for piece in pieces:
                self.error_body += piece[: ERROR_BODY_BYTES - len(self.error_body)]
            if ended or len(self.error_body) >= ERROR_BODY_BYTES:
                self._finish(self._status_error())
            return
        for piece in pieces:
            for event in self.splitter.feed(piece):
                self._event(event, now)
                if self.finished:
                    return
        if ended:
            self._finish(None)

    def _status_error(self) -> str:
        assert self.head is not None
        detail = bytes(self.error_body[:300]).decode("utf-8", errors="replace")
        return f"HTTP {self.head.status}: {detail}"

    # --- events --------------------------------------------------------------------------------------

    def _event(self, event: bytes, now: int) -> None:
        if event[:6] == b"data: " and b"\n" not in event:  # the usual shape, inlined: this runs per delta
            data = event[6:]
        else:
            found = sse.event_data(event)
            if found is None:
                return  # a comment (keep-alive) or an event without data: not progress
            data = found
        if data[:1] != b"{" or data[-1:] != b"}":
            if data[:6] == sse.DONE and data.strip() == sse.DONE:
                self._finish(None)
                return
            if not sse.framed_object(data):
                raise WireError(f"malformed SSE data, not a JSON object: {data[:120]!r}")
        if sse.has_content(data, self.chat):
            # servers put usage and their own objects after the content, in the last events; a content
            # event is decoded only when it is the first, when its text is kept, or as the last one
            decoded = self._content(data, now)
            if decoded is not None:
                self._final(decoded)
        elif sse.needs_decoding(data, self.keys):
            self._final(sse.decode(data))

    def _content(self, data: bytes, now: int) -> dict[str, Any] | None:
        self.chunks += 1
        if self.chunks > self.max_tokens:
            raise WireError(
                f"more than max_tokens ({self.max_tokens}) content deltas: the server does not stop"
            )
        decoded = None
        if self.t_first_ns is None or self.keep_text:
            decoded = sse.decode(data)
            text = sse.delta_text(decoded, self.chat)
            if not text:
                raise WireError(f"an event the byte scan read as content has no text: {data[:120]!r}")
            if self.keep_text:
                self.pieces.append(text)
        if self.t_first_ns is None:
            self.t_first_ns = now
        else:
            if now - self.t_end_ns < _BUNCH_NS:
                self.bunched += 1
            self.last_content = data  # confirmed once the stream ends
        self.t_end_ns = self.progress_ns = now
        return decoded

    def _final(self, obj: dict[str, Any], *, earlier: bool = False) -> None:
        """Keep usage and the engines' objects (a later event's win, unless this one is `earlier`)."""
        error = obj.get(sse.ERROR_KEY)
        if error is not None:
            raise WireError(f"server error in stream: {str(error)[:200]}")
        for key in self.keys:
            if obj.get(key) is not None and not (earlier and key in self.final):
                self.final[key] = obj[key]

    def _confirm_last(self) -> str | None:
        """Decode the last content event: it must have text, and may carry usage or an engine's object."""
        if self.last_content is None or self.keep_text:
            return None
        try:
            obj = sse.decode(self.last_content)
            self._final(obj, earlier=True)
        except ValueError as exc:
            return f"malformed SSE data: {exc}"
        except WireError as exc:
            return str(exc)
        if not sse.delta_text(obj, self.chat):
            return f"an event the byte scan read as content has no text: {self.last_content[:120]!r}"
        return None

    # --- ending --------------------------------------------------------------------------------------

    def _arm_watchdog(self, now: int) -> None:
        wake = min(self.deadline_ns, self.progress_ns + self.stall_ns)
        self.watchdog = asyncio.get_running_loop().call_later(max(0.0, (wake - now) / _NS), self._watch)

    def _watch(self) -> None:
        if self.finished:
            return
        now = time.perf_counter_ns()
        if now >= self.deadline_ns:
            self._finish(
                f"took longer than {(self.deadline_ns - self.t_start_ns) / _NS:.3g} s, the bound for "
                f"max_tokens {self.max_tokens} at {self.limits.slowest_tokens_per_second:g} tok/s after a "
                f"{self.limits.stall_seconds:g} s first-token allowance"
            )
        elif now - self.progress_ns >= self.stall_ns:
            self._finish(f"stalled: no content for {self.limits.stall_seconds:g} s")
        else:
            self._arm_watchdog(now)

    def _finish(self, error: str | None) -> None:
        if self.finished:
            return
        if error is None:
            error = self._confirm_last()
        self.error = error
        self.finished = True
        if self.watchdog is not None:
            self.watchdog.cancel()
        if self.transport is not None:
            if error is None:
                self.transport.close()
            else:
                self.transport.abort()
        self.done.set_result(None)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every https stream (building one loads the CA store: milliseconds)."""
    return ssl.create_default_context()


@functools.cache
def httpx_tls() -> ssl.SSLContext:
    """httpx's own verifying TLS context (its CA store and SSL_CERT_FILE / SSL_CERT_DIR, as a client
    built without one gets), built once per process: a client builds its own otherwise, about 50 ms of
    CPU each, and collect opens one client per boot."""
    return httpx.create_ssl_context()


def _timed_error(stream: int, t_start: float, error: str, nonce: str | None) -> StreamResult:
    return StreamResult(stream, t_start, None, None, None, None, "error", error[:300], None, 0, nonce)


async def stream_one(
    base_url: str,
    *,
    model: str,
    prompt: str | DatasetPrompt,
    max_tokens: int,
    chat: bool,
    ignore_eos: bool,
    clock: Clock,
    stream_index: int,
    nonce: str | None,
    headers: dict[str, str],
    limits: StreamLimits | None = None,
) -> StreamResult:
    """Send one streamed request and time it; any failure becomes an error result, never an exception.

    The output text is kept (and hashed) only for an un-nonced prompt: only those are the same prompt in
    every arm, so only their outputs are compared.
    """
    limits = limits or StreamLimits()
    if isinstance(prompt, DatasetPrompt):  # a dataset's prompt: its text or chat turns, the nonce first
        text_prompt, messages = with_nonce(prompt, nonce)
    else:
        text_prompt, messages = (f"[{nonce}] {prompt}" if nonce else prompt), None
    body = json.dumps(_payload(model, text_prompt, max_tokens, chat, ignore_eos, True, messages)).encode()
    prompt_bytes = len(text_prompt.encode()) + sum(len(c.encode()) for _, c in messages or ())
    t_start = clock.now()
    try:
        where = _endpoint(base_url)
        path = where.prefix + ("/v1/chat/completions" if chat else "/v1/completions")
        request = build_request(
            "POST", path, where.host_header, {"Content-Type": "application/json", **headers}, body
        )
    except WireError as exc:
        return _timed_error(stream_index, t_start, str(exc), nonce)
    proto = _Stream(request, chat, nonce is None, max_tokens, limits)
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(
            loop.create_connection(
                lambda: proto,
                where.host,
                where.port,
                ssl=_tls_context() if where.tls else None,
            ),
            timeout=limits.connect_seconds,
        )
    except (OSError, TimeoutError) as exc:
        return _timed_error(stream_index, t_start, f"connect: {type(exc).__name__}: {exc}", nonce)
    try:  # the watchdog ends the request in time; this backstop holds even if the protocol broke
        await asyncio.wait_for(
            asyncio.shield(proto.done), limits.total_seconds(max_tokens) + BACKSTOP_SECONDS
        )
    except TimeoutError:
        proto._finish("the request outlived its time bound (the client's watchdog did not end it)")
    finally:
        proto._finish("cancelled")  # a no-op once done; closes the connection when cancelled
    return _result(proto, clock, stream_index, nonce, max_tokens, prompt_bytes)


def _result(
    proto: _Stream, clock: Clock, stream: int, nonce: str | None, max_tokens: int, prompt_bytes: int
) -> StreamResult:
    error = proto.error
    found: sv.Served | None = None
    if error is None and proto.t_first_ns is None:
        error = "no content in the stream"
    if error is None:
        seen = sv.Seen(
            max_tokens=max_tokens,
            prompt_bytes=prompt_bytes,
            content_events=proto.chunks,
            elapsed_ms=(proto.t_last_read_ns - proto.t_start_ns) / 1e6,
        )
        try:
            found = sv.served(proto.final, seen, proto.limits.server_fields)
        except sv.ServedValueError as exc:
            error = str(exc)
    ok = error is None and found is not None
    return StreamResult(
        stream=stream,
        t_start=clock.at(proto.t_start_ns),
        t_first=clock.at(proto.t_first_ns) if ok and proto.t_first_ns is not None else None,
        t_end=clock.at(proto.t_end_ns) if ok else None,
        prompt_tokens=found.usage.prompt_tokens if found else None,
        completion_tokens=found.usage.completion_tokens if found else None,
        status="ok" if ok else "error",
        error=None if error is None else error[:300],
        text="".join(proto.pieces) if proto.keep_text else None,
        chunks=proto.chunks,
        nonce=nonce,
        bunched=proto.bunched,
        timing=found.timing if found else None,
        acceptance=found.acceptance if found else None,
        phases=found.phases if found else None,
        own_read=found.own_read if found else False,
    )


async def run_concurrent(
    base_url: str,
    *,
    concurrency: int,
    model: str,
    prompt: str,
    max_tokens: int,
    chat: bool,
    ignore_eos: bool,
    clock: Clock,
    nonce: bool,
    headers: dict[str, str],
    limits: StreamLimits | None = None,
) -> RunResult:
    """One run: `concurrency` streams sent together, each with its own nonce when asked."""
    cpu = time.process_time()
    start = clock.now()
    streams = await asyncio.gather(
        *(
            stream_one(
                base_url,
                model=model,
                prompt=prompt,
                max_tokens=max_tokens,
                chat=chat,
                ignore_eos=ignore_eos,
                clock=clock,
                stream_index=i,
                nonce=make_nonce() if nonce else None,
                headers=headers,
                limits=limits,
            )
            for i in range(concurrency)
        )
    )
    return RunResult(tuple(streams), time.process_time() - cpu, clock.now() - start)


# --- the event loop -----------------------------------------------------------------------------------


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed and not turned off, else None (asyncio's own).

    uvloop reads a ready socket into a buffered protocol in C: 3-4 us less CPU per streamed token
    than asyncio's selector loop (docs/performance.md, "The whole collect process"). Every timestamp is
    still taken by the protocol on the same clock, once per network read, whichever loop delivers it.
    MTPVERDICT_EVENT_LOOP=asyncio keeps asyncio's loop (where uvloop misbehaves, or to compare); any
    other value is the default.
    """
    if os.environ.get(EVENT_LOOP_ENV, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # not built for this platform (Windows, PyPy): asyncio's loop measures alike
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end on a new event loop, as asyncio.run does (Ctrl-C cancels it and
    raises KeyboardInterrupt), on uvloop's loop where `loop_factory` gives one."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
