"""Secrets kept out of everything collect writes: values, whole texts, and a server's output as it streams.

The secrets are the value of `server.api_key_env` and of every variable `server.secrets` names (a
`--var`/`[vars]` name, an environment variable, or a variable the compose service the arms come from
sets, env_file included). Records, raw files, start files, campaign.json and
error texts pass through `Redactor.value` / `Redactor.text`; a launched server's stdout and stderr
reach its log only through `RedactingPipe`, whose `StreamRedactor` holds back the few bytes at the end
of each read that could begin a secret, so a key printed in pieces across reads (or split by the
pipe) is still caught whole.
"""

from __future__ import annotations

import base64
import json
import os
import select
import threading
import urllib.parse
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, BinaryIO

from mtpverdict.errors import CollectError

if TYPE_CHECKING:
    from mtpverdict.collect.campaign import CampaignPlan

REDACTED = "[redacted]"
# a shorter secret cannot be kept out without rewriting the evidence: "ok" is inside "tokens", and
# every key and value holding it would be rewritten (records the results format then refuses)
MIN_SECRET_CHARS = 8
# a text that ends with this much of a secret's start (or starts with its end) was cut through it (an
# error kept to its first 300 characters): that part is redacted too
MIN_PARTIAL_CHARS = 6
READ_BYTES = 1 << 16  # one read of the server's output
POLL_SECONDS = 0.1  # how often the pump looks whether it was told to stop
STOP_SECONDS = 5.0  # how long stopping waits for the pump to drain what the server printed last


def named_secrets(plan: CampaignPlan, variables: dict[str, str]) -> list[tuple[str, str]]:
    """(name, value) of each variable `server.secrets` names: a --var, a [vars] entry (of the campaign
    or a device) and an environment variable of that name each count."""
    found: list[tuple[str, str]] = []
    tables = [variables, dict(plan.vars), *(dict(d.vars) for d in plan.devices)]
    for name in plan.server.secrets:
        found += [(name, table[name]) for table in tables if table.get(name)]
        found += [(name, os.environ[name])] if os.environ.get(name) else []
    return found + _service_secrets(plan)


def _service_secrets(plan: CampaignPlan) -> list[tuple[str, str]]:
    """(name, value) of each variable `server.secrets` (or `server.api_key_env`) names that the compose
    service the arms come from sets (its environment and env_file, as Compose resolved it): as Compose
    writes it (`$` as `$$`) and as the server is given it."""
    deployment = plan.server.deployment
    environment = deployment.service_json.get("environment") if deployment is not None else None
    if not isinstance(environment, dict):
        return []
    names = [*plan.server.secrets, *([plan.server.api_key_env] if plan.server.api_key_env else [])]
    found: list[tuple[str, str]] = []
    for name in dict.fromkeys(names):
        value = environment.get(name)
        if isinstance(value, str) and value:
            found += [(name, v) for v in dict.fromkeys((value, value.replace("$$", "$")))]
    return found


def check_secrets(named: Iterable[tuple[str, str]]) -> None:
    """Refuse a secret too short to redact (CollectError naming its variable, never its value)."""
    for name, value in named:
        if value and len(value) < MIN_SECRET_CHARS:
            raise CollectError(
                f"the secret in {name} is {len(value)} characters; one shorter than {MIN_SECRET_CHARS} "
                "cannot be kept out of the results without rewriting them (it would be replaced in every "
                "word that holds it): use a longer value, or do not name it as a secret"
            )


