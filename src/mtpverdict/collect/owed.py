"""Which boots a campaign still owes, in the order its devices run them, numbered after what they started."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtpverdict.collect.boot_record import INTERRUPTED, INTERRUPTED_NOTE
from mtpverdict.collect.campaign import ArmPlan, CampaignPlan, DevicePlan
from mtpverdict.collect.started import StartedBoot, interrupted_records, read_started
from mtpverdict.formats.results_io import ResultsWriter
from mtpverdict.stats import layout


@dataclass(frozen=True, slots=True)
class PlannedBoot:
    """A boot the campaign still owes: arm, boot number, order in the campaign."""

    arm: ArmPlan
    boot: int
    order: int
    round: int = 1
    device: DevicePlan | None = None  # None: a campaign without [[devices]]


def plan_boots(
    plan: CampaignPlan,
    writer: ResultsWriter,
    *,
    retry_failed: bool = False,
    devices: Sequence[int] | None = None,
) -> tuple[list[PlannedBoot], list[dict[str, Any]]]:
    """Boots still owed on the given devices (every device by default), and boot records owed for
    interrupted boots.

    Each device runs `plan.boots` rounds of every arm in its layout's order (stats/layout.py); a
    campaign without devices is one device, its rounds drawn as a device's are. A boot is settled
    once its boot record exists (ready or failed) and is not interrupted. A boot that was started but
    has no boot record (collect was killed) gets a record saying it was interrupted, built from its
    start file (or from the file's name when the file is torn: it is then placed after every boot of
    its device); its runs stay as evidence and a fresh boot is owed. With retry_failed a failed boot
    is not settled either: a fresh boot is owed, and the failed boot's record stays, so the policy's
    boot_ok rule still sees it. Fresh boots take the next numbers of their device (layout.boot_number).
    """
    count = plan.device_count
    scope = list(range(count)) if devices is None else sorted(set(devices))
    started = [s for s in read_started(writer.root) if layout.device_of(s.boot, count) in scope]
    records = [r for r in writer.records if layout.device_of(int(r.get("boot") or 1), count) in scope]
    owed_records = interrupted_records(plan, records, started, writer.root)
    owed: list[PlannedBoot] = []
    for device in scope:
        owed.extend(_device_owed(plan, device, [*records, *owed_records], started, retry_failed))
    return sorted(owed, key=lambda p: (p.round, p.order)), owed_records


def _device_owed(
    plan: CampaignPlan,
    device: int,
    records: list[dict[str, Any]],
    started: list[StartedBoot],
    retry_failed: bool,
) -> list[PlannedBoot]:
    """The boots device `device` still owes, numbered after everything it has started."""
    count = plan.device_count
    mine = [r for r in records if layout.device_of(int(r.get("boot") or 1), count) == device]
    used_seq: dict[str, int] = {}
    order_seq = 0
    for rec in mine:
        seq = layout.seq_of(int(rec.get("boot") or 1), count)
        used_seq[rec["arm"]] = max(used_seq.get(rec["arm"], 0), seq)
        if rec["kind"] == "boot":
            order_seq = max(order_seq, layout.seq_of(int(rec["order"]), count))
    for found in started:
        if layout.device_of(found.boot, count) == device:
            used_seq[found.arm] = max(used_seq.get(found.arm, 0), layout.seq_of(found.boot, count))
            if found.data is not None:
                order_seq = max(order_seq, layout.seq_of(found.data["order"], count))
    settled: dict[str, int] = {}
    for rec in mine:
        if rec["kind"] != "boot":
            continue
        interrupted = rec["status"] == INTERRUPTED or rec.get("note") == INTERRUPTED_NOTE
        if not interrupted and not (retry_failed and rec["status"] == "failed"):
            settled[rec["arm"]] = settled.get(rec["arm"], 0) + 1
    by_name = {a.name: a for a in plan.arms}
    target = plan.devices[device] if plan.devices else None
    owed: list[PlannedBoot] = []
    for round_ in range(1, plan.boots + 1):
        for name in layout.round_order(list(by_name), seed=plan.order_seed, device=device, round_=round_):
            if settled.get(name, 0) >= round_:
                continue
            settled[name] = settled.get(name, 0) + 1
            used_seq[name] = used_seq.get(name, 0) + 1
            order_seq += 1
            owed.append(
                PlannedBoot(
                    arm=by_name[name],
                    boot=layout.boot_number(used_seq[name], device, count),
                    order=layout.boot_number(order_seq, device, count),
                    round=round_,
                    device=target,
                )
            )
    return owed
