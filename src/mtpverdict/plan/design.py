"""The test decide runs, as functions of the design: floors, power, the boots a depth needs, the plan."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mtpverdict.plan.model import (
    COLD_RUNS_PER_BOOT,
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    MAX_BOOTS_PER_ARM,
    MEDIAN_EFFICIENCY_DRAWS,
    MEDIAN_EFFICIENCY_SEED,
    RUNS_PER_BOOT_CHOICES,
    UNCERTAIN_BOOT_DF,
    Costs,
    Design,
    Plan,
    PlanRow,
    VarianceComponents,
)

if TYPE_CHECKING:
    pass


@functools.cache
def median_efficiency(runs: int) -> float:
    """Variance of the median of `runs` normal values over the variance of their mean (1 for 1 or 2)."""
    if runs < 1:
        raise ValueError(f"runs must be 1 or more, not {runs}")
    if runs <= 2:
        return 1.0
    import numpy as np

    rng = np.random.default_rng(MEDIAN_EFFICIENCY_SEED)
    draws = rng.standard_normal((MEDIAN_EFFICIENCY_DRAWS, runs))
    return float(np.median(draws, axis=1).var() / (1.0 / runs))


def boot_level_sd(boot_sd: float, run_sd: float, runs_per_boot: int) -> float:
    """Standard deviation of one boot's statistic (the median of its counted runs), log scale."""
    return math.sqrt(boot_sd**2 + median_efficiency(runs_per_boot) * run_sd**2 / runs_per_boot)


def design_df(boots_per_arm: int, design: Design) -> int:
    """Degrees of freedom of the pooled boot variance: the controls are one configuration."""
    return design.control_arms * boots_per_arm - 1 + design.depths * (boots_per_arm - 1)


def standard_error(sd: float, boots_per_arm: int, design: Design) -> float:
    """Standard error of a depth's mean log statistic minus the controls'."""
    return sd * math.sqrt(1.0 / boots_per_arm + 1.0 / (design.control_arms * boots_per_arm))


def critical_value(alpha: float, df: int, depths: int) -> float:
    """One-sided t critical value at alpha / depths: the most stringent Holm step."""
    from mtpverdict.stats import tdist

    return float(tdist.t_ppf(1.0 - alpha / max(depths, 1), df))


def design_floor(sd: float, boots_per_arm: int, design: Design, alpha: float) -> float:
    """The smallest log effect the design calls better: what `decide` prints as the floor."""
    df = design_df(boots_per_arm, design)
    if df < 1:
        return math.inf
    return critical_value(alpha, df, design.depths) * standard_error(sd, boots_per_arm, design)


def design_power(log_effect: float, sd: float, boots_per_arm: int, design: Design, alpha: float) -> float:
    """Power to call one depth with a true log effect better at every cell.

    Per cell it is the noncentral t probability beyond the critical value at alpha / depths (the
    first Holm step, i.e. one depth works and the others do not). Across cells it is the per-cell
    power to the power `cells`: the cells of one boot share its shift, so their tests are positively
    dependent and the product is a lower bound of the joint power.
    """
    from mtpverdict.stats import tdist

    df = design_df(boots_per_arm, design)
    if df < 1:
        return 0.0
    se = standard_error(sd, boots_per_arm, design)
    if se == 0:
        return 1.0 if log_effect > 0 else 0.0
    per_cell = float(tdist.nct_sf(critical_value(alpha, df, design.depths), df, log_effect / se))
    return per_cell ** max(design.cells, 1)


def blocked_df(sd: float, devices: int, rounds: int, design: Design) -> float:
    """Degrees of freedom of the blocked comparison (stats/blocked.py) of a balanced design.

    With two or more rounds per device, each group's variance is pooled within device (the arm
    devices x (rounds - 1) df, the controls devices x (controls x rounds - 1)), combined by
    Welch-Satterthwaite; with one round, the spread of the per-device differences (devices - 1).
    """
    if rounds >= 2:
        n_a, n_c = devices * rounds, design.control_arms * devices * rounds
        df_a, df_c = devices * (rounds - 1), devices * (design.control_arms * rounds - 1)
        v_a, v_c = sd**2 / n_a, sd**2 / n_c
        return float((v_a + v_c) ** 2 / (v_a**2 / df_a + v_c**2 / df_c))
    return float(devices - 1)


