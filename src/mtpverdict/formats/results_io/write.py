"""Writing a results directory: campaign.json once, records appended crash-safe, a torn tail kept aside."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtpverdict._jsonio import atomic_write, canonical, record_line
from mtpverdict.errors import Problem, ResultsError
from mtpverdict.formats import _check
from mtpverdict.formats.results import (
    ABSENT_DEFAULTS,
    RECORD_TYPES,
    Record,
    as_builtins,
    record_fields,
)
from mtpverdict.formats.results_io.checks import (
    record_problems,
)
from mtpverdict.formats.results_io.common import (
    CAMPAIGN_FILE,
    RAW_DIR,
    RECORDS_FILE,
    TABLE_KEYS,
    safe_relative,
)

TORN_FILE = "torn-lines.txt"  # under raw/: a partial last line found on reopening is kept here


def _with_defaults(record: dict[str, Any]) -> dict[str, Any]:
    kind = record["kind"]
    defaults = ABSENT_DEFAULTS.get(kind, {})
    return {name: record.get(name, defaults.get(name)) for name in record_fields(kind)}


def record_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """The identity of a record: two records with one key are duplicates."""
    full = _with_defaults(record)
    return (
        record["kind"],
        *(tuple(v) if isinstance(v, list) else v for v in (full[c] for c in TABLE_KEYS[record["kind"]])),
    )


def record_errors(record: dict[str, Any] | Record) -> list[str]:
    """`key: message` for everything wrong with one record (empty when it may be written)."""
    obj = as_builtins(record) if not isinstance(record, dict) else record
    kind = obj.get("kind")
    if kind not in RECORD_TYPES:
        return [f"kind: unknown record kind {kind!r}"]
    found = _check.check(obj, RECORD_TYPES[kind])
    if not found:
        found = record_problems(kind, _with_defaults(obj))
    return [f"{key}: {message}" if key else message for key, message in found]


def encoded(record: dict[str, Any]) -> tuple[dict[str, Any], bytes] | str:
    """The record as it is written and its line as UTF-8 bytes, or why it cannot be written. Text that
    is not UTF-8 (a lone surrogate a server's JSON escape can carry) is written as its escape."""
    found = record_errors(record)
    if found:
        return f"invalid {record.get('kind')} record: {'; '.join(found)}"
    try:
        return record, record_line(record).encode("utf-8")
    except UnicodeEncodeError:
        escaped = _utf8(record)
    found = record_errors(escaped)
    if found:
        return f"invalid {record.get('kind')} record once its text is escaped: {'; '.join(found)}"
    return escaped, record_line(escaped).encode("utf-8")


def _utf8(value: Any) -> Any:
    """`value` (JSON-like) with every string's unencodable characters written as backslash escapes."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_utf8(v) for v in value]
    return value


# campaign.json keys a resume may change: the campaign file's hash (`source`) and, under --until-resolved,
# the planned looks, both of which follow `boots` when it is raised to take a decision's next step
RESUMABLE_KEYS = ("source", "sequential_looks", "planned_boots")


def resume_problem(existing: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why a results directory holding the campaign `existing` cannot be continued as `new` (None: it
    can). Only `boots` may change (it moves RESUMABLE_KEYS), and an adaptive campaign keeps at least
    the looks it was planned with, since decide splits alpha over them."""
    same = {k: v for k, v in existing.items() if k not in RESUMABLE_KEYS}
    if same != {k: v for k, v in new.items() if k not in RESUMABLE_KEYS}:
        return (
            "differs from the campaign being written; resume with the same campaign file (only boots may "
            "be raised) and the same --var values, or use a new results directory"
        )
    before, after = existing.get("sequential_looks"), new.get("sequential_looks")
    if (before is None) != (after is None):
        return (
            "was collected with --until-resolved; resume it with --until-resolved"
            if after is None
            else "was collected without --until-resolved; resume it without, or use a new results directory"
        )
    if before is not None and after is not None and after < before:
        return (
            f"a resume with fewer looks ({after}) than the {before} it was planned with would spend alpha "
            f"the campaign already spent: keep boots >= {before}"
        )
    return None


class ResultsWriter:
    """Appends records to a results directory so that an interruption at any instant loses nothing.

    Each record is validated, written as one line with a single write() on an O_APPEND descriptor,
    and fsync'd before append() returns. Reopening a directory whose last line was torn by a crash
    moves that fragment to raw/torn-lines.txt and truncates it off, so the file stays valid JSONL.
    With `sync_each=False` (an importer, which can simply run again) the file is fsync'd once, at
    close: 200,000 records then take seconds, not one disk flush each.
    """

    def __init__(
        self, directory: str | os.PathLike[str], campaign: dict[str, Any], *, sync_each: bool = True
    ) -> None:
        self.sync_each = sync_each
        self.root = Path(directory)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / RAW_DIR).mkdir(exist_ok=True)
        campaign_path = self.root / CAMPAIGN_FILE
        text = canonical(campaign)
        raised = False
        if campaign_path.exists():
            data = _check.read_document(campaign_path, what="campaign.json", error=ResultsError)
            try:
                existing = _check.loads_strict(_check.text_of(data, str(campaign_path), ResultsError))
            except ValueError as exc:
                raise ResultsError([Problem(str(campaign_path), str(exc))]) from None
            new = json.loads(text)
            if existing != new:
                problem = resume_problem(existing, new)
                if problem is not None:
                    raise ResultsError([Problem(str(campaign_path), problem)])
                atomic_write(campaign_path, text)  # a larger boots: the file's hash and looks follow it
                raised = True
        else:
            atomic_write(campaign_path, text)
        self.path = self.root / RECORDS_FILE
        self._repair_torn_tail()
        self.keys: set[tuple[Any, ...]] = set()
        self.records: list[dict[str, Any]] = []
        if self.path.exists():
            with self.path.open("r", encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        rec = _check.loads_strict(line)
                        self.keys.add(record_key(rec))
                        self.records.append(rec)
        if raised:  # boots raised on data that was probably decided on: decide checks the look was counted
            from mtpverdict.formats.looks import append_resume

            append_resume(self.root, sum(1 for r in self.records if r.get("kind") == "boot"))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _repair_torn_tail(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            # find the start of the last (torn) line
            pos = size - 1
            block = 4096
            start = 0
            while pos > 0:
                step = min(block, pos)
                fh.seek(pos - step)
                chunk = fh.read(step)
                idx = chunk.rfind(b"\n")
                if idx >= 0:
                    start = pos - step + idx + 1
                    break
                pos -= step
            fh.seek(start)
            fragment = fh.read()
            torn = self.root / RAW_DIR / TORN_FILE
            with torn.open("ab") as out:
                out.write(fragment + b"\n")
                out.flush()
                os.fsync(out.fileno())
            fh.truncate(start)
            fh.flush()
            os.fsync(fh.fileno())

    def append(self, record: dict[str, Any]) -> bool:
        """Validate and durably append one record; return False when an identical key is present."""
        return self.append_many([record]) == 1

    def append_many(self, records: Sequence[dict[str, Any]]) -> int:
        """Durably append the valid new records with one write and one fsync; return how many were new
        (a key already present, or twice in `records`, is skipped). An invalid record is refused after
        the valid ones are written, with a ValueError naming it: nothing else of the batch is lost.

        One run's request records go together: a run's streams are known only once it ends, so nothing
        is held back that an earlier write would have kept. The batch ends in one fsync; before it, a
        power loss can keep any prefix of the batch's whole lines (still valid JSONL) and a torn last
        line is set aside on reopening. A write or fsync that fails, or a signal during the write,
        leaves no part of the batch in the file; a signal during the fsync leaves it written and known.
        """
        refused: list[str] = []
        new: dict[tuple[Any, ...], bytes] = {}
        kept: list[dict[str, Any]] = []
        for record in records:
            found = encoded(record)
            if isinstance(found, str):
                refused.append(found)
                continue
            written, line = found
            key = record_key(written)
            if key not in self.keys and key not in new:
                new[key] = line
                kept.append(written)
        if new:
            self._write_all(new, kept)
        if refused:
            more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
            raise ValueError(refused[0] + more)
        return len(new)

    def _write_all(self, lines: dict[tuple[Any, ...], bytes], records: list[dict[str, Any]]) -> None:
        """Write the `lines` (by key) at the end of records.jsonl, going on after a short write, know
        their keys and `records`, then fsync them. A failed write or fsync, or a signal during the
        write, removes what of them was written (and forgets it), and the error goes on; a signal
        during the fsync leaves them written and known. (collect holds SIGINT and SIGTERM around its
        appends, collect/context.py, so no signal falls between the write and its bookkeeping.)"""
        data, keys = b"".join(lines.values()), list(lines)
        start, known = os.fstat(self._fd).st_size, len(self.records)
        done = 0
        try:
            while done < len(data):
                written = os.write(self._fd, data[done:] if done else data)
                if written == 0:  # a regular file that takes nothing: no progress can be made
                    raise OSError(errno.EIO, f"{self.path}: the write took no bytes")
                done += written
        except BaseException:
            os.ftruncate(self._fd, start)  # no fragment of the batch stays behind
            raise
        try:
            self.keys.update(keys)
            self.records.extend(records)
            if self.sync_each:
                os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, start)
            self.keys.difference_update(keys)
            del self.records[known:]
            raise

    def raw_path(self, relative: str) -> Path:
        """A path under raw/ for engine logs and metric snapshots; refuses escapes."""
        rel = f"{RAW_DIR}/{relative}"
        if not safe_relative(rel):
            raise ValueError(f"raw path {relative!r} escapes the results directory")
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def close(self) -> None:
        if self._fd >= 0:
            try:
                if not self.sync_each:
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
