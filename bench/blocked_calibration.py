"""Calibration of the blocked procedure: campaigns over D devices whose levels differ 5x the boot noise.

`python bench/calibration.py --blocked` runs this. Each campaign is drawn at the boot level
(mtpverdict.sim.simulate_boots with devices: every device runs off_A, k1, k2, k3, off_B `rounds`
times; a device's level, sd DEVICE_SD, is added to every boot on it), then decided twice on the same
numbers: by stats.blocked.blocked_batch (arms against the controls of their own device) and by
stats.procedure.batch_procedure on the same boots with the devices ignored (the contrast). A blocked
promotion is an arm called better while the control check passes: the check decide runs
(stats.positions.device_position and position_failing: a within-device slope of the control residuals
against the boot's position on its device and the device's ends against its middle, failing when
either is significant at alpha / 2 or larger than max_drift). Every round's order on every device is
drawn afresh for each campaign, controls included, as collect lays campaigns out; a campaign whose
control boots all sit at an end of their device is not decided (stats.positions.confounded, as in
decide). Ignoring devices, the procedure alone is counted (a drift check across devices that ran at
the same time has no boot order to fit).

Slow ends (`slow_end_rows`): the first and last boot on each device 4-5% slow, one round per device,
with the arms' order kept on every device (off_A first, off_B last: the earlier layout) and drawn.

Designs keep 8 boots per arm in all (D x rounds = 8), so the accelerator time is the same and the wall
time is divided by D; D = 1 is the serial campaign.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from procedure_calibration import ALPHA, BETTER, BOOT_SD, MARGIN, MODES, _rate, sweep

from mtpverdict.plan import Design, blocked_floor
from mtpverdict.sim import BootBatch, BootScenario, simulate_boots
from mtpverdict.stats.blocked import blocked_batch
from mtpverdict.stats.positions import device_position, position_failing
from mtpverdict.stats.procedure import batch_procedure

SEED = 20261201
DEVICE_SD = 5 * BOOT_SD  # issue 20: device effects 5x the boot noise
BOOTS_PER_ARM = 8  # every design spends the same accelerator time
DESIGNS = ((1, 8), (2, 4), (4, 2), (8, 1))  # (devices, rounds per device)
DESIGN = Design(depths=3, control_arms=2, cells=2)
ARMS_PER_ROUND = 5  # off_A, k1, k2, k3, off_B


@dataclass(frozen=True, slots=True)
class Decided:
    """Per-arm outcome codes of one batch, decided with and without blocking, and the control check."""

    blocked: np.ndarray  # (B, A)
    flat: np.ndarray  # (B, A)
    blocked_pass: np.ndarray  # (B,)


def _controls_pass(batch: BootBatch) -> np.ndarray:
    """decide's within-device position check of the control boots (residuals centred per cell, cells
    averaged), at decide's level."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a control boot with no cell left is NaN
        residuals = np.nanmean(batch.control - np.nanmean(batch.control, axis=2, keepdims=True), axis=1)
    device = batch.control_device if batch.control_device is not None else np.zeros(len(batch.control_order))
    found = device_position(
        batch.control_order, np.asarray(device, dtype=np.int64), batch.control_end, residuals
    )
    ends = np.broadcast_to(batch.control_end, residuals.shape)
    confounded = ends.all(axis=1)  # every control boot an end of its device (candidates on each)
    return np.asarray(~position_failing(found, ALPHA) & ~confounded)


def decide(batch: BootBatch, min_effect: float | None) -> Decided:
    arm, control = batch.blocked()
    positions = batch.positions() if batch.devices > 1 else None
    _, blocked = blocked_batch(
        arm, control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=min_effect, positions=positions
    )
    _, flat = batch_procedure(
        batch.arm, batch.control, alpha=ALPHA, equivalence_margin=MARGIN, min_effect=min_effect
    )
    return Decided(blocked.outcome, flat.outcome, _controls_pass(batch))


def _scenario(devices: int, rounds: int, effects: dict[str, tuple[float, ...]] | None = None) -> BootScenario:
    return BootScenario(
        f"devices-{devices}",
        sweep(effects),
        boots=rounds,
        devices=devices,
        device_sd=DEVICE_SD if devices > 1 else 0.0,
    )


def null_rows(campaigns: int) -> list[str]:
    rows = [
        "| devices x rounds | mode | false promotions, blocked [95% CP] | blocked, procedure alone | "
        "ignoring devices, procedure alone [95% CP] | controls fail (within device) |",
        "|---|---|---|---|---|---|",
    ]
    for d, r in DESIGNS:
        batch = simulate_boots(_scenario(d, r), np.random.default_rng([SEED, d, r]), campaigns)
        for mode, min_effect in MODES.items():
            got = decide(batch, min_effect)
            promoted = (got.blocked == BETTER).any(axis=1)
            blocked = int((promoted & got.blocked_pass).sum())
            flat = int((got.flat == BETTER).any(axis=1).sum())
            rows.append(
                f"| {d} x {r} | {mode} | {_rate(blocked, campaigns)} | {promoted.mean():.3f} | "
                f"{_rate(flat, campaigns)} | {1 - got.blocked_pass.mean():.3f} |"
            )
    return rows


