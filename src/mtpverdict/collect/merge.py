"""Merging shards: the results directories of one blocked campaign's devices joined into one.

Each shard was collected by `collect --shard I/N` and holds raw/shard.json. Every shard is first
loaded as `validate` loads a results directory (formats/results_io.load_results: typed records, the
1 MiB line limit, every problem named by file and line) and its shard file through its typed model
(collect/shard.load_shard_file). The merge then refuses shards of different campaigns (campaign.json
content or shard files that disagree), a shard given twice, a boot present in two shards, a boot
record that names no device or another device, a boot or order number of another device's numbering,
and a record of a boot the shard holds no boot record for. A device whose shard is missing, or whose
shard stopped before running every planned boot, gets a `failed` boot record for each boot it owes
(numbered as collect would have numbered it), so the policy's `boot_ok` rule sees the hole and a
decision never mistakes a missing device for a smaller campaign.

The merged directory is written into a temporary directory beside `--out`, loaded once, and renamed
to `--out` at the end: a refusal or a full disk leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict._files import NotReadable, open_regular
from mtpverdict._jsonio import atomic_write, record_line
from mtpverdict.collect.shard import SHARD_FILE, ShardFile, load_shard_file
from mtpverdict.errors import InputError, Problem
from mtpverdict.formats.results import RECORD_KINDS
from mtpverdict.formats.results_io import (
    CAMPAIGN_FILE,
    MAX_LINE_BYTES,
    RAW_DIR,
    RECORDS_FILE,
    TORN_FILE,
    Results,
    load_campaign,
    load_results,
)
from mtpverdict.stats import layout

SHARDS_DIR = "shards"  # under the merged raw/: each shard's shard.json and torn lines, by index
SKIPPED_RAW = ("collect.lock",)  # a shard's lock is its collector's, not evidence
MAX_OWED_BOOTS = 100_000  # failed boot records one merge may add (rounds x arms x missing devices)
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
    info: ShardFile
    campaign_sha256: str
    results: Results | None  # None: killed before its first record
    records_stat: tuple[int, int, int] = (0, 0, 0)  # records.jsonl's (inode, size, mtime) when it was loaded


def _refuse(source: Path | str, message: str, key: str | None = None) -> InputError:
    return InputError([Problem(str(source), message, key=key)])


def _read_shard(path: Path) -> _ShardDir:
    """A shard directory loaded as `validate` loads it, with its typed shard file."""
    if not path.is_dir():
        raise _refuse(path, "not a directory; pass the results directory of each shard")
    info = load_shard_file(path)
    if not (path / RECORDS_FILE).exists() and not (path / RECORDS_FILE).is_symlink():
        _, campaign_sha = load_campaign(path)  # killed before its first record: its boots are owed
        return _ShardDir(path, info, campaign_sha, None)
    before = _stat(path / RECORDS_FILE)
    results = load_results(path)
    if _stat(path / RECORDS_FILE) != before:
        raise _refuse(
            path / RECORDS_FILE, "changed while it was read; merge again once its collect has stopped"
        )
    return _ShardDir(path, info, results.campaign_sha256, results, before)


def _stat(path: Path) -> tuple[int, int, int]:
    try:
        found = path.stat()
    except OSError:  # the loader says what is wrong with it
        return (-1, -1, -1)
    return found.st_ino, found.st_size, found.st_mtime_ns


def _check_same_campaign(shards: Sequence[_ShardDir]) -> None:
    first = shards[0]
    for shard in shards:
        if (
            shard.campaign_sha256 != first.campaign_sha256
            or shard.info.campaign_sha256 != shard.campaign_sha256
        ):
            raise _refuse(
                shard.path / CAMPAIGN_FILE,
                f"differs from {first.path / CAMPAIGN_FILE}: shards of another campaign (or of other "
                "--var values) cannot be merged",
            )
        for key in ("campaign_id", "shards", "devices", "rounds", "arms", "order_seed"):
            if getattr(shard.info, key) != getattr(first.info, key):
                raise _refuse(
                    shard.path / RAW_DIR / SHARD_FILE, f"differs from {first.path}'s shard file", key=key
                )
    seen: dict[int, Path] = {}
    for shard in shards:
        index = shard.info.shard
        if index in seen:
            raise _refuse(shard.path, f"is shard {index}/{shard.info.shards} again (also {seen[index]})")
        seen[index] = shard.path


def _check_campaign_arms(shard: _ShardDir) -> None:
    """The shard file's arms and id are campaign.json's (the owed boots are numbered from them)."""
    if shard.results is None:
        return
    campaign = shard.results.campaign
    where = shard.path / RAW_DIR / SHARD_FILE
    if shard.info.campaign_id != campaign.id:
        raise _refuse(
            where, f"names campaign {shard.info.campaign_id!r}, not {campaign.id!r}", key="campaign_id"
        )
    if set(shard.info.arms) != {a.name for a in campaign.arms}:
        raise _refuse(where, "lists other arms than campaign.json", key="arms")


def _check_boots(shards: Sequence[_ShardDir]) -> None:
    """Refuse a boot without a device, of another device or numbering, in two shards, or unrecorded."""
    owner: dict[tuple[str, int], Path] = {}
    for shard in shards:
        if shard.results is None:
            continue
        _check_campaign_arms(shard)
        for arm, boot in _own_boots(shard):
            key = (arm, boot)
            if key in owner:
                raise _refuse(
                    shard.path / RECORDS_FILE,
                    f"{arm} boot {boot} is also in {owner[key]}; a boot belongs to one shard",
                )
            owner[key] = shard.path


def _own_boots(shard: _ShardDir) -> set[tuple[str, int]]:
    """The (arm, boot) of every boot record, each checked to be this shard's; then every other record
    checked to belong to one of them."""
    assert shard.results is not None
    info, where = shard.info, shard.path / RECORDS_FILE
    boots = shard.results.boots
    for arm, boot, order, device, node in zip(
        boots["arm"], boots["boot"], boots["order"], boots["device"], boots["node"], strict=True
    ):
        if not isinstance(device, str):
            raise _refuse(
                where,
                f"{arm} boot {boot} names no device; every boot of a shard must "
                "(collect it from a campaign with [[devices]])",
                key="device",
            )
        node = node if isinstance(node, str) else None  # absent: a missing value in the table
        if device != info.device or node != info.node:
            raise _refuse(
                where,
                f"{arm} boot {boot} ran on {device!r} (node {node!r}), not on this shard's device "
                f"{info.device!r} (node {info.node!r})",
                key="device",
            )
        for name, number in (("boot", int(boot)), ("order", int(order))):
            if layout.device_of(number, info.shards) != info.shard:
                raise _refuse(
                    where,
                    f"{arm} boot {boot}: {name} {number} is numbered for device "
                    f"{layout.device_of(number, info.shards)} of {info.shards}, not this shard's "
                    f"{info.shard} (boot and order numbers of device i are i + 1, i + 1 + N, ...)",
                    key=name,
                )
    ready: dict[str, int] = {}
    for arm, status in zip(boots["arm"], boots["status"], strict=True):
        ready[str(arm)] = ready.get(str(arm), 0) + (status == "ready")
    for arm, count in sorted(ready.items()):
        if count > info.rounds:  # a round readies one boot per arm; a failed one retried stays failed
            raise _refuse(
                where,
                f"{arm} has {count} ready boots in this shard, more than the {info.rounds} rounds "
                f"its shard file claims ({shard.path / RAW_DIR / SHARD_FILE})",
                key="rounds",
            )
    owned = {(str(a), int(b)) for a, b in zip(boots["arm"], boots["boot"], strict=True)}
    for kind in RECORD_KINDS:
        if kind == "boot":
            continue
        table = shard.results.table(kind)
        for arm, boot in sorted({(str(a), int(b)) for a, b in zip(table["arm"], table["boot"], strict=True)}):
            if (arm, boot) not in owned:
                raise _refuse(
                    where,
                    f"{kind} records of {arm} boot {boot}, which has no boot record in this shard; a "
                    "shard holds only the records of its own boots",
                    key="boot",
                )
    return owned


def _boots_of(shard: _ShardDir | None) -> Any:
    """A shard's boot table, None for a shard not given or killed before its first record."""
    return None if shard is None or shard.results is None else shard.results.boots


