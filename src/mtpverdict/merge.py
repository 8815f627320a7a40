"""Merging shards: the results directories of one blocked campaign's devices joined into one.

Each shard was collected by `collect --shard I/N` and holds raw/shard.json. The merge refuses shards of
different campaigns (campaign.json content or shard files that disagree), a shard given twice, a boot
present in two shards, and a boot record that names no device. A device whose shard is missing, or
whose shard stopped before running every planned boot, gets a `failed` boot record for each boot it
owes (numbered as collect would have numbered it), so the policy's `boot_ok` rule sees the hole and a
decision never mistakes a missing device for a smaller campaign. The merged directory is loaded once
(formats/results_io.load_results) before the merge returns.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict._files import NotReadable, open_regular
from mtpverdict._jsonio import atomic_write, record_line
from mtpverdict.collect.shard import SHARD_FILE, read_shard_file
from mtpverdict.errors import InputError, Problem
from mtpverdict.formats._check import loads_strict, read_document
from mtpverdict.formats.results_io import (
    CAMPAIGN_FILE,
    RAW_DIR,
    RECORDS_FILE,
    TORN_FILE,
    Results,
    content_sha256,
    load_results,
)
from mtpverdict.stats import layout

SHARDS_DIR = "shards"  # under the merged raw/: each shard's shard.json and torn lines, by index
SKIPPED_RAW = ("collect.lock",)  # a shard's lock is its collector's, not evidence
MISSING_SHARD = "not collected: shard {shard} (device {device}) was not among the merged shards"
UNFINISHED_SHARD = (
    "not collected: shard {shard} (device {device}) stopped before this boot; "
    "`collect --shard {shard} --resume` completes it, then merge again"
)


@dataclass(frozen=True, slots=True)
class MergeSummary:
    """What a merge joined, and what it recorded as failed."""

    out: str
    shards: int  # shards merged
    expected: int  # shards the campaign has (its devices)
    missing: tuple[str, ...]  # "shard I/N (device X)" of every shard not given
    owed_boots: int  # failed boot records added for boots a shard never ran
    records: int
    results: Results


@dataclass(frozen=True, slots=True)
class _ShardDir:
    path: Path
    info: dict[str, Any]
    campaign: dict[str, Any]
    records: list[dict[str, Any]]


def _refuse(source: Path | str, message: str, key: str | None = None) -> InputError:
    return InputError([Problem(str(source), message, key=key)])


def _read_shard(path: Path) -> _ShardDir:
    """A shard directory's shard file, campaign.json and records (each line parsed; validated later)."""
    if not path.is_dir():
        raise _refuse(path, "not a directory; pass the results directory of each shard")
    info = read_shard_file(path)
    if info is None:
        raise _refuse(
            path / RAW_DIR / SHARD_FILE,
            "missing or unreadable: not a shard (collect it with `collect --shard I/N`)",
        )
    try:
        campaign = loads_strict(read_document(path / CAMPAIGN_FILE, what="campaign.json").decode("utf-8"))
    except InputError as exc:
        raise _refuse(path / CAMPAIGN_FILE, exc.problems[0].message) from None
    except ValueError as exc:
        raise _refuse(path / CAMPAIGN_FILE, f"cannot be read: {exc}") from None
    records: list[dict[str, Any]] = []
    source = path / RECORDS_FILE
    try:
        opened = open_regular(source)  # a FIFO or a device is refused unread
    except NotReadable as exc:
        if str(exc) != "not found":
            raise _refuse(source, str(exc)) from None
        return _ShardDir(path, info, campaign, records)  # killed before its first record: boots fail
    with opened as fh:
        for number, raw in enumerate(fh, start=1):
            if raw.strip():
                try:
                    records.append(loads_strict(raw.decode("utf-8")))
                except ValueError as exc:
                    raise InputError([Problem(str(source), f"not JSON: {exc}", line=number)]) from None
    return _ShardDir(path, info, campaign, records)


def _check_same_campaign(shards: Sequence[_ShardDir]) -> None:
    first = shards[0]
    want = content_sha256(first.campaign)
    for shard in shards:
        if content_sha256(shard.campaign) != want or shard.info.get("campaign_sha256") != want:
            raise _refuse(
                shard.path / CAMPAIGN_FILE,
                f"differs from {first.path / CAMPAIGN_FILE}: shards of another campaign (or of other "
                "--var values) cannot be merged",
            )
        for key in ("shards", "devices", "rounds", "arms", "order_seed"):
            if shard.info.get(key) != first.info.get(key):
                raise _refuse(
                    shard.path / RAW_DIR / SHARD_FILE, f"differs from {shards[0].path}'s shard file", key=key
                )
    seen: dict[int, Path] = {}
    for shard in shards:
        index = int(shard.info["shard"])
        if index in seen:
            raise _refuse(shard.path, f"is shard {index}/{shard.info['shards']} again (also {seen[index]})")
        seen[index] = shard.path


