"""Running a blocked campaign's shards on a Ray cluster: one task per shard, pinned to its device.

Ray is an optional extra (`pip install 'mtpverdict[ray]'`). Each shard is one Ray task that runs the
ordinary collector (`collect --shard I/N`) into OUT/shard-I on the node that holds its device, then the
shards are merged into OUT/merged (collect/merge.py). A task is pinned by a custom resource named after its
device (`mtpverdict-device-<name>`, given to each node with `ray start --resources`), or asks Ray for a
GPU (`num_gpus=1`: Ray then sets CUDA_VISIBLE_DEVICES for the task, and the launched server inherits
it). Ray schedules; mtpverdict does not. A shard whose task died (a node lost, a worker killed) is
submitted again with resume, which completes it as `collect --resume` would.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict.collect import Collector, load_campaign_file
from mtpverdict.collect.merge import MergeSummary, merge_results
from mtpverdict.collect.shard import Shard
from mtpverdict.errors import CollectError

DEVICE_RESOURCE = "mtpverdict-device-{name}"  # the custom resource that pins a shard to its device
MERGED_DIR = "merged"
INSTALL_HINT = "Ray is not installed: pip install 'mtpverdict[ray]'"


@dataclass(frozen=True, slots=True)
class ShardRun:
    """What one shard's task did (a plain value, so it travels back from the Ray worker)."""

    shard: int
    device: str
    results: str
    outcome: str  # CollectOutcome value
    boots: int
    failed_boots: int


def shard_dir(out_root: str | os.PathLike[str], index: int) -> Path:
    """Where shard `index` writes its results."""
    return Path(out_root) / f"shard-{index}"


def device_resource(name: str) -> str:
    """The Ray custom resource that pins a shard to device `name`."""
    return DEVICE_RESOURCE.format(name=name)


def collect_shard(
    campaign: str, out_root: str, index: int, *, resume: bool, variables: dict[str, str] | None = None
) -> ShardRun:
    """Run shard `index` of the campaign into its directory (what each Ray task runs)."""
    plan = load_campaign_file(campaign)
    shard = Shard(index, len(plan.devices))
    out = shard_dir(out_root, index)
    summary = Collector(
        plan,
        out,
        variables=dict(variables or {}),
        resume=resume or (out / "campaign.json").exists(),
        allow_argv_mismatch=False,
        on_event=lambda _: None,
        shard=shard,
    ).run()
    return ShardRun(
        index, plan.devices[index].name, str(out), str(summary.outcome), summary.boots, summary.failed_boots
    )


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise CollectError(INSTALL_HINT) from None
    return ray


def submit_shards(
    campaign: str,
    out_root: str,
    *,
    shards: Sequence[int] | None = None,
    resume: bool = False,
    variables: dict[str, str] | None = None,
    pin: bool = True,
    num_gpus: float = 0.0,
    num_cpus: float = 1.0,
) -> dict[int, Any]:
    """Submit one Ray task per shard (all by default); return their object refs by shard index.

    pin: ask for the device's custom resource (device_resource), so the task runs where the device is.
    Ray must be initialised (ray.init) by the caller.
    """
    ray = _ray()
    plan = load_campaign_file(campaign)
    if not plan.devices:
        raise CollectError(f"{plan.source}: shards need a campaign laid out over [[devices]]")
    task = ray.remote(max_retries=0)(collect_shard)
    refs: dict[int, Any] = {}
    for index in range(len(plan.devices)) if shards is None else shards:
        device = plan.devices[index]
        options: dict[str, Any] = {"num_cpus": num_cpus, "num_gpus": num_gpus, "name": f"shard-{index}"}
        if pin:
            options["resources"] = {device_resource(device.name): 1}
        refs[index] = task.options(**options).remote(
            str(campaign), str(out_root), index, resume=resume, variables=variables
        )
    return refs


def run_shards(
    campaign: str,
    out_root: str,
    *,
    resume: bool = False,
    variables: dict[str, str] | None = None,
    pin: bool = True,
    num_gpus: float = 0.0,
    num_cpus: float = 1.0,
    retries: int = 1,
) -> tuple[list[ShardRun], MergeSummary]:
    """Run every shard on the Ray cluster, resubmit (with resume) a shard whose task died, then merge.

    A shard still failing after `retries` resubmissions is left out of the merge, which records its
    boots as failed (collect/merge.py). Returns the shard runs and the merge summary.
    """
    ray = _ray()
    pending = submit_shards(
        campaign, out_root, resume=resume, variables=variables, pin=pin, num_gpus=num_gpus, num_cpus=num_cpus
    )
    done: dict[int, ShardRun] = {}
    for attempt in range(retries + 1):
        died: list[int] = []
        for index, ref in pending.items():
            try:
                done[index] = ray.get(ref)
            except (ray.exceptions.RayTaskError, ray.exceptions.RayError):
                died.append(index)
        if not died or attempt == retries:
            break
        pending = submit_shards(
            campaign,
            out_root,
            shards=died,
            resume=True,
            variables=variables,
            pin=pin,
            num_gpus=num_gpus,
            num_cpus=num_cpus,
        )
    merged = merge_results([r.results for _, r in sorted(done.items())], Path(out_root) / MERGED_DIR)
    return [r for _, r in sorted(done.items())], merged
