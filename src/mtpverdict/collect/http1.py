"""HTTP/1.1 framing for the measured streams, without I/O: request bytes, response head, chunked bodies.

The measured streams do not go through httpx: its read path (httpx, httpcore, h11, anyio) costs about
100 us of CPU per network read, and h11 alone about 25 us, where the whole budget is 30 us per streamed
token (docs/performance.md, "The measuring client"). This module is the small part of HTTP/1.1 those
streams need, strict and bounded: one request per connection (``Connection: close``), a response framed
by ``Transfer-Encoding: chunked``, ``Content-Length`` or the end of the connection. The tests check it
against h11 as the reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024  # status line and headers; uvicorn sends ~150 bytes, h11 allows 16 KiB
MAX_CHUNK_LINE_BYTES = 1024  # a chunk-size line with its extensions
MAX_TRAILER_BYTES = 16 * 1024  # trailers after the last chunk (servers of this field send none)
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-9][0-9]{2})(?: ([^\r\n]*))?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")
_HEX = b"0123456789abcdefABCDEF"
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")


class WireError(Exception):
    """The server's bytes break HTTP/1.1 or a bound; the message says which."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    """Status and framing of a response."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]  # (lower-case name, value), in order
    framing: str  # chunked | length | close
    length: int | None  # for framing "length"

    def header(self, name: str) -> str | None:
        """The last value of a header, or None."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found


def build_request(method: str, target: str, host: str, headers: dict[str, str], body: bytes) -> bytes:
    """The bytes of one request; refuses header names or values that would split the request."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Connection: close"]
    for name, value in {**headers, "Content-Length": str(len(body))}.items():
        if not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise WireError(f"header {name!r} has characters HTTP/1.1 does not allow in a header")
        lines.append(f"{name}: {value}")
    if not _FIELD_VALUE.fullmatch(target) or " " in target:
        raise WireError(f"request target {target!r} is not a valid HTTP/1.1 target")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def parse_head(raw: bytes) -> ResponseHead:
    """Status line and headers (without the blank line ending them)."""
    lines = raw.split(b"\r\n")
    match = _STATUS_LINE.fullmatch(lines[0])
    if match is None:
        raise WireError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip() or line[:1] in b" \t":
            raise WireError(f"malformed response header line: {line[:80]!r}")
        headers.append((name.decode("latin-1").lower(), value.strip(b" \t").decode("latin-1")))
    head = ResponseHead(
        status=int(match.group(1)),
        reason=(match.group(2) or b"").decode("latin-1"),
        headers=tuple(headers),
        framing="close",
        length=None,
    )
    return _with_framing(head)


def _with_framing(head: ResponseHead) -> ResponseHead:
    codings = [v.strip().lower() for k, v in head.headers if k == "transfer-encoding" for v in v.split(",")]
    lengths = {v for k, v in head.headers if k == "content-length"}
    encoding = head.header("content-encoding")
    if encoding is not None and encoding.strip().lower() not in ("", "identity"):
        raise WireError(f"the response is compressed ({encoding}); the request asked for none")
    if codings:
        if codings != ["chunked"]:
            raise WireError(f"unsupported transfer-encoding {', '.join(codings)}")
        return ResponseHead(head.status, head.reason, head.headers, "chunked", None)
    if lengths:
        if len(lengths) != 1 or not next(iter(lengths)).isdigit() or len(next(iter(lengths))) > 18:
            raise WireError(f"invalid content-length {sorted(lengths)}")
        return ResponseHead(head.status, head.reason, head.headers, "length", int(next(iter(lengths))))
    return head


class ChunkedDecoder:
    """Incremental ``Transfer-Encoding: chunked`` decoder: feed bytes, get the payload pieces."""

    __slots__ = ("_pending", "_remaining", "_state", "_trailer", "done")

    _SIZE, _DATA, _DATA_END, _TRAILER = range(4)

    def __init__(self) -> None:
        self._pending = b""
        self._remaining = 0
        self._state = self._SIZE
        self._trailer = 0
        self.done = False

    def whole(self, data: bytes) -> bytes | None:
        """The payload when `data` is exactly one whole, non-empty chunk read at a chunk boundary (the
        usual network read of a stream: one event per chunk), else None; the decoder's state is the
        same after it either way, so None means: feed() these bytes."""
        if self._state != self._SIZE or self._pending:
            return None
        eol = data.find(b"\r\n")
        if not 0 < eol <= 16:
            return None
        line = data[:eol]
        if line.strip(_HEX):
            return None
        stop = eol + 2 + int(line, 16)
        if stop > eol + 2 and len(data) == stop + 2 and data[stop:] == b"\r\n":
            return data[eol + 2 : stop]
        return None

    def feed(self, data: bytes) -> list[bytes]:
        """Payload pieces in `data` (bytes after the last chunk are ignored)."""
        payload = self.whole(data)
        if payload is not None:
            return [payload]
        if self._pending:
            data = self._pending + data
            self._pending = b""
        out: list[bytes] = []
        pos, end = 0, len(data)
        while pos < end and not self.done:
            state = self._state
            if state == self._DATA:
                stop = pos + self._remaining
                if stop <= end:
                    out.append(data[pos:stop])
                    self._remaining, self._state, pos = 0, self._DATA_END, stop
                else:
                    out.append(data[pos:])
                    self._remaining -= end - pos
                    pos = end
            elif state == self._DATA_END:
                if end - pos < 2:
                    self._pending = data[pos:]
                    break
                if data[pos : pos + 2] != b"\r\n":
                    raise WireError("a chunk of the response is not followed by CRLF")
                self._state, pos = self._SIZE, pos + 2
            else:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    self._keep(data[pos:])
                    break
                line = data[pos:eol]
                pos = eol + 2
                if state == self._SIZE and 0 < len(line) <= 16 and not line.strip(_HEX):
                    stop = pos + int(line, 16)
                    if stop > pos and data[stop : stop + 2] == b"\r\n":  # a whole chunk, in one step
                        out.append(data[pos:stop])
                        pos = stop + 2
                        continue
                if state == self._SIZE:
                    self._size_line(line)
                else:
                    self._trailer_line(line)
        return out

    def _keep(self, rest: bytes) -> None:
        limit = MAX_CHUNK_LINE_BYTES if self._state == self._SIZE else MAX_TRAILER_BYTES - self._trailer
        if len(rest) > limit:
            raise WireError(f"a chunk-size or trailer line longer than {limit} bytes")
        self._pending = rest

    def _size_line(self, line: bytes) -> None:
        if 0 < len(line) <= 16 and not line.strip(_HEX):  # the usual line: the size alone, in hex
            size = int(line, 16)
        else:
            if len(line) > MAX_CHUNK_LINE_BYTES:
                raise WireError(f"a chunk-size line longer than {MAX_CHUNK_LINE_BYTES} bytes")
            match = _CHUNK_SIZE.fullmatch(line)
            if match is None:
                raise WireError(f"invalid chunk-size line {line[:40]!r}")
            size = int(match.group(1), 16)
        if size:
            self._remaining, self._state = size, self._DATA
        else:
            self._state = self._TRAILER

    def _trailer_line(self, line: bytes) -> None:
        if not line:
            self.done = True
            return
        self._trailer += len(line) + 2
        if self._trailer > MAX_TRAILER_BYTES:
            raise WireError(f"trailers longer than {MAX_TRAILER_BYTES} bytes")