def _check_boots(shards: Sequence[_ShardDir]) -> None:
    """Refuse a boot record without a device, or one boot in two shards."""
    owner: dict[tuple[str, int], Path] = {}
    for shard in shards:
        for rec in shard.records:
            if rec.get("kind") != "boot":
                continue
            where = shard.path / RECORDS_FILE
            if not isinstance(rec.get("device"), str):
                raise _refuse(
                    where,
                    f"{rec.get('arm')} boot {rec.get('boot')} names no device; every boot of a shard must "
                    "(collect it from a campaign with [[devices]])",
                    key="device",
                )
            if rec["device"] != shard.info["device"]:
                raise _refuse(
                    where,
                    f"{rec['arm']} boot {rec['boot']} ran on {rec['device']!r}, not on this shard's device "
                    f"{shard.info['device']!r}",
                    key="device",
                )
            key = (str(rec["arm"]), int(rec["boot"]))
            if key in owner:
                raise _refuse(
                    where, f"{key[0]} boot {key[1]} is also in {owner[key]}; a boot belongs to one shard"
                )
            owner[key] = shard.path


def _owed_boots(
    info: dict[str, Any], records: Sequence[dict[str, Any]], missing: bool
) -> list[dict[str, Any]]:
    """Failed boot records for the boots a device still owes (settled = ready or failed, per arm)."""
    count = int(info["shards"])
    device = int(info["shard"])
    entry = info["devices"][device]
    boots = [r for r in records if r.get("kind") == "boot"]
    settled: dict[str, int] = {}
    used: dict[str, int] = {}
    orders = [layout.seq_of(int(r["order"]), count) for r in boots]
    for rec in records:
        if isinstance(rec.get("boot"), int):
            used[rec["arm"]] = max(used.get(rec["arm"], 0), layout.seq_of(rec["boot"], count))
    for rec in boots:
        if rec["status"] in ("ready", "failed"):
            settled[rec["arm"]] = settled.get(rec["arm"], 0) + 1
    order_seq = max(orders, default=0)
    template = MISSING_SHARD if missing else UNFINISHED_SHARD
    error = template.format(shard=f"{device}/{count}", device=entry["name"])
    out: list[dict[str, Any]] = []
    for arm in info["arms"]:
        for _ in range(int(info["rounds"]) - settled.get(arm, 0)):
            used[arm] = used.get(arm, 0) + 1
            order_seq += 1
            out.append(
                {
                    "kind": "boot",
                    "arm": arm,
                    "boot": layout.boot_number(used[arm], device, count),
                    "order": layout.boot_number(order_seq, device, count),
                    "status": "failed",
                    "ready_seconds": None,
                    "kv_cache_tokens": None,
                    "block_size": None,
                    "num_blocks": None,
                    "max_model_len": None,
                    "engine_version": None,
                    "argv": None,
                    "error": error,
                    "device": entry["name"],
                    "node": entry["node"],
                }
            )
    return out


def _copy_raw(shard: _ShardDir, out: Path) -> None:
    """Copy a shard's raw/ files under the merged raw/, refusing a path two shards fill differently."""
    index = int(shard.info["shard"])
    source_root = shard.path / RAW_DIR
    for source in sorted(p for p in source_root.rglob("*") if p.is_file() and not p.is_symlink()):
        relative = source.relative_to(source_root)
        if relative.as_posix() in SKIPPED_RAW:
            continue
        if relative.as_posix() in (SHARD_FILE, TORN_FILE):
            relative = Path(SHARDS_DIR) / f"shard-{index}-{relative.name}"
        target = out / RAW_DIR / relative
        if target.exists():
            if target.read_bytes() != source.read_bytes():
                raise _refuse(target, f"is written by two shards with different content (also {source})")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def merge_results(shards: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> MergeSummary:
    """Join shard directories into one results directory at `out` (which must not exist yet).

    Raises InputError naming the file (and key) that makes the shards unmergeable; the merged
    directory is validated by load_results, whose ResultsError is raised as it is.
    """
    if not shards:
        raise _refuse("merge", "no shard given; pass the results directory of each shard")
    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise _refuse(target, "exists and is not empty; merge into a new directory")
    read = [_read_shard(Path(p)) for p in shards]
    _check_same_campaign(read)
    _check_boots(read)
    expected = int(read[0].info["shards"])
    present = {int(s.info["shard"]): s for s in read}
    owed: list[dict[str, Any]] = []
    missing: list[str] = []
    for index in range(expected):
        shard = present.get(index)
        info = shard.info if shard is not None else {**read[0].info, "shard": index}
        if shard is None:
            missing.append(f"shard {index}/{expected} (device {info['devices'][index]['name']})")
        owed += _owed_boots(info, shard.records if shard is not None else [], shard is None)
    target.mkdir(parents=True, exist_ok=True)
    (target / RAW_DIR).mkdir(exist_ok=True)
    for shard in read:
        _copy_raw(shard, target)
    atomic_write(target / CAMPAIGN_FILE, (read[0].path / CAMPAIGN_FILE).read_text(encoding="utf-8"))
    lines = [
        record_line(rec)
        for shard in sorted(read, key=lambda s: int(s.info["shard"]))
        for rec in shard.records
    ]
    lines += [record_line(rec) for rec in owed]
    atomic_write(target / RECORDS_FILE, "".join(lines))
    results = load_results(target)
    return MergeSummary(
        out=str(target),
        shards=len(read),
        expected=expected,
        missing=tuple(missing),
        owed_boots=len(owed),
        records=len(lines),
        results=results,
    )