def power_rows(campaigns: int) -> list[str]:
    rows = [
        "| devices x rounds | mode | blocked floor | k2 true effect (2x floor) | power, blocked [95% CP] | "
        "blocked, procedure alone | ignoring devices, procedure alone [95% CP] |",
        "|---|---|---|---|---|---|---|",
    ]
    for d, r in DESIGNS:
        for mode, min_effect in MODES.items():
            effect_floor = MARGIN if min_effect is None else min_effect
            floor = blocked_floor(BOOT_SD, d, r, DESIGN, ALPHA, min_effect=effect_floor)
            effect = 2 * floor
            sc = _scenario(d, r, {"k2": (effect, effect)})
            batch = simulate_boots(
                sc, np.random.default_rng([SEED, 99, d, r, round(effect * 1e6)]), campaigns
            )
            got = decide(batch, min_effect)
            blocked = int(((got.blocked[:, 1] == BETTER) & got.blocked_pass).sum())
            flat = int((got.flat[:, 1] == BETTER).sum())
            rows.append(
                f"| {d} x {r} | {mode} | {math.expm1(floor):+.1%} | {math.expm1(effect):+.1%} | "
                f"{_rate(blocked, campaigns)} | {(got.blocked[:, 1] == BETTER).mean():.3f} | "
                f"{_rate(flat, campaigns)} |"
            )
    return rows


SLOW_ENDS = ((8, 0.05), (16, 0.04))  # (devices, how much slower the first and last boot of a device are)


def slow_end_rows(campaigns: int) -> list[str]:
    """False promotions with slow device ends, one round per device, the earlier layout and the drawn one."""
    rows = [
        "| devices x rounds | first and last boot slower by | layout | false promotions [95% CP] | "
        "procedure alone | controls fail or confounded |",
        "|---|---|---|---|---|---|",
    ]
    for d, slow in SLOW_ENDS:
        for drawn in (False, True):
            sc = BootScenario(
                f"slow-ends-{d}",
                sweep(),
                boots=1,
                devices=d,
                device_sd=DEVICE_SD,
                ends_slow=-slow,
                drawn=drawn,
            )
            batch = simulate_boots(sc, np.random.default_rng([SEED, 7, d, int(drawn)]), campaigns)
            got = decide(batch, None)
            promoted = (got.blocked == BETTER).any(axis=1)
            layout = "drawn, controls included" if drawn else "off_A first, off_B last"
            false = int((promoted & got.blocked_pass).sum())
            rows.append(
                f"| {d} x 1 | {slow:.0%} | {layout} | {_rate(false, campaigns)}"
                f" | {promoted.mean():.3f} | {1 - got.blocked_pass.mean():.3f} |"
            )
    return rows


def wall_rows(boot_minutes: float = 10.0) -> list[str]:
    """Wall time of the same 8 boots per arm on D devices (5 arms, `boot_minutes` per boot)."""
    rows = ["| devices | rounds per device | wall time | saving against one device |", "|---|---|---|---|"]
    serial = ARMS_PER_ROUND * BOOTS_PER_ARM * boot_minutes
    for d, r in DESIGNS:
        wall = ARMS_PER_ROUND * r * boot_minutes
        rows.append(f"| {d} | {r} | {wall / 60:.1f} h | {1 - wall / serial:.1%} |")
    return rows


def run(campaigns: int) -> str:
    """Every table, as markdown."""
    return "\n".join(
        [
            f"Boot-level sd {BOOT_SD:.4f} (log), device level sd {DEVICE_SD:.4f} (5x), 2 cells, "
            f"{BOOTS_PER_ARM} boots per arm in all; {campaigns} campaigns per row.",
            "",
            "False promotions under the null (every depth = off):",
            "",
            *null_rows(campaigns),
            "",
            "Power, k2 at twice the blocked floor (k1 and k3 null):",
            "",
            *power_rows(campaigns),
            "",
            "Slow device ends (default mode), one round per device:",
            "",
            *slow_end_rows(campaigns),
            "",
            "Wall time (10 min per boot, 5 arms):",
            "",
            *wall_rows(),
        ]
    )


def end_to_end_rows(campaigns: int) -> list[str]:
    """Full records (mtpverdict.sim.simulate_campaign) of 8 devices x 1 round, first and last boot
    of each device 5% slow, every depth null, decided by the real `decide` under the default policy."""
    from mtpverdict.decide import decide as decide_records
    from mtpverdict.formats.decision import DecisionKind
    from mtpverdict.formats.results_io import results_from_records
    from mtpverdict.rules import load_policy
    from mtpverdict.sim import Scenario, SimArm, simulate_campaign

    policy = load_policy("default")
    arms = (SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B"))
    rows = [
        "| layout | campaigns | promoted [95% CP] | inconclusive | positions control failed |",
        "|---|---|---|---|---|",
    ]
    for drawn in (False, True):
        promoted = inconclusive = confounded = 0
        for i in range(campaigns):
            sc = Scenario(
                "e2e",
                arms,
                boots_per_arm=1,
                concurrency=(1, 4),
                completion_tokens=64,
                devices=8,
                order_seed=SEED + i if drawn else None,
                ends_slow=-0.05,
            )
            campaign, records = simulate_campaign(sc, np.random.default_rng([SEED, 5, i, int(drawn)]))
            d = decide_records(results_from_records(campaign, records, label="e2e"), policy)
            promoted += d.decision is DecisionKind.PROMOTE
            inconclusive += d.decision is DecisionKind.INCONCLUSIVE
            confounded += any(c.name == "positions" for c in d.controls)
        layout = "drawn, controls included" if drawn else "off_A first, off_B last"
        rows.append(
            f"| {layout} | {campaigns} | {_rate(promoted, campaigns)} | {inconclusive / campaigns:.3f} | "
            f"{confounded / campaigns:.3f} |"
        )
    return rows
