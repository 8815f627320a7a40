"""records.jsonl decoded in blocks: msgspec's typed C fast path, and each broken line named one by one.

The whole fast decoder lives here (the block reader, the pattern-free models, the duplicate-key scan and
the one-by-one fallback that names a bad line), so its speed and its exactness change together.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from mtpverdict.formats import _check
from mtpverdict.formats.results import (
    RECORD_KINDS,
    RECORD_TYPES,
    Record,
    record_fields,
)
from mtpverdict.formats.results_io.common import (
    BLOCK_BYTES,
    MAX_LINE_BYTES,
    _Problems,
    _sha256,
    line_digest,
)

if TYPE_CHECKING:
    pass

SHARED_NAMES = frozenset({"arm", "workload", "status", "source", "scoped", "metric"})


@dataclass(slots=True)
class _Columns:
    """Column lists of every kind, filled block by block, with each record's line number."""

    values: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: {kind: {f: [] for f in record_fields(kind)} for kind in RECORD_KINDS}
    )
    lines: dict[str, list[int]] = field(default_factory=lambda: {kind: [] for kind in RECORD_KINDS})
    digests: bytearray = field(default_factory=bytearray)  # each line's 32-byte SHA-256, back to back
    # one object per distinct name in the columns that repeat a few names (arm, workload, status):
    # a million decoded copies of "off_A" would hold about 55 MB per column
    strings: dict[str, str] = field(default_factory=dict)

    def add(self, records: Sequence[Record], numbers: Sequence[int]) -> int:
        """Append records with their line numbers; return how many keys their lines held (kind included)."""
        kinds = [_KIND_OF[type(r)] for r in records]
        if len(set(kinds)) == 1:
            groups = {kinds[0]: (records, numbers)}
        else:
            groups = {}
            for kind in set(kinds):
                where = [i for i, k in enumerate(kinds) if k == kind]
                groups[kind] = ([records[i] for i in where], [numbers[i] for i in where])
        keys = 0
        for kind, (picked, lines) in groups.items():
            names = record_fields(kind)
            keys += len(picked) * (len(names) + 1)
            for name, column in self.values[kind].items():
                values = list(map(_GETTERS[kind][name], picked))
                if name in _OPTIONAL[kind]:
                    keys -= values.count(msgspec.UNSET)
                if name in SHARED_NAMES:
                    same = self.strings.setdefault
                    values = [same(v, v) if type(v) is str else v for v in values]
                column.extend(values)
            self.lines[kind].extend(lines)
        return keys