def spellings(secret: str) -> set[str]:
    """The ways a server may print a secret: as it is, escaped in JSON or a Python repr, URL-encoded,
    and the part of its base64 that does not depend on the bytes around it (at each of the three
    alignments)."""
    escaped = {json.dumps(secret, ensure_ascii=ascii_only)[1:-1] for ascii_only in (True, False)}
    found = {
        secret,
        *escaped,
        *(e.replace("/", "\\/") for e in escaped),
        repr(secret)[1:-1],
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),
        urllib.parse.quote_plus(secret),
    }
    raw = secret.encode("utf-8")
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode("ascii")
        found.add(encoded[-(-4 * pad // 3) : 8 * (pad + len(raw)) // 6])
    return {s for s in found if len(s) >= MIN_SECRET_CHARS}


class Redactor:
    """Replaces every secret (longest first, so one inside another is caught whole) by [redacted]."""

    def __init__(self, secrets: Iterable[str]) -> None:
        every = {spelling for s in secrets if s for spelling in spellings(s) | {s}}
        self.secrets: tuple[str, ...] = tuple(sorted(every, key=lambda s: (-len(s), s)))
        self._encoded = tuple(s.encode("utf-8") for s in self.secrets)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, text: str) -> str:
        """`text` with every secret, and a piece of one cut at either end, replaced by [redacted]; a
        lone surrogate (a server's JSON can escape one) is written as its escape, so the text is UTF-8."""
        if not text.isascii():
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return self._cut_ends(text)

    def _cut_ends(self, text: str) -> str:
        """Redact an end of `text` that is the start of a secret (or a start that is a secret's end)."""
        for secret in self.secrets:
            if len(text) < MIN_PARTIAL_CHARS:
                break
            if text[-MIN_PARTIAL_CHARS:] in secret:
                size = _cut_size(text, secret, at_end=True)
                text = text[: len(text) - size] + REDACTED if size else text
            if text[:MIN_PARTIAL_CHARS] in secret:
                size = _cut_size(text, secret, at_end=False)
                text = REDACTED + text[size:] if size else text
        return text

    def value(self, value: Any) -> Any:
        """A JSON-like value (dicts, lists, tuples, strings) with every string redacted; keys too."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def stream(self) -> StreamRedactor:
        return StreamRedactor(self._encoded)


def _cut_size(text: str, secret: str, *, at_end: bool) -> int:
    """The length of the longest piece of `secret` (at least MIN_PARTIAL_CHARS, shorter than it) that
    `text` ends with and the secret starts with (`at_end`), or that `text` starts with and the secret
    ends with; 0 when there is none."""
    for size in range(min(len(secret) - 1, len(text)), MIN_PARTIAL_CHARS - 1, -1):
        if text.endswith(secret[:size]) if at_end else text.startswith(secret[len(secret) - size :]):
            return size
    return 0


class StreamRedactor:
    """Redacts a byte stream fed in pieces: what `feed` returns never holds a secret, whole or split."""

    def __init__(self, secrets: tuple[bytes, ...]) -> None:
        self._secrets = secrets
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """The bytes that can be written now; a tail that could begin a secret is held for the next."""
        buffer = self._held + data
        for secret in self._secrets:
            buffer = buffer.replace(secret, REDACTED.encode())
        keep = self._partial_tail(buffer)
        self._held = buffer[len(buffer) - keep :] if keep else b""
        return buffer[: len(buffer) - keep]

    def flush(self) -> bytes:
        """What is held at the end of the stream (no secret can complete any more): the start of a
        secret the stream ended in, redacted once it is MIN_PARTIAL_CHARS long."""
        held, self._held = self._held, b""
        return REDACTED.encode() if len(held) >= MIN_PARTIAL_CHARS else held

    def _partial_tail(self, buffer: bytes) -> int:
        """The length of the longest end of `buffer` that is the start of a secret (shorter than it)."""
        longest = 0
        for secret in self._secrets:
            for size in range(min(len(secret) - 1, len(buffer)), longest, -1):
                if buffer.endswith(secret[:size]):
                    longest = size
                    break
        return longest


class RedactingPipe:
    """A pipe for a server's output: a thread copies what it prints, redacted, into the log file.

    `write_fd` goes to the child as its stdout and stderr; `close_child_end` drops the parent's copy
    once the child holds it. `finish` waits for the server's last output (EOF once every process
    holding the pipe has exited), or STOP_SECONDS for a process that escaped its group, then writes
    what is held and closes the log.
    """

    def __init__(self, log: BinaryIO, redactor: Redactor) -> None:
        self._log = log
        self._stream = redactor.stream()
        self._read_fd, self.write_fd = os.pipe()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="server-log", daemon=True)
        self._thread.start()

    def close_child_end(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def _pump(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._read_fd], [], [], POLL_SECONDS)
                if not ready:
                    if self._stop.is_set():
                        break
                    continue
                data = os.read(self._read_fd, READ_BYTES)
                if not data:
                    break
                self._log.write(self._stream.feed(data))
                self._log.flush()
        finally:
            self._log.write(self._stream.flush())
            self._log.flush()

    def finish(self) -> None:
        """Drain and close: the log holds every byte the server printed, redacted."""
        self.close_child_end()
        self._stop.set()
        self._thread.join(STOP_SECONDS)
        if not self._thread.is_alive():
            os.close(self._read_fd)
            self._log.close()
