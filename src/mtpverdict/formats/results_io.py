"""Reading and writing results directories: a strict streaming loader into tables, a crash-safe writer.

The loader decodes records.jsonl in blocks with msgspec (typed, C speed), checks what types cannot say
(times in order, counts that add up, arms and workloads of campaign.json, duplicates) column-wise, and
only for a record that breaks something computes the `file:line: key: message` lines one by one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import typing
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import numpy.typing as npt

from mtpverdict._jsonio import atomic_write, canonical, record_line
from mtpverdict.errors import InputError, Problem, ResultsError
from mtpverdict.formats import _check
from mtpverdict.formats.results import (
    ABSENT_DEFAULTS,
    RECORD_KINDS,
    RECORD_TYPES,
    SERVER_REQUEST_FIELDS,
    Campaign,
    Record,
    as_builtins,
    record_fields,
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


# ---------------------------------------------------------------------------------------------------
# campaign.json


def parse_campaign(obj: Any, source: str) -> Campaign:
    """Validate a campaign.json object; raise ResultsError listing every problem (file and key)."""
    if not isinstance(obj, dict):
        raise ResultsError([Problem(source, "must hold one JSON object")])
    problems = _check.check(obj, Campaign)
    if not problems:
        campaign = msgspec.convert(obj, Campaign, strict=True)
        problems = _campaign_problems(campaign)
    if problems:
        raise ResultsError([Problem(source, message, key=key) for key, message in problems])
    arms = tuple(sorted(campaign.arms, key=lambda a: (a.order, a.name)))
    return msgspec.structs.replace(campaign, arms=arms)


def _campaign_problems(campaign: Campaign) -> list[_check.Located]:
    """What the types cannot say: speculation per role, unique names and orders, a control per family."""
    out: list[_check.Located] = []
    for i, arm in enumerate(campaign.arms):
        if arm.is_control and not (arm.spec.off and not arm.spec.k):
            out.append((f"arms[{i}].spec", "a control arm must run with speculation off (method null, k 0)"))
        if not arm.is_control and (arm.spec.off or arm.spec.k == 0):
            out.append(
                (
                    f"arms[{i}].spec",
                    "a candidate arm needs a speculative method and k >= 1 (k null when not recorded)",
                )
            )
    if not campaign.arms:
        out.append(("arms", "no arms; list at least one control and one candidate"))
    if not campaign.workloads:
        out.append(("workloads", "no workloads; list at least one"))
    out.extend(_arm_set_problems(campaign))
    ids = [w.id for w in campaign.workloads]
    out.extend(
        ("workloads", f"workload id {dup!r} appears twice; ids must be unique")
        for dup in sorted({w for w in ids if ids.count(w) > 1})
    )
    return out


def _arm_set_problems(campaign: Campaign) -> list[_check.Located]:
    arms = campaign.arms
    names = Counter(a.name for a in arms)  # counted once: list.count per arm was quadratic
    out: list[_check.Located] = [
        ("arms", f"arm name {dup!r} appears twice; names must be unique")
        for dup in sorted(n for n, times in names.items() if times > 1)
    ]
    orders = Counter(a.order for a in arms)
    out.extend(
        ("arms", f"two arms share order {order}; each arm boots at its own position")
        for order in sorted(o for o, times in orders.items() if times > 1)
    )
    if arms and not any(a.is_control for a in arms):
        out.append(
            (
                "arms",
                'no control arm; add an arm with role "control" and speculation off '
                "(e.g. off_A first and off_B last)",
            )
        )
    for family in campaign.families:
        members = [a for a in arms if a.family == family]
        if any(not a.is_control for a in members) and not any(a.is_control for a in members):
            out.append(("arms", f"family {family!r} has candidates but no control arm to compare with"))
    return out


def load_campaign(directory: Path) -> tuple[Campaign, str]:
    """Read and validate campaign.json; return it and the SHA-256 of its content."""
    path = directory / CAMPAIGN_FILE
    source = str(path)
    try:
        data = _check.read_document(path, what="campaign.json")
    except InputError as exc:
        if exc.problems[0].message == "not found":
            message = "not found; a results directory needs campaign.json (see docs/results-format.md)"
            if directory.is_dir() and any(directory.glob("*.json")):
                message += (  # what a folder of `vllm bench serve --save-result` files needs first
                    "; for `vllm bench serve --save-result` files, make one with: mtpverdict import "
                    f"vllm-bench {shlex.quote(str(directory))}/*.json --arm NAME --out RESULTS"
                )
            raise ResultsError([Problem(source, message)]) from None
        raise ResultsError(exc.problems) from None
    text = _text(data, source)
    try:
        obj = _check.loads_strict(text)
    except ValueError as exc:
        raise ResultsError([Problem(source, str(exc), line=_check.json_line(exc))]) from None
    campaign = parse_campaign(obj, source)
    return campaign, content_sha256(obj)


def _text(data: bytes, source: str) -> str:
    try:
        return _check.text_of(data, source)
    except InputError as exc:
        raise ResultsError(exc.problems) from None


# ---------------------------------------------------------------------------------------------------
# records.jsonl: decoding in blocks


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


# ---------------------------------------------------------------------------------------------------
# records.jsonl: what the types cannot say


def record_problems(kind: str, rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    """Cross-field checks of one record (absent optional keys at their defaults)."""
    checks = {
        "request": _request_problems,
        "acceptance": _acceptance_problems,
        "boot": _boot_problems,
        "summary": _summary_problems,
    }
    out = checks[kind](rec) if kind in checks else []
    for key in ("raw", "log"):
        value = rec.get(key)
        if isinstance(value, str) and not (safe_relative(value) and value.startswith(RAW_DIR + "/")):
            out.append(
                (key, f"{value[:80]!r} must be a relative path under {RAW_DIR}/ inside the results directory")
            )
    return out


def _request_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    t0, t1, t2 = rec["t_start"], rec["t_first"], rec["t_end"]
    if rec["status"] == "ok":
        out.extend(
            (key, "must be set when status is ok")
            for key in ("t_first", "t_end", "completion_tokens")
            if rec[key] is None
        )
        if rec["completion_tokens"] is not None and rec["completion_tokens"] < 1:
            out.append(("completion_tokens", "must be >= 1 when status is ok"))
    elif not rec.get("error"):
        out.append(("error", "must say what failed when status is error"))
    if t1 is not None and t1 + TIME_SLACK < t0:
        out.append(("t_first", f"is before t_start ({t1} < {t0}); times must not be inverted"))
    if t2 is not None and t1 is not None and t2 + TIME_SLACK < t1:
        out.append(("t_end", f"is before t_first ({t2} < {t1}); times must not be inverted"))
    if t2 is not None and t1 is None:
        out.append(("t_first", "is null while t_end is set"))
    if rec["stream"] >= rec["concurrency"]:
        out.append(("stream", f"must be below concurrency {rec['concurrency']}"))
    return out


def _acceptance_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    drafted, accepted, drafts = rec["draft_tokens"], rec["accepted_tokens"], rec["drafts"]
    if drafted is not None and accepted is not None and accepted > drafted:
        out.append(("accepted_tokens", f"{accepted} exceeds draft_tokens {drafted}"))
    if drafts is not None and drafted is not None and drafts > drafted:
        out.append(("drafts", f"{drafts} exceeds draft_tokens {drafted}"))
    out.extend(_position_problems(rec))
    mal = rec["mean_acceptance_length"]
    if mal is not None and mal < 1:
        out.append(("mean_acceptance_length", f"{mal} is below 1 (it counts the bonus token)"))
    has_counts = drafted is not None and accepted is not None
    has_rates = rec["per_position_rate"] is not None or rec["acceptance_rate"] is not None
    if rec["status"] == "ok" and not (has_counts or has_rates):
        out.append(
            (
                None,
                "an acceptance record needs draft_tokens and accepted_tokens, or per_position_rate, "
                "or acceptance_rate",
            )
        )
    if rec["status"] == "void" and not rec["error"]:
        out.append(("error", "must say why the window is void"))
    if rec["scoped"] == "run" and rec["rep"] is None:
        out.append(("rep", "must be set when scoped is run"))
    return out


def _position_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    per_pos, accepted, drafts = rec["accepted_per_position"], rec["accepted_tokens"], rec["drafts"]
    out: list[tuple[str | None, str]] = []
    if per_pos is not None:
        if accepted is not None and sum(per_pos) != accepted:
            out.append(("accepted_per_position", f"sums to {sum(per_pos)}, not accepted_tokens {accepted}"))
        if drafts is not None and any(c > drafts for c in per_pos):
            out.append(("accepted_per_position", f"a position count exceeds drafts {drafts}"))
        if drafts is None:
            out.append(("drafts", "must be set when accepted_per_position is given"))
        if rec["per_position_rate"] is not None:
            out.append(("per_position_rate", "give counts or rates, not both"))
    return out


def _boot_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    if rec["status"] == "failed" and not rec["error"]:
        return [("error", "must say why the boot failed")]
    return []


def _summary_problems(rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    out: list[tuple[str | None, str]] = []
    lo, mid, hi = rec["min"], rec["median"], rec["max"]
    if lo is not None and lo > mid + TIME_SLACK:
        out.append(("min", f"{lo} exceeds median {mid}"))
    if hi is not None and hi + TIME_SLACK < mid:
        out.append(("max", f"{hi} is below median {mid}"))
    if rec["distinct_outputs"] is not None and rec["distinct_outputs"] > rec["n"]:
        out.append(("distinct_outputs", f"exceeds n {rec['n']}"))
    return out


def _as_float(values: list[Any]) -> npt.NDArray[np.float64]:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _request_suspects(cols: dict[str, list[Any]]) -> npt.NDArray[np.bool_]:
    """Rows that may break a request check: a superset of _request_problems, computed column-wise."""
    t0, t1, t2 = (_as_float(cols[k]) for k in ("t_start", "t_first", "t_end"))
    tokens = _as_float(cols["completion_tokens"])
    ok = np.array([s == "ok" for s in cols["status"]], dtype=bool)
    errors = np.array([bool(e) for e in cols["error"]], dtype=bool)
    missing = np.isnan(t1) | np.isnan(t2) | np.isnan(tokens) | (tokens < 1)
    inverted = (t1 + TIME_SLACK < t0) | (t2 + TIME_SLACK < t1) | (~np.isnan(t2) & np.isnan(t1))
    stream = np.array(cols["stream"], dtype=float) >= np.array(cols["concurrency"], dtype=float)
    suspects: npt.NDArray[np.bool_] = (ok & missing) | (~ok & ~errors) | inverted | stream
    return suspects


def _fill_absent(kind: str, cols: dict[str, list[Any]]) -> None:
    """Replace UNSET (an absent optional key) by the value it stands for."""
    defaults = ABSENT_DEFAULTS.get(kind, {})
    unset = msgspec.UNSET
    for name, values in cols.items():
        if values.count(unset):
            default = defaults.get(name)
            cols[name] = [default if v is unset else v for v in values]


def _pattern_checks(
    kind: str, cols: dict[str, list[Any]], lines: list[int], source: str, problems: _Problems
) -> set[int]:
    """String patterns, checked once per distinct value (the fast decoder skipped them)."""
    bad: set[int] = set()
    for name, pattern in _PATTERNS[kind].items():
        search = _check.pattern_matcher(pattern)
        wrong = {v for v in set(cols[name]) if isinstance(v, str) and not search(v)}
        for i, value in enumerate(cols[name]) if wrong else ():
            if value in wrong:
                problems.add(source, f"{value[:80]!r} does not match {pattern}", line=lines[i], key=name)
                bad.add(i)
    return bad


def _cross_checks(
    kind: str, cols: dict[str, list[Any]], lines: list[int], source: str, problems: _Problems
) -> set[int]:
    """Run the per-record checks where needed; return the positions of records that broke one."""
    names = list(cols)
    rows: list[int] = list(range(len(lines)))
    if kind == "request" and lines:
        rows = np.flatnonzero(_request_suspects(cols)).tolist()
    bad: set[int] = set()
    for i in rows:
        rec = {name: cols[name][i] for name in names}
        for key, message in record_problems(kind, rec):
            problems.add(source, message, line=lines[i], key=key)
            bad.add(i)
    return bad


# ---------------------------------------------------------------------------------------------------
# records.jsonl: loading


ENUM_COLUMNS = ("source", "scoped", "metric")  # kept as plain strings in the tables


def load_results(directory: str | os.PathLike[str]) -> Results:
    """Load and validate a results directory; raise ResultsError listing every problem found."""
    root = Path(directory)
    if not root.is_dir():
        raise ResultsError(
            [
                Problem(
                    str(root),
                    "not a directory; pass a results directory holding campaign.json and records.jsonl",
                )
            ]
        )
    campaign, campaign_sha = load_campaign(root)
    path = root / RECORDS_FILE
    source = str(path)
    if not path.exists():
        raise ResultsError(
            [Problem(source, "not found; write one JSON record per line (see docs/results-format.md)")]
        )
    if not path.is_file():
        raise ResultsError([Problem(source, "is not a regular file (a device, FIFO or directory); refused")])
    return _build(campaign, campaign_sha, _lines(path), source, root)


def results_from_records(
    campaign_obj: dict[str, Any], records: Sequence[dict[str, Any]], label: str = "<memory>"
) -> Results:
    """Validate and tabulate a campaign and records held in memory (simulation, importers' checks)."""
    campaign = parse_campaign(campaign_obj, f"{label}/{CAMPAIGN_FILE}")
    text = "".join(record_line(rec) for rec in records).encode("utf-8")
    return _build(
        campaign,
        content_sha256(campaign_obj),
        iter([(1, text)] if text else []),
        f"{label}/{RECORDS_FILE}",
        None,
    )


def _build(
    campaign: Campaign, campaign_sha: str, blocks: Iterator[tuple[int, bytes]], source: str, root: Path | None
) -> Results:
    problems = _Problems()
    cols = _Columns()
    for first, block in blocks:
        _decode_block(block, first, source, cols, problems)
    frames = _frames(campaign, cols, source, problems)
    problems.raise_if_any()
    records_sha = hashlib.sha256(_sorted_digests(cols.digests)).hexdigest()
    return Results(
        path=source.rsplit("/", 1)[0] if root is None else str(root),
        campaign=campaign,
        requests=frames["request"],
        acceptance=frames["acceptance"],
        boots=frames["boot"],
        coherence=frames["coherence"],
        likelihood=frames["likelihood"],
        summaries=frames["summary"],
        campaign_sha256=campaign_sha,
        records_sha256=records_sha,
        warnings=tuple(_warnings(campaign, frames, root)),
    )


def _frames(campaign: Campaign, cols: _Columns, source: str, problems: _Problems) -> dict[str, pd.DataFrame]:
    """One sorted table per kind, after the checks that need several columns or several records."""
    arms = {a.name for a in campaign.arms}
    workloads = {w.id for w in campaign.workloads}
    frames: dict[str, pd.DataFrame] = {}
    for kind in RECORD_KINDS:
        values = cols.values[kind]
        lines = cols.lines[kind]
        _fill_absent(kind, values)
        for name in ENUM_COLUMNS:
            if name in values:
                values[name] = [None if v is None else str(v) for v in values[name]]
        bad = _pattern_checks(kind, values, lines, source, problems)
        bad |= _cross_checks(kind, values, lines, source, problems)
        frame = _frame(values, list(record_fields(kind)))
        if kind == "request":
            _numeric_columns(frame)
        frame["record_line"] = lines
        bad |= _membership(frame, arms, workloads, source, problems)
        _duplicates(kind, frame, bad, source, problems)
        keys = list(TABLE_KEYS[kind])
        if len(frame):
            frame = frame.sort_values(keys, na_position="first", kind="mergesort").reset_index(drop=True)
        frames[kind] = frame
    return frames


def _frame(values: dict[str, list[Any]], columns: list[str]) -> pd.DataFrame:
    """The table of one kind. Each list becomes a column (pandas' own inference, as the DataFrame
    constructor does it) and is released at once, so the lists of Python objects and the frame's
    consolidated arrays are never all held together: at a million requests that was the load's peak."""
    import pandas as pd

    if not values[columns[0]]:  # no rows: the columns pandas gives an empty table (float64, as ever)
        frame = pd.DataFrame(values, columns=columns)
    else:
        series = {name: pd.Series(values.pop(name)) for name in columns}
        frame = pd.DataFrame(series, columns=columns, copy=False)
    values.clear()
    return frame


# Optional numeric request fields: float columns (NaN where absent) instead of Python objects, which
# cost three times the memory on a large campaign (about 200 MB at a million requests).
NUMERIC_REQUEST_FIELDS = (
    "chunks",
    "bunched_chunks",
    *(f for f in SERVER_REQUEST_FIELDS if f != "spec_accepted_per_position"),
)


def _numeric_columns(frame: pd.DataFrame) -> None:
    for name in NUMERIC_REQUEST_FIELDS:
        if name in frame and frame[name].dtype == object:
            frame[name] = frame[name].astype("float64")


def _membership(
    frame: pd.DataFrame, arms: set[str], workloads: set[str], source: str, problems: _Problems
) -> set[int]:
    bad: set[int] = set()
    if not len(frame):
        return bad
    lines = frame["record_line"].to_numpy(dtype=int)
    unknown = ~frame["arm"].isin(arms).to_numpy(dtype=bool)
    for i in np.flatnonzero(unknown).tolist():
        problems.add(
            source,
            f"arm {frame['arm'].iloc[i]!r} is not in {CAMPAIGN_FILE}; add it there or fix the name",
            line=int(lines[i]),
            key="arm",
        )
        bad.add(i)
    if "workload" in frame:
        stray = (frame["workload"].notna() & ~frame["workload"].isin(workloads)).to_numpy(dtype=bool)
        for i in np.flatnonzero(stray).tolist():
            problems.add(
                source,
                f"workload {frame['workload'].iloc[i]!r} is not in {CAMPAIGN_FILE}",
                line=int(lines[i]),
                key="workload",
            )
            bad.add(i)
    return bad


def _duplicates(kind: str, frame: pd.DataFrame, bad: set[int], source: str, problems: _Problems) -> None:
    """Two records with one key (and, for boots, two boots at one position) are refused."""
    good = frame.drop(index=sorted(bad)) if bad else frame
    keys = list(TABLE_KEYS[kind])
    dup = good.duplicated(keys, keep="first")
    lines = good["record_line"].to_numpy(dtype=int)
    if dup.any():
        first = (
            good.groupby(keys, dropna=False, sort=False)["record_line"].transform("first").to_numpy(dtype=int)
        )
        for i in np.flatnonzero(dup.to_numpy(dtype=bool)).tolist():
            problems.add(
                source,
                f"duplicate {kind} record (same {', '.join(keys)} as line {first[i]}); keep one",
                line=int(lines[i]),
            )
    if kind == "boot" and len(good):
        _boot_orders(good[~dup], source, problems)


def _boot_orders(boots: pd.DataFrame, source: str, problems: _Problems) -> None:
    owners: dict[int, tuple[str, int]] = {}
    for arm, boot, order, line in zip(
        boots["arm"], boots["boot"], boots["order"], boots["record_line"], strict=True
    ):
        owner = owners.setdefault(int(order), (str(arm), int(boot)))
        if owner != (str(arm), int(boot)):
            problems.add(
                source,
                f"boot order {order} is already used by {owner[0]} boot {owner[1]}; "
                "each boot has its own position",
                line=int(line),
                key="order",
            )


def _warnings(campaign: Campaign, tables: dict[str, pd.DataFrame], root: Path | None) -> list[str]:
    """Things that are legal but weaken the evidence; returned as lines, never printed here."""
    out: list[str] = []
    booted = set(zip(tables["boot"]["arm"], tables["boot"]["boot"], strict=True))
    used: set[tuple[str, int]] = set()
    for kind in ("request", "acceptance", "coherence", "likelihood"):
        pairs = tables[kind][["arm", "boot"]].drop_duplicates()
        used |= set(zip(pairs["arm"], pairs["boot"], strict=True))
    missing = sorted(used - booted)
    if missing and len(tables["boot"]):
        shown = ", ".join(f"{a} boot {b}" for a, b in missing[:5])
        out.append(f"records refer to boots with no boot record ({shown}); their boot order is unknown")
    if not sum(len(tables[kind]) for kind in ("request", "summary", "acceptance")):
        out.append(
            "the directory holds no measurements (no request, summary or acceptance record): a decision "
            "on it is inconclusive under every policy"
        )
    with_records: set[str] = set()
    for kind in ("request", "summary", "acceptance", "boot", "coherence"):
        with_records.update(str(a) for a in tables[kind]["arm"].unique())
    out.extend(f"arm {arm.name} has no records" for arm in campaign.arms if arm.name not in with_records)
    if len(tables["summary"]):
        out.append("summary records stand for runs whose raw data is lost: weaker evidence")
    for kind, key in (("acceptance", "raw"), ("boot", "log")):
        out.extend(
            f"{value} is referenced but not present in the results directory"
            for value in tables[kind][key]
            if isinstance(value, str) and root is not None and not (root / value).is_file()
        )
    return sorted(set(out))


# ---------------------------------------------------------------------------------------------------
# writing

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


# campaign.json keys a resume may change: the campaign file's hash (`source`) and, under --until-resolved,
# the planned looks, both of which follow `boots` when it is raised to take a decision's next step
RESUMABLE_KEYS = ("source", "sequential_looks")


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
        found = record_errors(record)
        if found:
            raise ValueError(f"invalid {record.get('kind')} record: {'; '.join(found)}")
        key = record_key(record)
        if key in self.keys:
            return False
        data = record_line(record).encode("utf-8")
        written = os.write(self._fd, data)
        if written != len(data):  # a short write on a full disk: remove the fragment, then fail
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            raise OSError(28, "short write to records.jsonl (disk full?)")
        if self.sync_each:
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
