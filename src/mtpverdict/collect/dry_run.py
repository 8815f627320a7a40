"""`collect --dry-run`: what a campaign will do, its estimated wall time, what a real run would warn of."""

from __future__ import annotations

import os
from pathlib import Path

from mtpverdict.collect.campaign import CampaignPlan
from mtpverdict.collect.preflight import preflight
from mtpverdict.stats import layout


def dry_run_plan(plan: CampaignPlan, *, stream_tps: float = 50.0, boot_seconds: float = 120.0) -> list[str]:
    """Lines describing what a campaign will do and an estimate of its wall time.

    The estimate assumes every stream decodes at `stream_tps` and every boot takes `boot_seconds`
    (both stated in the output): a run lasts max_tokens / stream_tps whatever its concurrency. On
    several devices the devices run in parallel (one shard each), so the wall time is one device's.
    """
    devices = plan.device_count
    per_device = len(plan.arms) * plan.boots
    boots = per_device * devices
    runs = len(plan.workloads) * len(plan.concurrency) * plan.reps
    requests_per_boot = sum(plan.concurrency) * plan.reps * len(plan.workloads)
    run_seconds = sum(w.max_tokens for w in plan.workloads) / stream_tps * len(plan.concurrency) * plan.reps
    warm = plan.warmup_runs * plan.workloads[0].max_tokens / stream_tps
    checks = (
        sum(c.max_tokens for c in plan.coherence) / stream_tps
        + sum(w.max_tokens for w in plan.workloads if w.expect_identical) / stream_tps
    )
    per_boot = boot_seconds + warm + run_seconds + checks
    lines = [
        f"campaign {plan.id}: {plan.title}",
        f"{len(plan.arms)} arms x {plan.boots} boot(s) = {per_device} boots"
        + (f" per device, {boots} in all" if plan.devices else "")
        + ", in order "
        + ", ".join(a.name for a in plan.arms),
    ]
    lines += _device_lines(plan)
    lines += [
        f"per boot: {plan.warmup_runs} warm-up run(s), {runs} measured runs ({requests_per_boot} requests), "
        f"{len(plan.coherence)} coherence cases, {plan.likelihood_reps if plan.likelihood_text else 0} "
        "likelihood checks",
        f"total: {boots * requests_per_boot} measured requests",
        f"estimated wall time: {per_device * per_boot / 60:.1f} min ({per_device} boots x {per_boot:.0f} s"
        + (
            f" on each of {devices} devices in parallel; {boots * per_boot / 60:.1f} min on one)"
            if plan.devices
            else ")"
        )
        + f", assuming {boot_seconds:.0f} s per boot and {stream_tps:.0f} tok/s per stream",
    ]
    return lines


def _device_lines(plan: CampaignPlan) -> list[str]:
    """Each device's first round, in the order its shard boots the arms."""
    if not plan.devices:
        return []
    lines = [
        f"{len(plan.devices)} devices, one shard each (collect --shard I/{len(plan.devices)}); arm order "
        f"(controls included) drawn per device and round with order_seed {plan.order_seed}"
    ]
    for i, device in enumerate(plan.devices):
        order = layout.round_order([a.name for a in plan.arms], seed=plan.order_seed, device=i, round_=1)
        node = f" on {device.node}" if device.node else ""
        lines.append(
            f"  shard {i}: device {device.name}{node}, port {plan.port(device)}: round 1 " + ", ".join(order)
        )
    return lines


def dry_run_report(
    plan: CampaignPlan,
    results: str | os.PathLike[str],
    *,
    variables: dict[str, str],
    resume: bool,
    allow_argv_mismatch: bool,
    until_resolved: bool,
    stream_tps: float = 50.0,
    boot_seconds: float = 120.0,
    continues: str | None = None,
) -> list[str]:
    """What `collect --dry-run` prints: the plan and its cost, then a `warning:` line for each thing
    a real run would do that the user may not expect. Every check of a real run is made first (the
    same preflight), so a dry run refuses what a real run refuses; nothing is written."""
    checked = preflight(
        plan,
        Path(results),
        variables=variables,
        resume=resume,
        allow_argv_mismatch=allow_argv_mismatch,
        until_resolved=until_resolved,
        continues=continues,
    )
    lines = dry_run_plan(checked.plan or plan, stream_tps=stream_tps, boot_seconds=boot_seconds)
    clock = [f"note: {checked.clock}"] if checked.clock else []
    return lines + clock + [f"warning: {w}" for w in checked.warnings]