def _owed_count(info: ShardFile, boots: Any) -> int:
    """How many failed boot records a device still owes (rounds per arm less its settled boots)."""
    settled = _settled(boots)
    return sum(max(0, info.rounds - settled.get(arm, 0)) for arm in info.arms)


def _settled(boots: Any) -> dict[str, int]:
    if boots is None or not len(boots):
        return {}
    done = boots[boots["status"].isin(["ready", "failed"])]
    return {str(k): int(v) for k, v in done.groupby("arm").size().items()}


def _owed_boots(info: ShardFile, index: int, boots: Any, missing: bool) -> Iterator[dict[str, Any]]:
    """Failed boot records for the boots device `index` still owes (settled = ready or failed, per arm)."""
    count = info.shards
    entry = info.devices[index]
    settled = _settled(boots)
    used: dict[str, int] = {}
    order_seq = 0
    if boots is not None and len(boots):
        for arm, boot in zip(boots["arm"], boots["boot"], strict=True):
            used[str(arm)] = max(used.get(str(arm), 0), layout.seq_of(int(boot), count))
        order_seq = max(layout.seq_of(int(o), count) for o in boots["order"])
    template = MISSING_SHARD if missing else UNFINISHED_SHARD
    error = template.format(shard=f"{index}/{count}", device=entry.name)
    for arm in info.arms:
        for _ in range(info.rounds - settled.get(arm, 0)):
            used[arm] = used.get(arm, 0) + 1
            order_seq += 1
            yield {
                "kind": "boot",
                "arm": arm,
                "boot": layout.boot_number(used[arm], index, count),
                "order": layout.boot_number(order_seq, index, count),
                "status": "failed",
                "ready_seconds": None,
                "kv_cache_tokens": None,
                "block_size": None,
                "num_blocks": None,
                "max_model_len": None,
                "engine_version": None,
                "argv": None,
                "error": error,
                "device": entry.name,
                "node": entry.node,
            }