def blocked_floor(
    sd: float, devices: int, rounds: int, design: Design, alpha: float, min_effect: float = 0.0
) -> float:
    """The floor the blocked procedure states for `rounds` rounds on each of `devices` devices.

    log(1 + min_effect) + t(1 - alpha / depths, blocked_df) x sd sqrt(1/n + 1/(controls n)) with n =
    devices x rounds boots per arm; device levels cancel, so they do not enter it.
    """
    from mtpverdict.stats import tdist

    df = blocked_df(sd, devices, rounds, design)
    if df < 1:
        return math.inf
    n = devices * rounds
    se = sd * math.sqrt(1.0 / n + 1.0 / (design.control_arms * n))
    return math.log1p(min_effect) + float(tdist.t_ppf(1.0 - alpha / max(design.depths, 1), df)) * se


def blocked_power(
    log_effect: float, sd: float, devices: int, rounds: int, design: Design, alpha: float
) -> float:
    """Power of the blocked procedure to call a depth better at every cell (as design_power)."""
    from mtpverdict.stats import tdist

    df = blocked_df(sd, devices, rounds, design)
    if df < 1:
        return 0.0
    n = devices * rounds
    se = sd * math.sqrt(1.0 / n + 1.0 / (design.control_arms * n))
    if se == 0:
        return 1.0 if log_effect > 0 else 0.0
    critical = float(tdist.t_ppf(1.0 - alpha / max(design.depths, 1), df))
    return float(tdist.nct_sf(critical, df, log_effect / se)) ** max(design.cells, 1)


POSITION_TERMS = 2  # the control position check fits a slope and the ends against the middle per device


def layout_rounds(devices: int, control_arms: int) -> int:
    """Fewest rounds per device for which the control position check can run (stats/positions.py).

    The check has (control boots) - devices - 2 degrees of freedom; it needs one. With one round on
    one device every control boot is an end of the device (confounded with role: not decided), so one
    device needs two rounds whatever the count.
    """
    if devices < 1 or control_arms < 1:
        raise ValueError(f"a layout needs a device and a control arm, not {devices} and {control_arms}")
    rounds = 1
    while control_arms * devices * rounds - devices - POSITION_TERMS < 1 or (devices == 1 and rounds < 2):
        rounds += 1
    return rounds


def _single_device_row(
    log_effect: float, sd: float, design: Design, alpha: float, power: float, max_boots: int
) -> tuple[int | None, int, float, float]:
    """Fewest boots per arm reaching `power` on one device; its df, floor and power (at the largest
    design tried when none reaches it)."""
    n = required_boots(log_effect, sd, design, alpha, power, max_boots)
    shown = n if n is not None else max_boots
    return (
        n,
        design_df(shown, design),
        design_floor(sd, shown, design, alpha),
        design_power(log_effect, sd, shown, design, alpha),
    )


