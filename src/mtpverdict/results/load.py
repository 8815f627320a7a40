"""Strict, streaming loader for results format v1: validates every line and builds sorted tables."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from mtpverdict._jsonio import record_line
from mtpverdict.errors import Problem, ResultsError
from mtpverdict.results.model import Arm, Campaign, Results, Scope, Spec, Workload
from mtpverdict.results.spec import (
    ARM_FIELDS,
    CAMPAIGN_FIELDS,
    RECORD_FIELDS,
    SCOPE_FIELDS,
    SERVER_REQUEST_FIELDS,
    SPEC_FIELDS,
    WORKLOAD_FIELDS,
    check_object,
)

CAMPAIGN_FILE = "campaign.json"
RECORDS_FILE = "records.jsonl"
RAW_DIR = "raw"
MAX_LINE_BYTES = 1 << 20  # one record is small; a longer line is corrupt, and is skipped unread
MAX_PROBLEMS_KEPT = 200
TIME_SLACK = 1e-9  # seconds; timestamps written with float rounding may tie

# Columns of each table, in order; the key columns sort the table.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    kind: tuple(f.name for f in fields) for kind, fields in RECORD_FIELDS.items()
}
TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "request": ("arm", "boot", "workload", "concurrency", "warmup", "rep", "stream"),
    "acceptance": ("arm", "boot", "workload", "concurrency", "rep", "source", "raw", "line"),
    "boot": ("arm", "boot"),
    "coherence": ("arm", "boot", "case"),
    "likelihood": ("arm", "boot", "rep"),
    "summary": ("arm", "boot", "workload", "concurrency", "metric"),
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "request": {
        "stream": 0,
        "error": None,
        "output_sha256": None,
        "nonce": None,
        "bunched_chunks": None,
        "chunks": None,
        **dict.fromkeys(SERVER_REQUEST_FIELDS),
        "note": None,
    },
    "acceptance": {
        "status": "ok",
        "accepted_per_position": None,
        "per_position_rate": None,
        "acceptance_rate": None,
        "mean_acceptance_length": None,
        "raw": None,
        "line": None,
        "error": None,
        "note": None,
    },
    "boot": {"observed_k": None, "log": None, "note": None},
    "coherence": {"note": None},
    "likelihood": {"note": None},
    "summary": {"boot": None, "distinct_outputs": None, "note": None},
}


class _Collector:
    """Gathers problems, keeping the first MAX_PROBLEMS_KEPT and counting the rest."""

    def __init__(self) -> None:
        self.kept: list[Problem] = []
        self.total = 0

    def add(self, source: str, message: str, line: int | None = None, key: str | None = None) -> None:
        self.total += 1
        if len(self.kept) < MAX_PROBLEMS_KEPT:
            self.kept.append(Problem(source=source, message=message, line=line, key=key))

    def raise_if_any(self) -> None:
        if self.total:
            raise ResultsError(self.kept, total=self.total)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number in JSON; write null or a finite value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)  # one decoder: json.loads builds one per call


def _loads(text: str) -> Any:
    return _DECODER.decode(text)


def safe_relative(path: str) -> bool:
    """True when a path stored in results stays inside the results directory."""
    if not path or "\\" in path or "\x00" in path:
        return False
    pure = PurePosixPath(path)
    return not pure.is_absolute() and ".." not in pure.parts


# ---------------------------------------------------------------------------------------------------
# campaign.json


def _campaign_from(obj: dict[str, Any], source: str, problems: _Collector) -> Campaign | None:
    for key, message in check_object(obj, CAMPAIGN_FIELDS):
        problems.add(source, message, key=key)
    if (
        not isinstance(obj.get("scope"), dict)
        or not isinstance(obj.get("arms"), list)
        or not isinstance(obj.get("workloads"), list)
    ):
        return None
    for key, message in check_object(obj["scope"], SCOPE_FIELDS, "scope."):
        problems.add(source, message, key=key)
    arms: list[Arm] = []
    for i, raw_arm in enumerate(obj["arms"]):
        prefix = f"arms[{i}]."
        if not isinstance(raw_arm, dict):
            continue
        found = check_object(raw_arm, ARM_FIELDS, prefix)
        spec_obj = raw_arm.get("spec")
        if isinstance(spec_obj, dict):
            found += check_object(spec_obj, SPEC_FIELDS, prefix + "spec.")
        for key, message in found:
            problems.add(source, message, key=key)
        if found or not isinstance(spec_obj, dict):
            continue
        method = spec_obj.get("method")
        k = spec_obj.get("k")
        config = spec_obj.get("config")
        spec = Spec(
            method=method,
            k=k,
            config=None if config is None else json.dumps(config, sort_keys=True, separators=(",", ":")),
        )
        role = raw_arm["role"]
        if role == "control" and not (spec.off and not k):
            problems.add(
                source, "a control arm must run with speculation off (method null, k 0)", key=prefix + "spec"
            )
        if role == "candidate" and (spec.off or k == 0):
            problems.add(
                source,
                "a candidate arm needs a speculative method and k >= 1 (k null when not recorded)",
                key=prefix + "spec",
            )
        argv = raw_arm.get("serve_argv")
        arms.append(
            Arm(
                name=raw_arm["name"],
                role=role,
                spec=spec,
                order=raw_arm["order"],
                serve_argv=None if argv is None else tuple(argv),
                family=raw_arm.get("family", "default"),
                labels=tuple(sorted(raw_arm.get("labels", {}).items())),
            )
        )
    workloads: list[Workload] = []
    for i, raw_wl in enumerate(obj["workloads"]):
        if not isinstance(raw_wl, dict):
            continue
        found = check_object(raw_wl, WORKLOAD_FIELDS, f"workloads[{i}].")
        for key, message in found:
            problems.add(source, message, key=key)
        if not found:
            workloads.append(
                Workload(
                    id=raw_wl["id"],
                    prompt_tokens=raw_wl["prompt_tokens"],
                    max_tokens=raw_wl["max_tokens"],
                    expect_identical=raw_wl["expect_identical"],
                    description=raw_wl.get("description"),
                )
            )
    if not obj["arms"]:
        problems.add(source, "no arms; list at least one control and one candidate", key="arms")
    if not obj["workloads"]:
        problems.add(source, "no workloads; list at least one", key="workloads")
    _check_arm_set(arms, source, problems)
    ids = [w.id for w in workloads]
    for dup in sorted({w for w in ids if ids.count(w) > 1}):
        problems.add(source, f"workload id {dup!r} appears twice; ids must be unique", key="workloads")
    if problems.total:
        return None
    scope = obj["scope"]
    return Campaign(
        id=obj["id"],
        title=obj["title"],
        scope=Scope(
            device=scope["device"],
            engine=scope["engine"],
            engine_version=scope["engine_version"],
            model=scope["model"],
            claim=scope["claim"],
        ),
        arms=tuple(sorted(arms, key=lambda a: (a.order, a.name))),
        workloads=tuple(workloads),
        window_tokens=obj["window_tokens"],
        notes=obj.get("notes"),
        synthetic=bool(obj.get("synthetic", False)),
        source=obj.get("source"),
        sequential_looks=int(obj.get("sequential_looks", 1)),
    )


def _check_arm_set(arms: list[Arm], source: str, problems: _Collector) -> None:
    names = [a.name for a in arms]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.add(source, f"arm name {dup!r} appears twice; names must be unique", key="arms")
    orders = [a.order for a in arms]
    for order in sorted({o for o in orders if orders.count(o) > 1}):
        problems.add(source, f"two arms share order {order}; each arm boots at its own position", key="arms")
    if arms and not any(a.is_control for a in arms):
        problems.add(
            source,
            'no control arm; add an arm with role "control" and speculation off '
            "(e.g. off_A first and off_B last)",
            key="arms",
        )
    for family in sorted({a.family for a in arms}):
        members = [a for a in arms if a.family == family]
        if any(not a.is_control for a in members) and not any(a.is_control for a in members):
            problems.add(
                source, f"family {family!r} has candidates but no control arm to compare with", key="arms"
            )


def load_campaign(directory: Path) -> tuple[Campaign, str]:
    """Read and validate campaign.json; return it and the SHA-256 of its bytes."""
    path = directory / CAMPAIGN_FILE
    source = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(
            [
                Problem(
                    source, "not found; a results directory needs campaign.json (see docs/results-format.md)"
                )
            ]
        ) from None
    except OSError as exc:
        raise ResultsError([Problem(source, f"cannot be read: {exc.strerror}")]) from None
    problems = _Collector()
    try:
        obj = _loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ResultsError([Problem(source, f"not valid UTF-8 at byte {exc.start}")]) from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise ResultsError(
            [Problem(source, f"not valid JSON: {exc.args[0].split(':')[0]}", line=line)]
        ) from None
    if not isinstance(obj, dict):
        raise ResultsError([Problem(source, "must hold one JSON object")])
    campaign = _campaign_from(obj, source, problems)
    problems.raise_if_any()
    assert campaign is not None
    return campaign, content_sha256(obj)


# ---------------------------------------------------------------------------------------------------
# records.jsonl


def content_sha256(obj: Any) -> str:
    """SHA-256 of a JSON value's canonical text: the same content gives the same hash, whatever its
    formatting. Records are hashed line by line and the sorted line hashes hashed again, so the order of
    lines in records.jsonl does not change the hash while any change of content does."""
    return hashlib.sha256(record_line(obj).encode("utf-8")).hexdigest()


def _lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """Yield (line number, bytes) for each line; bytes is None for a line over MAX_LINE_BYTES."""
    with path.open("rb") as fh:
        number = 0
        while True:
            chunk = fh.readline(MAX_LINE_BYTES + 1)
            if not chunk:
                return
            number += 1
            if len(chunk) > MAX_LINE_BYTES and not chunk.endswith(b"\n"):
                while True:  # skip the rest of an oversized line without holding it
                    more = fh.readline(MAX_LINE_BYTES)
                    if not more or more.endswith(b"\n"):
                        break
                yield number, None
                continue
            yield number, chunk


def _record_problems(kind: str, rec: dict[str, Any]) -> list[tuple[str | None, str]]:
    """Cross-field checks that the field specs cannot express."""
    out: list[tuple[str | None, str]] = []
    if kind == "request":
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
        if rec.get("stream", 0) >= rec["concurrency"]:
            out.append(("stream", f"must be below concurrency {rec['concurrency']}"))
    elif kind == "acceptance":
        drafted, accepted, drafts = rec["draft_tokens"], rec["accepted_tokens"], rec["drafts"]
        if drafted is not None and accepted is not None and accepted > drafted:
            out.append(("accepted_tokens", f"{accepted} exceeds draft_tokens {drafted}"))
        if drafts is not None and drafted is not None and drafts > drafted:
            out.append(("drafts", f"{drafts} exceeds draft_tokens {drafted}"))
        per_pos = rec.get("accepted_per_position")
        if per_pos is not None:
            if accepted is not None and sum(per_pos) != accepted:
                out.append(
                    ("accepted_per_position", f"sums to {sum(per_pos)}, not accepted_tokens {accepted}")
                )
            if drafts is not None and any(c > drafts for c in per_pos):
                out.append(("accepted_per_position", f"a position count exceeds drafts {drafts}"))
            if drafts is None:
                out.append(("drafts", "must be set when accepted_per_position is given"))
        if per_pos is not None and rec.get("per_position_rate") is not None:
            out.append(("per_position_rate", "give counts or rates, not both"))
        mal = rec.get("mean_acceptance_length")
        if mal is not None and mal < 1:
            out.append(("mean_acceptance_length", f"{mal} is below 1 (it counts the bonus token)"))
        has_counts = drafted is not None and accepted is not None
        has_rates = rec.get("per_position_rate") is not None or rec.get("acceptance_rate") is not None
        if rec.get("status", "ok") == "ok" and not (has_counts or has_rates):
            out.append(
                (
                    None,
                    "an acceptance record needs draft_tokens and accepted_tokens, or "
                    "per_position_rate, or acceptance_rate",
                )
            )
        if rec.get("status") == "void" and not rec.get("error"):
            out.append(("error", "must say why the window is void"))
        if rec["scoped"] == "run" and rec["rep"] is None:
            out.append(("rep", "must be set when scoped is run"))
    elif kind == "boot":
        if rec["status"] == "failed" and not rec["error"]:
            out.append(("error", "must say why the boot failed"))
    elif kind == "summary":
        lo, mid, hi = rec["min"], rec["median"], rec["max"]
        if lo is not None and lo > mid + TIME_SLACK:
            out.append(("min", f"{lo} exceeds median {mid}"))
        if hi is not None and hi + TIME_SLACK < mid:
            out.append(("max", f"{hi} is below median {mid}"))
        if rec.get("distinct_outputs") is not None and rec["distinct_outputs"] > rec["n"]:
            out.append(("distinct_outputs", f"exceeds n {rec['n']}"))
    for key in ("raw", "log"):
        value = rec.get(key)
        if isinstance(value, str) and not (safe_relative(value) and value.startswith(RAW_DIR + "/")):
            out.append(
                (key, f"{value[:80]!r} must be a relative path under {RAW_DIR}/ inside the results directory")
            )
    return out


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
    if not path.is_file():
        raise ResultsError(
            [Problem(source, "not found; write one JSON record per line (see docs/results-format.md)")]
        )
    return _build(campaign, campaign_sha, _lines(path), source, root)


def results_from_records(
    campaign_obj: dict[str, Any], records: list[dict[str, Any]], label: str = "<memory>"
) -> Results:
    """Validate and tabulate a campaign and records held in memory (simulation, importers' checks)."""
    problems = _Collector()
    campaign = _campaign_from(campaign_obj, f"{label}/{CAMPAIGN_FILE}", problems)
    problems.raise_if_any()
    assert campaign is not None
    campaign_sha = content_sha256(campaign_obj)

    def lines() -> Iterator[tuple[int, bytes | None]]:
        for number, record in enumerate(records, start=1):
            yield number, record_line(record).encode("utf-8")

    return _build(campaign, campaign_sha, lines(), f"{label}/{RECORDS_FILE}", None)


def _build(
    campaign: Campaign,
    campaign_sha: str,
    lines: Iterator[tuple[int, bytes | None]],
    source: str,
    root: Path | None,
) -> Results:
    import pandas as pd

    arms = {a.name for a in campaign.arms}
    workloads = {w.id for w in campaign.workloads}
    problems = _Collector()
    columns: dict[str, dict[str, list[Any]]] = {
        kind: {col: [] for col in cols} for kind, cols in TABLE_COLUMNS.items()
    }
    line_of: dict[str, list[int]] = {kind: [] for kind in TABLE_COLUMNS}
    seen: dict[tuple[Any, ...], int] = {}
    line_hashes: list[bytes] = []
    boot_orders: dict[int, tuple[str, int]] = {}
    for number, raw in lines:
        if raw is None:
            problems.add(
                source,
                f"line longer than {MAX_LINE_BYTES} bytes; one record per line, each well under 1 MiB",
                line=number,
            )
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.add(source, f"not valid UTF-8 at byte {exc.start}", line=number)
            continue
        if not text.strip():
            problems.add(source, "empty line; records.jsonl holds one JSON object per line", line=number)
            continue
        try:
            rec = _loads(text)
        except ValueError as exc:
            problems.add(
                source,
                f"not valid JSON ({exc.args[0].split(':')[0]}); a truncated write "
                "leaves a broken last line: delete it or re-run with --resume",
                line=number,
            )
            continue
        if not isinstance(rec, dict):
            problems.add(source, 'must be a JSON object with a "kind"', line=number)
            continue
        kind = rec.get("kind")
        if kind not in RECORD_FIELDS:
            problems.add(
                source,
                f"unknown kind {kind!r}; use one of {', '.join(RECORD_FIELDS)}",
                line=number,
                key="kind",
            )
            continue
        found = check_object(rec, RECORD_FIELDS[kind], skip="kind")
        if found:
            for key, message in found:
                problems.add(source, message, line=number, key=key)
            continue
        full = {**_DEFAULTS[kind], **rec}
        bad = False
        for bad_key, message in _record_problems(kind, full):
            problems.add(source, message, line=number, key=bad_key)
            bad = True
        if full["arm"] not in arms:
            problems.add(
                source,
                f"arm {full['arm']!r} is not in {CAMPAIGN_FILE}; add it there or fix the name",
                line=number,
                key="arm",
            )
            bad = True
        wl: str | None = full.get("workload")
        if wl is not None and wl not in workloads:
            problems.add(source, f"workload {wl!r} is not in {CAMPAIGN_FILE}", line=number, key="workload")
            bad = True
        if bad:
            continue
        dedup = (kind, *(full[c] for c in TABLE_KEYS[kind]))
        if dedup in seen:
            problems.add(
                source,
                f"duplicate {kind} record (same {', '.join(TABLE_KEYS[kind])} as line "
                f"{seen[dedup]}); keep one",
                line=number,
            )
            continue
        seen[dedup] = number
        line_hashes.append(hashlib.sha256(record_line(rec).encode("utf-8")).digest())
        if kind == "boot":
            other = boot_orders.get(full["order"])
            if other is not None:
                problems.add(
                    source,
                    f"boot order {full['order']} is already used by {other[0]} boot "
                    f"{other[1]}; each boot has its own position",
                    line=number,
                    key="order",
                )
                continue
            boot_orders[full["order"]] = (full["arm"], full["boot"])
        cols = columns[kind]
        for col in TABLE_COLUMNS[kind]:
            value = full[col]
            cols[col].append(tuple(value) if isinstance(value, list) else value)
        line_of[kind].append(number)
    problems.raise_if_any()
    records_sha = hashlib.sha256(b"".join(sorted(line_hashes))).hexdigest()

    tables: dict[str, pd.DataFrame] = {}
    for kind, cols in columns.items():
        frame = pd.DataFrame(cols, columns=list(TABLE_COLUMNS[kind]))
        frame["record_line"] = line_of[kind]
        keys = list(TABLE_KEYS[kind])
        if len(frame):
            frame = frame.sort_values(keys, na_position="first", kind="mergesort").reset_index(drop=True)
        tables[kind] = frame
    warnings = _warnings(campaign, tables, root)
    return Results(
        path=source.rsplit("/", 1)[0] if root is None else str(root),
        campaign=campaign,
        requests=tables["request"],
        acceptance=tables["acceptance"],
        boots=tables["boot"],
        coherence=tables["coherence"],
        likelihood=tables["likelihood"],
        summaries=tables["summary"],
        campaign_sha256=campaign_sha,
        records_sha256=records_sha,
        warnings=tuple(warnings),
    )


def _warnings(campaign: Campaign, tables: dict[str, Any], root: Path | None) -> list[str]:
    """Things that are legal but weaken the evidence; returned as lines, never printed here."""
    out: list[str] = []
    booted = {(a, b) for a, b in zip(tables["boot"]["arm"], tables["boot"]["boot"], strict=True)}
    used: set[tuple[str, int]] = set()
    for kind in ("request", "acceptance", "coherence", "likelihood"):
        pairs = tables[kind][["arm", "boot"]].drop_duplicates()  # one pass per table, not per record
        used |= set(zip(pairs["arm"], pairs["boot"], strict=True))
    missing = sorted(used - booted)
    if missing and len(tables["boot"]):
        shown = ", ".join(f"{a} boot {b}" for a, b in missing[:5])
        out.append(f"records refer to boots with no boot record ({shown}); their boot order is unknown")
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