def _copy_raw(shard: _ShardDir, out: Path, written: dict[Path, Path]) -> None:
    """Copy a shard's raw/ files under the merged raw/, refusing a path two shards fill differently
    (`written`: each merged file and the shard file it came from)."""
    index = shard.info.shard
    source_root = shard.path / RAW_DIR
    for source in sorted(p for p in source_root.rglob("*") if p.is_file() and not p.is_symlink()):
        relative = source.relative_to(source_root)
        if relative.as_posix() in SKIPPED_RAW:
            continue
        if relative.as_posix() in (SHARD_FILE, TORN_FILE):
            relative = Path(SHARDS_DIR) / f"shard-{index}-{relative.name}"
        target = out / RAW_DIR / relative
        if target in written:
            if not _same_bytes(target, source):
                why = f"differs from {written[target]}: two shards fill raw/{relative.as_posix()} differently"
                raise _refuse(source, why)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        written[target] = source


def _same_bytes(first: Path, second: Path) -> bool:
    """Compare two files block by block (raw files may be large)."""
    with first.open("rb") as a, second.open("rb") as b:
        while True:
            block = a.read(1 << 20)
            if block != b.read(1 << 20):
                return False
            if not block:
                return True


def _copy_records(shard: _ShardDir, fh: Any) -> int:
    """Append a validated shard's lines to the merged records as they are (bounded reads), refusing a
    file changed since it was validated (another inode, size or modification time); returns the lines
    copied."""
    assert shard.results is not None
    source = shard.path / RECORDS_FILE
    try:
        opened = open_regular(source)
    except NotReadable as exc:
        raise _refuse(source, str(exc)) from None
    lines = copied = 0
    with opened as records:
        found = os.fstat(records.fileno())
        if (found.st_ino, found.st_size, found.st_mtime_ns) != shard.records_stat:
            raise _refuse(source, "changed while it was merged; merge again")
        while line := records.readline(MAX_LINE_BYTES + 2):
            copied += len(line)
            if len(line) > MAX_LINE_BYTES + 1 or copied > found.st_size:
                raise _refuse(source, "changed while it was merged; merge again")
            fh.write(line if line.endswith(b"\n") else line + b"\n")
            lines += 1
    return lines


