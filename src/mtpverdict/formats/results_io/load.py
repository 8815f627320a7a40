"""Loading a results directory: campaign.json and records.jsonl into typed tables, every problem named."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mtpverdict._jsonio import record_line
from mtpverdict.errors import Problem, ResultsError
from mtpverdict.formats.results import (
    RECORD_KINDS,
    SERVER_REQUEST_FIELDS,
    Campaign,
    record_fields,
)
from mtpverdict.formats.results_io.campaign_json import (
    campaign_from_json,
    load_campaign,
)
from mtpverdict.formats.results_io.checks import (
    _cross_checks,
    _fill_absent,
    _pattern_checks,
)
from mtpverdict.formats.results_io.common import (
    CAMPAIGN_FILE,
    RECORDS_FILE,
    TABLE_KEYS,
    Results,
    _Problems,
    content_sha256,
)
from mtpverdict.formats.results_io.decode import (
    _Columns,
    _decode_block,
    _lines,
    _sorted_digests,
)

if TYPE_CHECKING:
    import pandas as pd

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
    campaign = campaign_from_json(campaign_obj, f"{label}/{CAMPAIGN_FILE}")
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
