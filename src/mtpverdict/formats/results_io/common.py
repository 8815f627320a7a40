"""A results directory's names, limits and loaded tables, and the hashes its files are known by."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from mtpverdict._jsonio import record_line
from mtpverdict.errors import Problem, ResultsError
from mtpverdict.formats.results import (
    RECORD_KINDS,
    Campaign,
)

if TYPE_CHECKING:
    import pandas as pd

CAMPAIGN_FILE = "campaign.json"
RECORDS_FILE = "records.jsonl"
RAW_DIR = "raw"
MAX_LINE_BYTES = 1 << 20  # one record is small; a longer line is corrupt, and is skipped unread
BLOCK_BYTES = 8 << 20  # records.jsonl is decoded this much at a time: bounded memory for any file size
MAX_PROBLEMS_KEPT = 200
TIME_SLACK = 1e-9  # seconds; timestamps written with float rounding may tie

TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "request": ("arm", "boot", "workload", "concurrency", "warmup", "rep", "stream"),
    "acceptance": ("arm", "boot", "workload", "concurrency", "rep", "source", "raw", "line"),
    "boot": ("arm", "boot"),
    "coherence": ("arm", "boot", "case"),
    "likelihood": ("arm", "boot", "rep"),
    "summary": ("arm", "boot", "workload", "concurrency", "metric"),
}


@dataclass(frozen=True, slots=True)
class Results:
    """A loaded results directory: the campaign, one table per record kind, and input hashes.

    Tables are sorted by their key columns, so the order of lines in records.jsonl never matters.
    """

    path: str
    campaign: Campaign
    requests: pd.DataFrame
    acceptance: pd.DataFrame
    boots: pd.DataFrame
    coherence: pd.DataFrame
    likelihood: pd.DataFrame
    summaries: pd.DataFrame
    campaign_sha256: str
    records_sha256: str
    warnings: tuple[str, ...] = field(default=())

    def table(self, kind: str) -> pd.DataFrame:
        """The table of one record kind."""
        return {
            "request": self.requests,
            "acceptance": self.acceptance,
            "boot": self.boots,
            "coherence": self.coherence,
            "likelihood": self.likelihood,
            "summary": self.summaries,
        }[kind]

    def counts(self) -> dict[str, dict[str, int]]:
        """Records per kind and arm, for `validate`."""
        out: dict[str, dict[str, int]] = {}
        for kind in RECORD_KINDS:
            table = self.table(kind)
            per_arm = table.groupby("arm").size().to_dict() if len(table) else {}
            out[kind] = {str(k): int(v) for k, v in sorted(per_arm.items())}
        return out

    @property
    def measured_records(self) -> int:
        """Records that measure something (requests, summaries, acceptance windows)."""
        return int(len(self.requests) + len(self.summaries) + len(self.acceptance))


class _Problems:
    """Gathers problems, keeping the first MAX_PROBLEMS_KEPT (by line) and counting the rest."""

    def __init__(self) -> None:
        self.kept: list[Problem] = []
        self.total = 0

    def add(self, source: str, message: str, line: int | None = None, key: str | None = None) -> None:
        self.total += 1
        self.kept.append(Problem(source=source, message=message, line=line, key=key))

    def raise_if_any(self) -> None:
        if self.total:
            ordered = sorted(self.kept, key=lambda p: p.line or 0)[:MAX_PROBLEMS_KEPT]
            raise ResultsError(ordered, total=self.total)


def safe_relative(path: str) -> bool:
    """True when a path stored in results stays inside the results directory."""
    if not path or "\\" in path or "\x00" in path:
        return False
    pure = PurePosixPath(path)
    return not pure.is_absolute() and ".." not in pure.parts


def content_sha256(obj: Any) -> str:
    """SHA-256 of a JSON value's canonical text (sorted keys, compact): formatting does not change it."""
    return hashlib.sha256(record_line(obj).encode("utf-8")).hexdigest()


_sha256 = hashlib.sha256


def line_digest(line: bytes) -> bytes:
    """The hash of one records.jsonl line: its bytes without the line ending.

    records_sha256 hashes the sorted line digests, so reordering lines changes nothing and any change
    of a byte does; a line written by the collector (canonical JSON) hashes as its content did before.
    """
    return hashlib.sha256(line.rstrip(b"\r\n") + b"\n").digest()
