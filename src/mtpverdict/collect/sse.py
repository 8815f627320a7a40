"""Server-sent events over raw bytes: event boundaries, and what an event carries, without decoding it.

The measuring client decodes in full only the events it needs (the first content event, the events that
carry one of the keys it keeps or an error, and every content event of a stream whose text is hashed).
Everything else is classified on its bytes: a content event is one whose ``data`` holds the key
``"text"`` (completions) or ``"content"`` (chat) with a non-empty string value. JSON escapes every quote
inside a string, so the byte pattern ``"text"`` followed by ``:`` can only be a key; a key of that name
elsewhere in the object, or a key written with ``\\u`` escapes, would be misread, which no server of this
field does (tests/data/recorded holds real streams). Comment lines (``:`` keep-alives) are never content,
so a server cannot fake progress with them.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

DONE = b"[DONE]"
_CONTENT = {
    False: re.compile(rb'"text"[ \t\r\n]*:[ \t\r\n]*"[^"]'),
    True: re.compile(rb'"content"[ \t\r\n]*:[ \t\r\n]*"[^"]'),
}
_COMPACT = {False: b'"text":"', True: b'"content":"'}  # how vLLM, SGLang and llama.cpp write them
ERROR_KEY = "error"  # a server's error object in a stream


class EventTooLarge(Exception):
    """An event (or the bytes before its end) is larger than the bound."""


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number in JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


class EventSplitter:
    """Splits a byte stream into SSE events (the bytes between blank lines), with a bound on each.

    Line endings CRLF and CR are turned into LF first (the SSE specification allows all three; JSON data
    cannot hold a raw CR, so nothing in the data changes).
    """

    __slots__ = ("_cr", "_pending", "max_event_bytes")

    def __init__(self, max_event_bytes: int) -> None:
        self.max_event_bytes = max_event_bytes
        self._pending = b""
        self._cr = False  # the previous piece ended with CR (its LF may start this one)

    def whole(self, piece: bytes) -> bytes | None:
        """The event when `piece` is exactly one whole event with nothing pending (the usual piece of a
        stream), else None; the splitter's state is the same after it either way."""
        if self._pending or self._cr or b"\r" in piece:
            return None
        return piece[:-2] if piece.find(b"\n\n") == len(piece) - 2 > 0 else None

    def feed(self, piece: bytes) -> list[bytes]:
        """Complete events in `piece` plus what was pending, in order; raises EventTooLarge."""
        event = self.whole(piece)
        if event is not None:
            return [event]
        if b"\r" in piece or self._cr:
            piece = self._normalise(piece)
        data = self._pending + piece if self._pending else piece
        events: list[bytes] = []
        start = 0
        cut = data.find(b"\n\n")
        while cut >= 0:
            if cut > start:
                events.append(data[start:cut])
            start = cut + 2
            while data[start : start + 1] == b"\n":  # more blank lines: no event between them
                start += 1
            cut = data.find(b"\n\n", start)
        self._pending = data[start:] if start < len(data) else b""
        if len(self._pending) > self.max_event_bytes:
            raise EventTooLarge(f"an SSE event longer than {self.max_event_bytes} bytes")
        return events

    def _normalise(self, piece: bytes) -> bytes:
        if self._cr and piece[:1] == b"\n":
            piece = piece[1:]  # the LF of a CRLF split across reads; its CR became an LF already
        self._cr = piece[-1:] == b"\r"
        return piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    @property
    def pending(self) -> int:
        """Bytes of an event not yet complete."""
        return len(self._pending)


def event_data(event: bytes) -> bytes | None:
    """The ``data`` of an event (its data lines joined by LF), or None for an event without data."""
    if event[:5] == b"data:" and b"\n" not in event:
        value = event[5:]
        return value[1:] if value[:1] == b" " else value
    values = []
    for line in event.split(b"\n"):
        name, colon, value = line.partition(b":")
        if name == b"data":
            values.append(value[1:] if colon and value[:1] == b" " else value)
    return b"\n".join(values) if values else None


def framed_object(data: bytes) -> bool:
    """Whether event data is framed as one JSON object (starts with { and ends with }): a cheap check
    that catches truncated or non-JSON data in events that are not decoded."""
    if data[:1] != b"{":
        data = data.lstrip()
        if data[:1] != b"{":
            return False
    return data[-1:] == b"}" or data.rstrip()[-1:] == b"}"


def has_content(data: bytes, chat: bool) -> bool:
    """Whether event data carries a non-empty text (completions) or content (chat) string."""
    compact = _COMPACT[chat]
    at = data.find(compact)
    if at >= 0 and data[at + len(compact) : at + len(compact) + 1] != b'"':
        return True
    return _CONTENT[chat].search(data) is not None


@functools.lru_cache(maxsize=16)
def _markers(keys: tuple[str, ...]) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """A key of `keys` or the error key, and one of them followed by a value that is not null."""
    names = b"|".join(re.escape(k.encode()) for k in (*keys, ERROR_KEY))
    return re.compile(rb'"(?:%s)"' % names), re.compile(rb'"(?:%s)"[ \t\r\n]*:[ \t\r\n]*[^n \t\r\n]' % names)


def needs_decoding(data: bytes, keys: tuple[str, ...]) -> bool:
    """Whether event data may carry one of `keys` or an error (a non-null value)."""
    marker, not_null = _markers(keys)
    return marker.search(data) is not None and not_null.search(data) is not None


def decode(data: bytes) -> dict[str, Any]:
    """One event's JSON object; raises ValueError (also for NaN, deep nesting, huge integers)."""
    try:
        obj = _DECODER.decode(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    return obj


def delta_text(event: dict[str, Any], chat: bool) -> str:
    """The text an OpenAI-style stream event adds: choices[0].text, or choices[0].delta.content."""
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    if chat:
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
    else:
        text = choice.get("text")
    return text if isinstance(text, str) else ""
