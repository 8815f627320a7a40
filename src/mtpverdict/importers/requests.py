"""Shared by the per-request importers: one tool's request timings to typed request records, in runs.

A tool that keeps c requests in flight has no runs of c requests sent together; the requests are grouped
in send order into runs of c (rep = i // c + 1, stream = i mod c), each keeping its true times, as the
vllm-bench importer does. Warm-up requests form their own runs (``warmup`` is part of a record's key)
and are reported, never measured. Times are seconds on the tool's own clock.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import msgspec

from mtpverdict.errors import EngineTextError, Problem
from mtpverdict.formats.results import RequestRecord

MAX_ERROR_CHARS = 2000  # a request's error (often a traceback) is kept up to here
HASH_CHARS = 16  # of a file's SHA-256 in notes and raw file names: unique enough, short to read


@dataclass(frozen=True, slots=True)
class Timed:
    """One request as a tool timed it (seconds); ``error`` set for a failed request."""

    index: int  # position in the file, for notes and errors
    warmup: bool
    t_start: float
    t_first: float | None
    t_end: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    error: str | None
    output: str | None = None
    chunks: int | None = None


@dataclass(frozen=True, slots=True)
class Cell:
    """Where a file's requests belong."""

    arm: str
    boot: int
    workload: str
    concurrency: int


def sha16(data: bytes) -> str:
    """The short file hash notes and raw file names use."""
    return hashlib.sha256(data).hexdigest()[:HASH_CHARS]


def records(timed: list[Timed], cell: Cell, marker: str) -> list[RequestRecord]:
    """Typed request records, grouped in send order into runs of the cell's concurrency."""
    out: list[RequestRecord] = []
    for warmup in (True, False):
        group = sorted((t for t in timed if t.warmup is warmup), key=lambda t: (t.t_start, t.index))
        for i, item in enumerate(group):
            out.append(_record(item, cell, i // cell.concurrency + 1, i % cell.concurrency, marker))
    return out


def _record(item: Timed, cell: Cell, rep: int, stream: int, marker: str) -> RequestRecord:
    ok = (
        item.error is None
        and item.t_first is not None
        and item.t_end is not None
        and bool(item.completion_tokens)
    )
    record = RequestRecord(
        arm=cell.arm,
        boot=cell.boot,
        workload=cell.workload,
        concurrency=cell.concurrency,
        rep=rep,
        stream=stream,
        warmup=item.warmup,
        t_start=item.t_start,
        t_first=item.t_first if ok else None,
        t_end=max(item.t_end, item.t_first)
        if ok and item.t_end is not None and item.t_first is not None
        else None,
        prompt_tokens=item.prompt_tokens,
        completion_tokens=item.completion_tokens if ok else None,
        status="ok" if ok else "error",
        note=f"{marker} request {item.index}",
    )
    if not ok:
        reason = (
            item.error or f"the tool recorded {item.completion_tokens!r} output tokens and no token times"
        )
        return msgspec.structs.replace(record, error=reason[:MAX_ERROR_CHARS])
    if item.output is not None:
        record = msgspec.structs.replace(
            record, output_sha256=hashlib.sha256(item.output.encode("utf-8")).hexdigest()
        )
    if item.chunks is not None:
        record = msgspec.structs.replace(record, chunks=item.chunks)
    return record


class Problems:
    """Problems of one file, all reported at once (one per problem, each naming the file and key)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[Problem] = []

    def add(self, message: str, key: str | None = None, line: int | None = None) -> None:
        self.items.append(Problem(self.source, message, line=line, key=key))

    def raise_if_any(self) -> None:
        if self.items:
            raise EngineTextError(self.items)


def number(value: object) -> float | None:
    """A finite, non-negative number; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def whole(value: object) -> int | None:
    """A whole number of at least 0 (2.0 counts); None otherwise."""
    found = number(value)
    return None if found is None or found != math.floor(found) else int(found)
