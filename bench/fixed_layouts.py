"""Fixed layouts under drift: each of 60 drawn 8 x 1 layouts repeated, with and without the drift line.

`python bench/calibration.py --fixed-layouts` runs this. A campaign over 8 devices x 1 round draws its
layout once, from its order_seed (stats/layout.py); here each of the order seeds 0..59 is held fixed and
its campaigns differ only in their measurements (mtpverdict.sim.simulate_boots with layout_seed). Every
depth is null; a linear drift of 5% (or none) runs over each device's five boots. Decided as `decide`
decides a campaign over devices: stats.blocked with the position check and the confounded-layout
refusal. "mean of the controls" compares each arm with the controls of its device as before; "drift
line" compares it with the controls' within-device drift line at its own positions (positions=).
Power: layouts drawn per campaign, k2 truly +5% or +8%, 8 devices x 1 and x 2 rounds, device levels
sd 10%. Fixed order: records laid out off_A first and off_B last on every round (written before
collect drew the order), 4 x 2, 8 x 2 and 4 x 3, with slow device ends, drift or a slow first boot,
every depth null at min_effect 0. Rates carry two-sided 95% Clopper-Pearson intervals.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
from nuisance_calibration import promoted_by_arm as promoted
from procedure_calibration import _rate, sweep

from mtpverdict.sim import BootScenario, simulate_boots

SEED = 99
LAYOUTS = 60
DEVICES = 8


def layout_rows(campaigns: int) -> list[str]:
    out = [
        "| drift over each device | mode | comparison | worst layout (order_seed) [95% CP] | mean over "
        f"{LAYOUTS} layouts | layouts above 5% |",
        "|---|---|---|---|---|---|",
    ]
    for drift in (0.05, 0.0):
        for mode, min_effect in (("zero", 0.0), ("margin", None)):
            counts: dict[bool, list[int]] = {False: [], True: []}
            for seed in range(LAYOUTS):
                sc = BootScenario(
                    "fixed", sweep(), boots=1, devices=DEVICES, drift_total=drift, layout_seed=seed
                )
                batch = simulate_boots(sc, np.random.default_rng([SEED, seed]), campaigns)
                for line in (False, True):
                    counts[line].append(int(promoted(batch, min_effect, line).any(axis=1).sum()))
            for line in (False, True):
                found = np.array(counts[line])
                worst = int(found.argmax())
                name = "drift line" if line else "mean of the controls"
                mean, above = found.mean() / campaigns, int((found > 0.05 * campaigns).sum())
                out.append(
                    f"| {drift:.0%} | {mode} | {name} | {_rate(int(found[worst]), campaigns)} "
                    f"(seed {worst}) | {mean:.4f} | {above} |"
                )
    return out


def power_rows(campaigns: int) -> list[str]:
    out = [
        "| design | k2 truly | power, mean of the controls | power, drift line |",
        "|---|---|---|---|",
    ]
    for rounds in (1, 2):
        for effect in (0.05, 0.08):
            sc = BootScenario(
                "power",
                sweep({"k2": (math.log1p(effect),) * 2}),
                boots=rounds,
                devices=DEVICES,
                device_sd=0.1,
            )
            batch = simulate_boots(
                sc, np.random.default_rng([SEED, 1000 + rounds, round(effect * 100)]), campaigns
            )
            found = [int(promoted(batch, None, line)[:, 1].sum()) for line in (False, True)]
            out.append(
                f"| {DEVICES} x {rounds} | +{effect:.0%} | {_rate(found[0], campaigns)} | "
                f"{_rate(found[1], campaigns)} |"
            )
    return out


def fixed_order_rows(campaigns: int) -> list[str]:
    """Records laid out off_A first and off_B last on every round (before collect drew the order):
    the controls hold each device's ends, the candidates its middle; every depth null, min_effect 0."""
    out = [
        "| devices x rounds | nuisance | mean of the controls | drift line (slope and ends) |",
        "|---|---|---|---|",
    ]
    nuisances: tuple[tuple[str, dict[str, Any]], ...] = (
        ("none", {}),
        ("ends 3% slow", {"ends_slow": -0.03}),
        ("ends 5% slow", {"ends_slow": -0.05}),
        ("drift 5%", {"drift_total": 0.05}),
        ("first boot 5% slow", {"first_slow": -0.05}),
    )
    for devices, rounds in ((4, 2), (8, 2), (4, 3)):
        for i, (name, settings) in enumerate(nuisances):
            sc = replace(
                BootScenario("order", sweep(), boots=rounds, devices=devices, drawn=False), **settings
            )
            batch = simulate_boots(sc, np.random.default_rng([SEED, 2000 + devices, rounds, i]), campaigns)
            found = [int(promoted(batch, 0.0, line).any(axis=1).sum()) for line in (False, True)]
            rates = " | ".join(_rate(n, campaigns) for n in found)
            out.append(f"| {devices} x {rounds} | {name} | {rates} |")
    return out


def run(campaigns: int) -> str:
    return "\n".join(
        [
            f"Every depth null on {LAYOUTS} fixed {DEVICES} x 1 layouts, {campaigns} campaigns each:",
            "",
            *layout_rows(campaigns),
            "",
            f"Power, layouts drawn per campaign, {4 * campaigns} campaigns per row (margin mode):",
            "",
            *power_rows(4 * campaigns),
            "",
            f"Fixed order (off_A first, off_B last every round), min_effect 0, {campaigns} per row:",
            "",
            *fixed_order_rows(campaigns),
        ]
    )
