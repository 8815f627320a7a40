"""Shards: one device's part of a blocked campaign, collected as an ordinary results directory.

`collect --shard I/N` runs the boots of device I (from 0) of a campaign with N [[devices]] into its own
results directory, and writes raw/shard.json: which shard it is, the campaign's devices and rounds, and
the content hash of campaign.json. `mtpverdict merge` (collect/merge.py) reads that file to refuse shards of
another campaign and to record the boots of a missing or unfinished shard as failed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from mtpverdict._files import NotReadable, read_regular
from mtpverdict._jsonio import atomic_write
from mtpverdict.collect.campaign import CampaignPlan
from mtpverdict.errors import CollectError, InputError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats._check import loads_strict
from mtpverdict.formats.results import Name, Sha256

SHARD_FILE = "shard.json"  # under raw/
SHARD_FORMAT = "mtpverdict.shard/1"
MAX_SHARD_BYTES = 1 << 20  # a shard file names devices and arms: a few KB
MAX_SHARDS = 999_999  # what `--shard I/N` can write (six digits)
MAX_ROUNDS = 10_000  # boots per arm and device a shard file may claim; merge owes at most this per arm
SHARD_PATTERN = re.compile(r"^(?P<index>[0-9]{1,6})/(?P<count>[0-9]{1,6})$")

ShardIndex = Annotated[int, Meta(ge=0, lt=MAX_SHARDS)]


class ShardDevice(Struct, frozen=True, forbid_unknown_fields=True):
    """One device of the campaign as the shard file lists it."""

    name: Name
    node: Name | None


class ShardFile(Struct, frozen=True, forbid_unknown_fields=True):
    """raw/shard.json: which shard of which campaign a results directory holds."""

    format: Literal["mtpverdict.shard/1"]
    campaign_id: Name
    campaign_sha256: Sha256
    shard: ShardIndex
    shards: Annotated[int, Meta(ge=1, le=MAX_SHARDS)]
    device: Name
    node: Name | None
    devices: Annotated[tuple[ShardDevice, ...], Meta(min_length=1, max_length=MAX_SHARDS)]
    rounds: Annotated[int, Meta(ge=1, le=MAX_ROUNDS)]
    arms: Annotated[tuple[Name, ...], Meta(min_length=1)]
    order_seed: _check.Int | None


def load_shard_file(results: Path) -> ShardFile:
    """raw/shard.json of a shard, typed and consistent; InputError naming the file and key otherwise."""
    path = results / "raw" / SHARD_FILE
    source = str(path)
    if not path.exists():
        raise InputError([Problem(source, "not found: not a shard (collect it with `collect --shard I/N`)")])
    data = _check.read_document(path, limit=MAX_SHARD_BYTES, what="a shard file")
    try:
        obj = loads_strict(_check.text_of(data, source))
    except ValueError as exc:
        raise InputError([Problem(source, f"not a shard file: {exc}", line=_check.json_line(exc))]) from None
    if not isinstance(obj, dict):
        raise InputError([Problem(source, "not a shard file: must hold one JSON object")])
    shard = _check.convert(obj, ShardFile, source)
    problems = _shard_problems(shard)
    if problems:
        raise InputError([Problem(source, message, key=key) for key, message in problems])
    return shard


def _shard_problems(shard: ShardFile) -> list[tuple[str, str]]:
    """What the types cannot say: the shard is one of the devices listed, each listed once."""
    problems: list[tuple[str, str]] = []
    if len(shard.devices) != shard.shards:
        problems.append(("devices", f"lists {len(shard.devices)} devices for {shard.shards} shards"))
    elif shard.shard >= shard.shards:
        problems.append(("shard", f"is {shard.shard}, but shards count from 0 to {shard.shards - 1}"))
    elif (shard.device, shard.node) != (shard.devices[shard.shard].name, shard.devices[shard.shard].node):
        problems.append(("device", f"is not devices[{shard.shard}] ({shard.devices[shard.shard].name})"))
    if len({d.name for d in shard.devices}) != len(shard.devices):
        problems.append(("devices", "names a device twice"))
    if len(set(shard.arms)) != len(shard.arms):
        problems.append(("arms", "names an arm twice"))
    return problems


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard `index` (from 0, as JOB_COMPLETION_INDEX counts) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """Read `I/N` (0 <= I < N); raise ValueError saying how to write it."""
    found = SHARD_PATTERN.match(text.strip())
    if found is None:
        raise ValueError(f"--shard {text!r}: write I/N, e.g. 0/4 for the first of four devices")
    shard = Shard(int(found["index"]), int(found["count"]))
    if shard.count < 1 or not 0 <= shard.index < shard.count:
        raise ValueError(f"--shard {text!r}: I counts from 0 and must be below N")
    return shard


def check_shard(plan: CampaignPlan, shard: Shard, *, until_resolved: bool) -> None:
    """Refuse a shard the campaign cannot have (CollectError naming the campaign file)."""
    if not plan.devices:
        raise CollectError(
            f"{plan.source}: --shard needs a campaign laid out over devices; add [[devices]] "
            "(docs/campaign-format.md)"
        )
    if not 0 <= shard.index < shard.count:
        raise CollectError(f"--shard {shard}: I counts from 0 and must be below N")
    if shard.count != len(plan.devices):
        raise CollectError(
            f"{plan.source}: --shard {shard} does not match the campaign's {len(plan.devices)} devices; "
            f"use --shard I/{len(plan.devices)}, one shard per device"
        )
    if until_resolved:
        raise CollectError(
            "--until-resolved cannot run on a shard: deciding which arms are settled needs every "
            "device's boots; merge the shards and resume the whole campaign instead"
        )


def refuse_unsharded(results: Path) -> None:
    """Refuse to run a whole campaign into a directory that holds one shard of it."""
    found = read_shard_file(results)
    if found is not None:
        raise CollectError(
            f"{results}: holds shard {found['shard']}/{found['shards']} (device {found['device']}); "
            f"resume it with --shard {found['shard']}/{found['shards']}"
        )


def shard_document(plan: CampaignPlan, shard: Shard, campaign_sha256: str) -> dict[str, Any]:
    """The content of raw/shard.json for one shard."""
    device = plan.devices[shard.index]
    return {
        "format": SHARD_FORMAT,
        "campaign_id": plan.id,
        "campaign_sha256": campaign_sha256,
        "shard": shard.index,
        "shards": shard.count,
        "device": device.name,
        "node": device.node,
        "devices": [{"name": d.name, "node": d.node} for d in plan.devices],
        "rounds": plan.boots,
        "arms": [a.name for a in plan.arms],
        "order_seed": plan.order_seed,
    }


def write_shard_file(results: Path, document: dict[str, Any]) -> None:
    """Write raw/shard.json, refusing a directory that holds another shard."""
    path = results / "raw" / SHARD_FILE
    if path.exists():
        existing = read_shard_file(results)
        if existing is None or (existing["shard"], existing["shards"]) != (
            document["shard"],
            document["shards"],
        ):
            held = (
                "an unreadable shard file"
                if existing is None
                else f"shard {existing['shard']}/{existing['shards']}"
            )
            raise CollectError(
                f"{results}: holds {held}, not shard {document['shard']}/{document['shards']}; "
                "each shard writes its own results directory"
            )
    atomic_write(path, json.dumps(document, sort_keys=True, indent=1) + "\n")


def read_shard_file(results: Path) -> dict[str, Any] | None:
    """raw/shard.json of a results directory, or None when absent or not a shard file."""
    path = results / "raw" / SHARD_FILE
    try:
        data = loads_strict(read_regular(path, MAX_SHARD_BYTES, "a shard file").decode("utf-8"))
    except (NotReadable, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != SHARD_FORMAT:
        return None
    return data