def _check_out(target: Path, shards: Sequence[str | os.PathLike[str]]) -> None:
    if target.is_symlink():  # the merged directory replaces the link itself, never what it names
        raise _refuse(target, "is a symbolic link; merge into a new directory named directly")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise _refuse(target, "exists and is not empty; merge into a new directory")
    where = target.parent.resolve() / target.name
    for shard in shards:
        root = Path(shard).resolve()
        if where == root or root in where.parents or where in root.parents:
            raise _refuse(
                target, f"is inside the shard {shard} (or holds it); merge into a directory of its own"
            )


def merge_results(shards: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str]) -> MergeSummary:
    """Join shard directories into one results directory at `out` (which must not exist yet).

    Raises InputError naming the file (and key) that makes the shards unmergeable (a shard's
    ResultsError as `validate` raises it); OSError when the merged directory cannot be written, which
    then leaves nothing at `out`.
    """
    if not shards:
        raise _refuse("merge", "no shard given; pass the results directory of each shard")
    target = Path(out)
    _check_out(target, shards)
    read = [_read_shard(Path(p)) for p in shards]
    _check_same_campaign(read)
    _check_boots(read)
    first = read[0].info
    present = {s.info.shard: s for s in read}
    owed_total = sum(_owed_count(first, _boots_of(present.get(i))) for i in range(first.shards))
    if owed_total > MAX_OWED_BOOTS:
        raise _refuse(
            read[0].path / RAW_DIR / SHARD_FILE,
            f"owes {owed_total} boots never run (rounds x arms x devices), more than the "
            f"{MAX_OWED_BOOTS} a merge records; merge the shards of a campaign collect can run",
            key="rounds",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.merging-", dir=target.parent))
    try:
        summary = _write_merged(read, staging, target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return summary


def _write_merged(read: Sequence[_ShardDir], staging: Path, target: Path) -> MergeSummary:
    """Write the merged directory into `staging` and load it; the summary names `target`."""
    first = read[0].info
    present = {s.info.shard: s for s in read}
    missing: list[str] = []
    (staging / RAW_DIR).mkdir()
    written: dict[Path, Path] = {}
    for shard in read:
        _copy_raw(shard, staging, written)
    atomic_write(staging / CAMPAIGN_FILE, (read[0].path / CAMPAIGN_FILE).read_text(encoding="utf-8"))
    lines = owed = 0
    with (staging / RECORDS_FILE).open("wb") as fh:
        for shard in sorted(read, key=lambda s: s.info.shard):
            if shard.results is not None:
                lines += _copy_records(shard, fh)
        for index in range(first.shards):
            given = present.get(index)
            if given is None:
                missing.append(f"shard {index}/{first.shards} (device {first.devices[index].name})")
            for rec in _owed_boots(first, index, _boots_of(given), given is None):
                fh.write(record_line(rec).encode("utf-8"))
                owed += 1
        fh.flush()
        os.fsync(fh.fileno())
    results = dataclasses.replace(load_results(staging), path=str(target))
    return MergeSummary(
        out=str(target),
        shards=len(read),
        expected=first.shards,
        missing=tuple(missing),
        owed_boots=owed,
        records=lines + owed,
        results=results,
    )
