"""The plan as text: the inputs, one row per runs-per-boot choice, the recommendation, notes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mtpverdict._logscale import change
from mtpverdict.plan.model import (
    MAX_BOOTS_PER_ARM,
    Plan,
)

if TYPE_CHECKING:
    pass


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def render_plan(plan: Plan) -> str:
    """The plan as text: the inputs, one row per runs-per-boot choice, the recommendation, notes."""
    from tabulate import tabulate

    c = plan.components
    d = plan.design
    lines = [
        f"effect +{plan.effect:.1%} at alpha {plan.alpha} (one-sided, Holm across {d.depths} depth(s)), "
        f"power {plan.power:.0%}, better at every one of {d.cells} cell(s)",
        f"noise (log scale): boot-to-boot sd {c.boot_sd * 100:.2f}%, run-to-run sd {c.run_sd * 100:.2f}% "
        f"({c.source}{f', {c.boot_df} df' if c.boot_df else ''})",
        f"arms: {d.depths} depth(s) + {d.control_arms} control arm(s), each booted as often",
    ]
    if d.devices > 1:
        lines.append(
            f"devices: {d.devices}, each running every arm (a block: arms compared within device); boots "
            f"per arm are a multiple of {d.devices}; time is accelerator time, wall time with the devices "
            "in parallel"
        )
    if plan.costs.boot_seconds is not None or plan.costs.run_seconds is not None:
        boot = "-" if plan.costs.boot_seconds is None else f"{plan.costs.boot_seconds:.0f} s"
        run = "-" if plan.costs.run_seconds is None else f"{plan.costs.run_seconds:.1f} s"
        lines.append(f"cost: {boot} per boot, {run} per run ({plan.costs.source})")
    rows = [
        [
            r.runs_per_boot,
            r.boots_per_arm if r.boots_per_arm is not None else f">{MAX_BOOTS_PER_ARM}",
            r.df,
            f"{r.boot_level_sd * 100:.2f}%",
            f"{change(r.floor) * 100:.1f}%" if math.isfinite(r.floor) else "-",
            f"{r.power:.2f}",
            r.total_boots,
            r.total_runs,
            _hours(r.seconds),
            *([_hours(r.wall_seconds)] if d.devices > 1 else []),
        ]
        for r in plan.rows
    ]
    headers = ["runs/boot", "boots/arm", "df", "boot sd", "floor", "power", "boots", "runs", "time"]
    headers += ["wall time"] if d.devices > 1 else []
    lines.append("")
    lines.append(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    lines.append("")
    b = plan.best
    if b is not None:
        lines.append(
            f"plan: {b.boots_per_arm} boot(s) per arm, {b.runs_per_boot} counted run(s) per cell and boot: "
            f"{b.total_boots} boots, {b.total_runs} runs"
            + (f", {_hours(b.seconds)} of accelerator time" if b.seconds is not None else "")
            + (
                f", {_hours(b.wall_seconds)} of wall time on {d.devices} devices"
                if b.wall_seconds is not None and d.devices > 1
                else ""
            )
        )
    else:
        lines.append("plan: none reaches the power")
    lines.extend(f"note: {n}" for n in plan.notes)
    return "\n".join(lines) + "\n"