def _blocked_row(
    log_effect: float, sd: float, design: Design, alpha: float, power: float, max_boots: int
) -> tuple[int | None, int, float, float]:
    """Fewest boots per arm (a multiple of the devices) reaching `power`; its df, floor and power
    (at the largest design tried when none reaches it)."""
    d = design.devices
    tried = range(layout_rounds(d, design.control_arms), max(max_boots // d, 1) + 1)
    rounds = next((r for r in tried if blocked_power(log_effect, sd, d, r, design, alpha) >= power), None)
    shown = rounds if rounds is not None else tried[-1]
    return (
        None if rounds is None else d * rounds,
        round(blocked_df(sd, d, shown, design)),
        blocked_floor(sd, d, shown, design, alpha),
        blocked_power(log_effect, sd, d, shown, design, alpha),
    )


def required_boots(
    log_effect: float,
    sd: float,
    design: Design,
    alpha: float,
    power: float,
    max_boots: int = MAX_BOOTS_PER_ARM,
) -> int | None:
    """The fewest boots per arm whose power reaches `power`; None when more than `max_boots`."""
    for n in range(1, max_boots + 1):
        if design_power(log_effect, sd, n, design, alpha) >= power:
            return n
    return None


def make_plan(
    effect: float,
    components: VarianceComponents,
    design: Design,
    costs: Costs,
    *,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    runs_choices: Sequence[int] = RUNS_PER_BOOT_CHOICES,
    max_boots: int = MAX_BOOTS_PER_ARM,
    cold_runs: int = COLD_RUNS_PER_BOOT,
) -> Plan:
    """For each number of counted runs per boot, the fewest boots per arm that resolve `effect`."""
    check_parameters(effect, alpha, power)
    if design.depths < 1 or design.control_arms < 1 or design.cells < 1 or design.devices < 1:
        raise ValueError("a design needs at least one depth, one control arm, one cell and one device")
    log_effect = math.log1p(effect)
    rows: list[PlanRow] = []
    for runs in sorted(set(runs_choices)):
        if runs < 1:
            raise ValueError(f"runs per boot must be 1 or more, not {runs}")
        sd = boot_level_sd(components.boot_sd, components.run_sd, runs)
        rows.append(_plan_row(runs, sd, log_effect, design, costs, alpha, power, max_boots, cold_runs))
    reachable = [r for r in rows if r.boots_per_arm is not None]

    def cost(row: PlanRow) -> tuple[float, int, int]:
        spent = row.wall_seconds if row.wall_seconds is not None else math.inf
        return (spent, row.total_boots, row.total_runs)

    best = min(reachable, key=cost) if reachable else None
    return Plan(
        effect=effect,
        alpha=alpha,
        power=power,
        design=design,
        components=components,
        costs=costs,
        rows=tuple(rows),
        best=best,
        notes=(
            *components.notes,
            *_plan_notes(best, effect, power, design, components, max_boots, cold_runs),
        ),
    )


def _plan_row(
    runs: int,
    sd: float,
    log_effect: float,
    design: Design,
    costs: Costs,
    alpha: float,
    power: float,
    max_boots: int,
    cold_runs: int,
) -> PlanRow:
    """One design: `runs` counted runs per boot, the fewest boots per arm reaching `power`, its cost."""
    find = _blocked_row if design.devices > 1 else _single_device_row
    n, df, floor, reached = find(log_effect, sd, design, alpha, power, max_boots)
    shown = n if n is not None else max_boots
    total_boots = (design.depths + design.control_arms) * shown
    total_runs = total_boots * (design.cells * runs + cold_runs)
    seconds = None
    if costs.boot_seconds is not None and costs.run_seconds is not None:
        seconds = total_boots * costs.boot_seconds + total_runs * costs.run_seconds
    return PlanRow(
        runs_per_boot=runs,
        boots_per_arm=n,
        df=df,
        boot_level_sd=sd,
        floor=floor,
        power=reached,
        total_boots=total_boots,
        total_runs=total_runs,
        seconds=seconds,
        wall_seconds=None if seconds is None else seconds / design.devices,
    )


def _plan_notes(
    best: PlanRow | None,
    effect: float,
    power: float,
    design: Design,
    components: VarianceComponents,
    max_boots: int,
    cold_runs: int,
) -> list[str]:
    """What a reader of the plan must know: nothing reaches the power, power is a lower bound, the
    boot sd is uncertain, cold runs cost time."""
    notes: list[str] = []
    if best is None:
        notes.append(
            f"no design with up to {max_boots} boots per arm reaches power {power:.0%} for "
            f"+{effect:.1%}: reduce the noise (boot-to-boot first) or plan for a larger effect"
        )
    elif design.cells > 1:
        notes.append(
            f"power is a lower bound: a depth must be better at each of {design.cells} cells "
            "(intersection-union test), taken as the product of the per-cell powers"
        )
    if components.boot_df and components.boot_df < UNCERTAIN_BOOT_DF:
        notes.append(
            f"the boot-to-boot sd rests on {components.boot_df} degree(s) of freedom: an uncertain "
            "estimate; a plan from it may be optimistic"
        )
    if cold_runs:
        notes.append(
            f"each boot also runs {cold_runs} cold run(s) first, reported and not counted (the cost "
            "includes it)"
        )
    rounds = layout_rounds(design.devices, design.control_arms)
    notes.append(
        f"the layout needs {rounds} round(s) per device on {design.devices} device(s): collect draws "
        "every round's arm order, controls included, and the control position check (a slope and the "
        "device's ends against its middle) needs that many control boots; with fewer, or with every "
        "control boot at an end of its device, the campaign is not decided"
    )
    return notes


def check_parameters(effect: float, alpha: float, power: float) -> None:
    """Raise ValueError naming the option when a planning parameter is out of range."""
    if not (math.isfinite(effect) and effect > 0):
        raise ValueError(f"--effect must be a positive relative effect such as 5%, not {effect}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"--alpha must be between 0 and 0.5, not {alpha}")
    if not 0 < power < 1:
        raise ValueError(f"--power must be between 0 and 1, not {power}")