_FAST_MODEL = _check.fast_model(Record)  # the models without string patterns: checked per distinct value
_FAST_DECODER = msgspec.json.Decoder(_FAST_MODEL)
_KIND_OF: dict[type, str] = {cls: kind for kind, cls in RECORD_TYPES.items()} | {
    cls: cls.__struct_config__.tag for cls in typing.get_args(_FAST_MODEL)
}
_PATTERNS = {kind: _check.pattern_fields(cls) for kind, cls in RECORD_TYPES.items()}
_GETTERS = {kind: {name: attrgetter(name) for name in record_fields(kind)} for kind in RECORD_KINDS}
_OPTIONAL = {
    kind: frozenset(
        name
        for name, default in zip(
            cls.__struct_fields__[len(cls.__struct_fields__) - len(cls.__struct_defaults__) :],
            cls.__struct_defaults__,
            strict=True,
        )
        if default is msgspec.UNSET
    )
    for kind, cls in RECORD_TYPES.items()
}


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield (first line number, block of whole lines); an oversized line is yielded alone, cut short.

    A line over MAX_LINE_BYTES is yielded as its first MAX_LINE_BYTES + 1 bytes (so the caller sees
    it is too long) and the rest of it is skipped without being held in memory.
    """
    number = 1
    carry = b""
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(BLOCK_BYTES)
            if not chunk:
                break
            buf = carry + chunk
            end = buf.rfind(b"\n") + 1
            if end == 0:
                if len(buf) > MAX_LINE_BYTES:
                    yield number, buf[: MAX_LINE_BYTES + 1] + b"\n"
                    number += 1
                    _skip_line(fh)
                    carry = b""
                else:
                    carry = buf
                continue
            block, carry = buf[:end], buf[end:]
            yield number, block
            number += block.count(b"\n")
    if carry:
        yield number, carry + b"\n"


def _skip_line(fh: Any) -> None:
    while True:
        more = fh.readline(MAX_LINE_BYTES)
        if not more or more.endswith(b"\n"):
            return


def _decode_block(block: bytes, first: int, source: str, cols: _Columns, problems: _Problems) -> None:
    """Decode one block of whole lines; fall back to line-by-line only when something is wrong."""
    lines = block.split(b"\n")[:-1]
    records: list[Record] | None = None
    if lines and all(lines) and max(map(len, lines)) <= MAX_LINE_BYTES:
        try:
            records = _FAST_DECODER.decode_lines(block)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            records = None
    if records is None or len(records) != len(lines):
        _decode_lines_one_by_one(lines, first, source, cols, problems)
        return
    keys = cols.add(records, range(first, first + len(lines)))
    quoted = block.count(b'":')
    if (
        quoted - block.count(b'\\":') != keys
        or _ESCAPED_BACKSLASH_KEY in block
        or (block.count(b":") != quoted and any(gap in block for gap in _SPACED_COLON))
    ):
        _check_duplicate_keys(lines, first, source, problems)
    cols.digests += b"".join([_sha256(line + b"\n").digest() for line in lines])


def _sorted_digests(digests: bytearray) -> bytes:
    """The 32-byte digests in byte order, joined (numpy sorts fixed-width bytes as bytes compare)."""
    return np.sort(np.frombuffer(bytes(digests), dtype="S32")).tobytes()


def _decode_lines_one_by_one(
    lines: Sequence[bytes], first: int, source: str, cols: _Columns, problems: _Problems
) -> None:
    for offset, line in enumerate(lines):
        rec = _decode_line(line, first + offset, source, problems)
        if rec is not None:
            cols.add([rec], [first + offset])
            cols.digests += line_digest(line)


# where counting `":` could miss a key: whitespace before a colon, a key ending in an escaped backslash
_SPACED_COLON = (b" :", b"\t:", b"\r:")  # searched only when some colon of the block is not after a quote
_ESCAPED_BACKSLASH_KEY = b'\\\\":'


def _check_duplicate_keys(lines: Sequence[bytes], first: int, source: str, problems: _Problems) -> None:
    """Check exactly the lines that could name a key twice; the others cannot.

    Each key of a compact JSON object is followed by an unescaped `":`, and inside a string every `"`
    is escaped (`\":`). So a block whose unescaped `":` outnumber its records' keys named a key twice.
    Where that count cannot be trusted (whitespace before a colon, a key ending in an escaped
    backslash) or does not match, each line is decoded again by a decoder that refuses duplicates.
    """
    for offset, line in enumerate(lines):
        if b'":' in line:
            try:
                _check.loads_strict(line.decode("utf-8"))
            except _check.DuplicateKeyError as exc:
                problems.add(source, str(exc), line=first + offset)
            except ValueError:
                pass  # it decoded above; only duplicate keys are asked about here


def _decode_line(line: bytes, number: int, source: str, problems: _Problems) -> Record | None:
    """One line on the slow path: every problem located, or the record."""
    if len(line) > MAX_LINE_BYTES:
        problems.add(
            source,
            f"line longer than {MAX_LINE_BYTES} bytes; one record per line, each well under 1 MiB",
            line=number,
        )
        return None
    if number == 1 and line.startswith(_check.UTF8_BOM):
        problems.add(source, "starts with a UTF-8 byte order mark; save it as UTF-8 without BOM", line=number)
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.add(source, f"not valid UTF-8 at byte {exc.start}", line=number)
        return None
    if not text.strip():
        problems.add(source, "empty line; records.jsonl holds one JSON object per line", line=number)
        return None
    try:
        obj = _check.loads_strict(text)
    except _check.LimitError as exc:
        problems.add(source, str(exc), line=number)
        return None
    except ValueError as exc:
        hint = "; a truncated write leaves a broken last line: delete it or re-run with --resume"
        problems.add(source, f"{exc}{hint}", line=number)
        return None
    if not isinstance(obj, dict):
        problems.add(source, 'must be a JSON object with a "kind"', line=number)
        return None
    kind = obj.get("kind")
    if kind not in RECORD_TYPES:
        problems.add(
            source, f"unknown kind {kind!r}; use one of {', '.join(RECORD_KINDS)}", line=number, key="kind"
        )
        return None
    found = _check.check(obj, RECORD_TYPES[kind])
    for key, message in found:
        problems.add(source, message, line=number, key=key)
    return None if found else msgspec.convert(obj, RECORD_TYPES[kind], strict=True)
