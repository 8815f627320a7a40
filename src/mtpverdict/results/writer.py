"""Crash-safe writer of results directories: atomic campaign.json, fsync'd one-line record appends."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mtpverdict._jsonio import atomic_write, canonical, record_line
from mtpverdict.errors import Problem, ResultsError
from mtpverdict.results.load import (
    _DEFAULTS,
    CAMPAIGN_FILE,
    RAW_DIR,
    RECORDS_FILE,
    TABLE_KEYS,
    _record_problems,
    safe_relative,
)
from mtpverdict.results.spec import RECORD_FIELDS, check_object

TORN_FILE = "torn-lines.txt"  # under raw/: a partial last line found on reopening is kept here


def record_key(record: dict[str, Any]) -> tuple[Any, ...]:
    """The identity of a record: two records with one key are duplicates."""
    kind = record["kind"]
    full = {**_DEFAULTS[kind], **record}
    return (kind, *(tuple(v) if isinstance(v, list) else v for v in (full[c] for c in TABLE_KEYS[kind])))


class ResultsWriter:
    """Appends records to a results directory so that an interruption at any instant loses nothing.

    Each record is validated, written as one line with a single write() on an O_APPEND descriptor,
    and fsync'd before append() returns. Reopening a directory whose last line was torn by a crash
    moves that fragment to raw/torn-lines.txt and truncates it off, so the file stays valid JSONL.
    """

    def __init__(self, directory: str | os.PathLike[str], campaign: dict[str, Any]) -> None:
        self.root = Path(directory)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / RAW_DIR).mkdir(exist_ok=True)
        campaign_path = self.root / CAMPAIGN_FILE
        text = canonical(campaign)
        if campaign_path.exists():
            existing = json.loads(campaign_path.read_text(encoding="utf-8"))
            if existing != json.loads(text):
                raise ResultsError(
                    [
                        Problem(
                            str(campaign_path),
                            "differs from the campaign being "
                            "written; resume with the same campaign file or use a new "
                            "results directory",
                        )
                    ]
                )
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
                        rec = json.loads(line)
                        self.keys.add(record_key(rec))
                        self.records.append(rec)
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

    def has(self, record: dict[str, Any]) -> bool:
        return record_key(record) in self.keys

    def append(self, record: dict[str, Any]) -> bool:
        """Validate and durably append one record; return False when an identical key is present."""
        kind = record.get("kind")
        if kind not in RECORD_FIELDS:
            raise ValueError(f"unknown record kind {kind!r}")
        body = {k: v for k, v in record.items() if k != "kind"}
        found = [f"{k}: {m}" for k, m in check_object(body, RECORD_FIELDS[kind])]
        if not found:
            found = [f"{k}: {m}" for k, m in _record_problems(kind, {**_DEFAULTS[kind], **body})]
        if found:
            raise ValueError(f"invalid {kind} record: {'; '.join(found)}")
        key = record_key(record)
        if key in self.keys:
            return False
        data = record_line(record).encode("utf-8")
        written = os.write(self._fd, data)
        if written != len(data):  # a short write on a full disk: remove the fragment, then fail
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            raise OSError(28, "short write to records.jsonl (disk full?)")
        os.fsync(self._fd)
        self.keys.add(key)
        self.records.append(record)
        return True

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
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
