"""Campaign planning: variance components from a pilot, the boots and runs that resolve an effect, their cost.

Pure functions. The model is the one `decide` tests with: the per-run log statistic of a configuration
in one cell is its level plus a boot shift (sd `boot_sd`, shared by every cell of the boot) plus run
noise (sd `run_sd`). A boot is reduced to the median of its r counted runs, so its statistic has
variance boot_sd^2 + e(r) run_sd^2 / r, where e(r) is the variance of a median of r normal values
relative to their mean. `decide` pools that variance over every configuration booted more than once
(off_A and off_B are one configuration) and compares each depth with the controls by a one-sided
t-test, Holm across the depths; "faster at every cell" is an intersection-union test across cells.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict._logscale import change
from mtpverdict.errors import InputError, Problem

if TYPE_CHECKING:
    from mtpverdict.formats.results_io import Results
    from mtpverdict.stats.procedure import ArmOutcome, FamilyOutcome

DEFAULT_ALPHA = 0.05  # one-sided family-wise false-promotion rate, as in the default policy
DEFAULT_POWER = 0.80  # conventional target power (Cohen 1988, ch. 2)
RUNS_PER_BOOT_CHOICES = (1, 2, 3, 5)  # counted runs per cell and boot that a plan compares
MAX_BOOTS_PER_ARM = 40  # beyond this a campaign is better split or its noise reduced first
MIN_BOOT_DF = 1  # degrees of freedom for the boot variance below which a pilot cannot separate it
# below this many degrees of freedom an sd estimate is uncertain by more than about 20% (its relative
# standard error is about 1 / sqrt(2 df)), so the plan says it may be optimistic
UNCERTAIN_BOOT_DF = 10
COLD_RUNS_PER_BOOT = 1  # the first run after a boot is cold: run, reported, not counted (default policy)
# e(r) is estimated once per r by simulation with a fixed generator, so plans are reproducible; the
# standard error of a variance from this many draws is about 0.3% of it (sqrt(2 / draws)).
MEDIAN_EFFICIENCY_DRAWS = 200_000
MEDIAN_EFFICIENCY_SEED = 20260910


@dataclass(frozen=True, slots=True)
class VarianceComponents:
    """Log-scale standard deviations of a boot's shift and of a run inside a boot, and their origin."""

    boot_sd: float
    run_sd: float
    boot_df: int  # boots minus configurations: the information behind boot_sd (0 when stated)
    source: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Design:
    """The shape of a campaign: who shares the baseline and what must be better."""

    depths: int = 3  # candidate arms compared with one baseline (the Holm family)
    control_arms: int = 2  # control arms, each booted as often as a candidate (off_A and off_B)
    cells: int = 1  # (workload, concurrency) cells at which a depth must be better, every one
    devices: int = 1  # devices running every arm in parallel, each a block (stats/blocked.py)


@dataclass(frozen=True, slots=True)
class Costs:
    """Accelerator seconds: one boot until ready, one measured run; None when not known."""

    boot_seconds: float | None
    run_seconds: float | None
    source: str = "stated"


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One candidate design: runs per boot and the fewest boots per arm that reach the power."""

    runs_per_boot: int  # counted runs per cell and boot
    boots_per_arm: int | None  # None: not reachable within MAX_BOOTS_PER_ARM
    df: int
    boot_level_sd: float  # sd of a boot's statistic (log scale)
    floor: float  # smallest log effect the design calls better (critical value x standard error)
    power: float  # at the planned effect, a lower bound over the cells
    total_boots: int
    total_runs: int
    seconds: float | None  # accelerator seconds, every device's added up
    wall_seconds: float | None = None  # with the devices running in parallel: seconds / devices


@dataclass(frozen=True, slots=True)
class Plan:
    """Designs that resolve `effect` at `alpha` with `power`, the cheapest first among the reachable."""

    effect: float  # relative effect, e.g. 0.05 for +5%
    alpha: float
    power: float
    design: Design
    components: VarianceComponents
    costs: Costs
    rows: tuple[PlanRow, ...]
    best: PlanRow | None
    notes: tuple[str, ...]


# --------------------------------------------------------------------------------------------------
# the test decide runs, as functions of the design


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


# --------------------------------------------------------------------------------------------------
# pilots


def stated_components(boot_sd: float, run_sd: float) -> VarianceComponents:
    """Variance components given by the user (log-scale sds, e.g. 0.02 for 2%)."""
    for name, value in (("--boot-sd", boot_sd), ("--run-sd", run_sd)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a non-negative standard deviation, not {value}")
    return VarianceComponents(boot_sd=boot_sd, run_sd=run_sd, boot_df=0, source="stated")


def _counted_runs(
    results: Results, metric: str, include_cold: bool
) -> tuple[list[str], list[str], list[float]]:
    """(configuration|cell label, boot label, log value) of every counted run of `metric`."""
    from mtpverdict.stats.runs import run_table, values_table

    values = values_table(run_table(results.requests), results.summaries)
    values = values[(values["metric"] == metric) & values["runs_known"].astype(bool)]
    if not include_cold:
        values = values[~values["cold"].astype(bool)]
    config = {a.name: (f"control:{a.family}" if a.is_control else a.name) for a in results.campaign.arms}
    cells: list[str] = []
    boots: list[str] = []
    logs: list[float] = []
    for arm, boot, workload, conc, value in zip(
        values["arm"], values["boot"], values["workload"], values["concurrency"], values["value"], strict=True
    ):
        cells.append(f"{config[str(arm)]}|{workload}|{int(conc)}")
        boots.append(f"{arm}#{int(boot)}")
        logs.append(math.log(float(value)))
    return cells, boots, logs


def pilot_design(results: Results, metric: str = "decode_tps") -> Design:
    """Depths, control arms and cells of a pilot campaign (the largest family)."""
    campaign = results.campaign
    depths = max((len(campaign.candidates(f)) for f in campaign.families), default=0)
    controls = max((len(campaign.controls(f)) for f in campaign.families), default=0)
    req = results.requests
    cells = len(set(zip(req["workload"], req["concurrency"], strict=True))) if len(req) else 1
    if not len(req) and len(results.summaries):
        s = results.summaries[results.summaries["metric"] == metric]
        cells = max(1, len(set(zip(s["workload"], s["concurrency"], strict=True))))
    return Design(depths=max(depths, 1), control_arms=max(controls, 1), cells=max(cells, 1))


def pilot_components(
    results: Results,
    *,
    metric: str = "decode_tps",
    include_cold: bool = False,
    boot_sd: float | None = None,
    run_sd: float | None = None,
) -> VarianceComponents:
    """Boot-to-boot and run-to-run sd of log `metric` from a pilot campaign.

    statsmodels mixedlm (REML): fixed effects per configuration and cell, the boot as a random
    intercept shared by every cell it measured, runs as the residual. A pilot whose arms were each
    booted once cannot separate the two (each boot shift is confounded with its arm): then the boot
    sd must be stated, and the run sd comes from the spread of runs inside each boot and cell.
    """
    source = results.path
    cells, boots, logs = _counted_runs(results, metric, include_cold)
    if len(logs) < 2:
        raise InputError([Problem(source, f"the pilot has fewer than two counted {metric} runs")])
    per_arm_boots: dict[str, set[str]] = {}
    for boot in boots:
        per_arm_boots.setdefault(boot.split("#", 1)[0], set()).add(boot)
    if max(len(b) for b in per_arm_boots.values()) < 2 and boot_sd is None:
        raise InputError(
            [
                Problem(
                    source,
                    "every arm was booted once: boot-to-boot variance cannot be separated from "
                    "run-to-run variance (each boot is confounded with its arm); give --boot-sd, or "
                    "pilot with two or more boots of at least one arm",
                )
            ]
        )
    within_sd, within_df = _within_boot_sd(cells, boots, logs)
    notes: list[str] = []
    if max(len(b) for b in per_arm_boots.values()) < 2:
        if within_df < 1:
            raise InputError(
                [
                    Problem(
                        source, "no boot measured a cell twice: the run sd cannot be estimated; give --run-sd"
                    )
                ]
            )
        assert boot_sd is not None
        return VarianceComponents(
            boot_sd=boot_sd,
            run_sd=run_sd if run_sd is not None else within_sd,
            boot_df=0,
            source="boot sd stated; run sd from runs inside each boot and cell"
            if run_sd is None
            else "stated",
            notes=("one boot per arm: the boot-to-boot sd is the stated one, not measured",),
        )
    fitted_boot, fitted_run, boot_df, fit_notes = _mixedlm(cells, boots, logs, source)
    notes.extend(fit_notes)
    parts = []
    if boot_sd is not None:
        parts.append("boot sd stated")
    if run_sd is not None:
        parts.append("run sd stated")
    origin = "pilot, mixedlm REML (boot random intercept)"
    return VarianceComponents(
        boot_sd=boot_sd if boot_sd is not None else fitted_boot,
        run_sd=run_sd if run_sd is not None else fitted_run,
        boot_df=boot_df,
        source=origin + (f"; {', '.join(parts)}" if parts else ""),
        notes=tuple(notes),
    )


def _within_boot_sd(cells: list[str], boots: list[str], logs: list[float]) -> tuple[float, int]:
    groups: dict[tuple[str, str], list[float]] = {}
    for cell, boot, value in zip(cells, boots, logs, strict=True):
        groups.setdefault((cell, boot), []).append(value)
    ss = 0.0
    df = 0
    for values in groups.values():
        if len(values) >= 2:
            mean = sum(values) / len(values)
            ss += sum((v - mean) ** 2 for v in values)
            df += len(values) - 1
    return (math.sqrt(ss / df) if df else math.nan), df


def _mixedlm(
    cells: list[str], boots: list[str], logs: list[float], source: str
) -> tuple[float, float, int, list[str]]:
    import numpy as np
    import pandas as pd
    import statsmodels.formula.api as smf

    frame = pd.DataFrame({"y": logs, "cell": cells, "boot": boots})
    configs = {c.split("|", 1)[0] for c in cells}
    boot_df = len(set(boots)) - len(configs)
    if boot_df < MIN_BOOT_DF:
        raise InputError(
            [Problem(source, "no configuration was booted twice: give --boot-sd or pilot with more boots")]
        )
    # statsmodels judges the boundary on an absolute scale (a variance below 0.01), so fit on y divided
    # by its spread around the cell means and scale the variances back
    spread = float((frame["y"] - frame.groupby("cell")["y"].transform("mean")).std())
    if not (math.isfinite(spread) and spread > 0):
        raise InputError([Problem(source, "every run of a cell has the same value: no noise to estimate")])
    frame["y"] = frame["y"] / spread
    formula = "y ~ C(cell)" if frame["cell"].nunique() > 1 else "y ~ 1"
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = smf.mixedlm(formula, frame, groups=frame["boot"]).fit(reml=True)
        except (np.linalg.LinAlgError, ValueError) as exc:
            raise InputError([Problem(source, f"the mixed model could not be fitted: {exc}")]) from None
    boot_var = float(np.asarray(fit.cov_re)[0, 0]) * spread**2
    run_var = float(fit.scale) * spread**2
    if not (math.isfinite(boot_var) and math.isfinite(run_var)):
        raise InputError([Problem(source, "the mixed model gave no finite variance; the pilot is too small")])
    for w in caught:
        text = str(w.message).splitlines()[0]
        if "boundary" in text.lower():
            notes.append(
                "the boot-to-boot variance is at or near zero next to the run-to-run variance (the "
                "mixed model's boundary): the pilot saw little spread between boots"
            )
        else:
            notes.append(f"mixed model: {text}")
    return math.sqrt(max(boot_var, 0.0)), math.sqrt(max(run_var, 0.0)), boot_df, sorted(set(notes))


def pilot_costs(results: Results) -> Costs:
    """Mean seconds to ready of the pilot's boots and mean wall seconds of its measured runs."""
    boots = results.boots
    ready = [
        float(s)
        for s, status in zip(boots["ready_seconds"], boots["status"], strict=True)
        if status == "ready" and s is not None and math.isfinite(float(s))
    ]
    req = results.requests
    run_seconds: float | None = None
    runs = 0
    if len(req):
        measured = req[~req["warmup"].astype(bool)]
        spans = (
            measured.groupby(["arm", "boot", "workload", "concurrency", "rep"])
            .agg(start=("t_start", "min"), end=("t_end", "max"))
            .dropna()
        )
        runs = len(spans)
        if runs:
            run_seconds = float((spans["end"] - spans["start"]).mean())
    return Costs(
        boot_seconds=sum(ready) / len(ready) if ready else None,
        run_seconds=run_seconds,
        source=f"pilot: {len(ready)} boot(s), {runs} run(s)",
    )


# --------------------------------------------------------------------------------------------------
# rendering


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


# --------------------------------------------------------------------------------------------------
# the family procedure (stats/procedure.py): per-arm (Welch) variance, and a way out of "inconclusive"


def welch_df(sd_arm: float, n_arm: int, sd_control: float, n_control: int) -> float:
    """Welch-Satterthwaite degrees of freedom of an arm against the controls, from their boot sds."""
    v_a, v_c = sd_arm**2 / n_arm, sd_control**2 / n_control
    if n_arm < 2 or n_control < 2 or v_a + v_c == 0:
        return math.nan
    return (v_a + v_c) ** 2 / (v_a**2 / (n_arm - 1) + v_c**2 / (n_control - 1))


def welch_floor(
    sd: float, boots_per_arm: int, design: Design, alpha: float, min_effect: float = 0.0
) -> float:
    """The floor the family procedure states for a design whose boots share one sd (log scale).

    log(1 + min_effect) + t(1 - alpha / depths, Welch df) x sd sqrt(1/n + 1/(controls n)): Holm's first
    step. The df is the one the true sds give; a campaign's own estimate varies around it.
    """
    from mtpverdict.stats import tdist

    n_c = design.control_arms * boots_per_arm
    df = welch_df(sd, boots_per_arm, sd, n_c)
    if math.isnan(df):
        return math.inf
    se = sd * math.sqrt(1.0 / boots_per_arm + 1.0 / n_c)
    return math.log1p(min_effect) + float(tdist.t_ppf(1.0 - alpha / max(design.depths, 1), df)) * se


@dataclass(frozen=True, slots=True)
class Resolution:
    """What an arm's outcome lacks, and the boots per arm that would likely settle it."""

    arm: str
    outcome: str  # the arm's outcome now (stats.procedure.Outcome)
    missing: tuple[str, ...]  # what is missing, one sentence each
    current_boots: int  # boots per arm now (the fewest over its measured cells)
    boots_per_arm: int | None  # likely to settle with this many; None: not within max_boots
    likely: str | None  # the outcome it would most likely settle to
    probability: float  # that it settles at boots_per_arm, under the planning model
    effect: float  # assumed true log effect at its worst cell (the estimate)
    sd_arm: float  # assumed boot sds (log)
    sd_control: float
    assumptions: tuple[str, ...]


def settle_probability(
    effects: Sequence[float],
    sd_arm: float,
    sd_control: float,
    n_arm: int,
    n_control: int,
    *,
    alpha: float,
    shift: float,
    margin: float,
    family_size: int,
) -> dict[str, float]:
    """Probability that each outcome is shown at n_arm boots per arm (noncentral t, Holm's first step).

    better and equivalent must hold at every cell (their product: a lower bound, as design_power);
    worse and below_min_effect at some cell, each tested at alpha / (family x cells) (the largest
    per-cell probability: a lower bound). Equivalence uses the normal-shift approximation of TOST
    power with t quantiles.
    """
    from mtpverdict.stats import tdist

    df = welch_df(sd_arm, n_arm, sd_control, n_control)
    if math.isnan(df):
        return {"better": 0.0, "equivalent": 0.0, "worse": 0.0, "below_min_effect": 0.0}
    se = math.sqrt(sd_arm**2 / n_arm + sd_control**2 / n_control)
    m, cells = max(family_size, 1), max(len(effects), 1)
    t_all = float(tdist.t_ppf(1 - alpha / m, df))
    t_any = float(tdist.t_ppf(1 - alpha / (m * cells), df))
    better = equivalent = 1.0
    worse = short = 0.0
    for d in effects:
        better *= float(tdist.nct_sf(t_all, df, (d - shift) / se))
        short = max(short, float(tdist.nct_cdf(-t_any, df, (d - shift) / se)))
        worse = max(worse, float(tdist.nct_cdf(-t_any, df, d / se)))
        inside = tdist.t_cdf((margin - d) / se - t_all, df) - tdist.t_cdf((-margin - d) / se + t_all, df)
        equivalent *= max(0.0, float(inside))
    return {"better": better, "equivalent": equivalent, "worse": worse, "below_min_effect": short}


def resolution(
    arm: ArmOutcome,
    family: FamilyOutcome,
    *,
    power: float = DEFAULT_POWER,
    max_boots: int = MAX_BOOTS_PER_ARM,
) -> Resolution:
    """For an unresolved arm: what is missing and how many boots per arm would likely settle it.

    The model is the procedure's own test with the campaign's estimates taken as the truth: each cell's
    effect is its estimate, the sds are the boot sds the comparisons used (the controls' for an arm
    whose own is unknown), and the controls keep their present ratio to an arm's boots.
    """
    from mtpverdict.stats.procedure import Outcome

    cells = [c for c in arm.cells if not math.isnan(c.estimate)]
    current = min((c.n_arm for c in cells), default=0)
    outcome = str(arm.outcome)
    if arm.outcome != Outcome.INCONCLUSIVE:
        nan = math.nan
        return Resolution(arm.arm, outcome, (), current, current, outcome, 1.0, nan, nan, nan, ())
    effects, sd_a, sd_c, assumptions = _planning_inputs(arm, family)
    ratio = max(1, round(min((c.n_control for c in cells), default=2) / max(current, 1)))
    missing = _missing_evidence(arm)
    worst = min(effects, default=math.nan)
    boots, likely, probability = None, None, 0.0
    if math.isnan(sd_a) or not effects:
        missing.append(
            "no variance estimate at all: archive A/A history, or plan with `mtpverdict plan --boot-sd`"
        )
    else:
        for n in range(max(current + 1, 2), max_boots + 1):
            probs = settle_probability(
                effects,
                sd_a,
                sd_c,
                n,
                ratio * n,
                alpha=family.alpha,
                shift=math.log1p(family.min_effect),
                margin=math.log1p(family.equivalence_margin),
                family_size=len(family.arms),
            )
            best = max(probs, key=lambda k: probs[k])
            if probs[best] >= power:
                boots, likely, probability = n, best, probs[best]
                break
    return Resolution(
        arm.arm, outcome, tuple(missing), current, boots, likely, probability, worst, sd_a, sd_c, assumptions
    )


def _planning_inputs(
    arm: ArmOutcome, family: FamilyOutcome
) -> tuple[list[float], float, float, tuple[str, ...]]:
    """Good-direction effects per cell, the boot sds to plan with, and what was assumed."""
    cells = [c for c in arm.cells if not math.isnan(c.estimate)]
    sign = 1.0 if family.higher_is_better else -1.0
    effects = [sign * c.estimate for c in cells]
    sd_a = max((c.sd_arm for c in cells if not math.isnan(c.sd_arm)), default=math.nan)
    sd_c = max((c.sd_control for c in cells if not math.isnan(c.sd_control)), default=math.nan)
    assumptions: list[str] = []
    if math.isnan(sd_a) and not math.isnan(sd_c):
        sd_a = sd_c
        assumptions.append(
            "the arm's boot sd is taken to equal the controls' (it has no credible own estimate)"
        )
    if math.isnan(sd_c) and not math.isnan(sd_a):
        sd_c = sd_a
        assumptions.append("the controls' boot sd is taken to equal the arm's")
    if arm.missing_cells and effects:
        effects += [min(effects)] * len(arm.missing_cells)
        assumptions.append("a missing cell is assumed to show the arm's worst measured effect")
    return effects, sd_a, sd_c, tuple(assumptions)


def _missing_evidence(arm: ArmOutcome) -> list[str]:
    from mtpverdict.stats.procedure import Why

    out = [
        f"no boot measured {w} at concurrency {c}: run that cell; more boots elsewhere cannot settle it"
        for w, c in arm.missing_cells
    ]
    out += [
        f"{w} c={c}: {cell.variance_reason}"
        for cell in arm.cells
        if cell.cell in arm.unknown_cells
        for w, c in (cell.cell,)
    ]
    if arm.why == Why.ONE_BOOT_CARRIES:
        out.append(f"one boot carries it: without {arm.loo_boot} its p-value is {arm.loo_p:.3g}")
    if arm.why == Why.NOT_RESOLVED:
        w, c = arm.worst_cell
        cell = arm.cell(arm.worst_cell)
        if cell is not None:
            out.append(
                f"{w} c={c}: the interval [{change(cell.ci_low):+.1%}, {change(cell.ci_high):+.1%}] "
                "is too wide to settle better, equivalent or worse"
            )
    return out


NEW_RESULTS = "NEW_RESULTS"  # the placeholder of a fresh results directory in a next-step command


def until_resolved_command(
    campaign: str, results: str, policy: str, boots_per_arm: int, *, resume: bool = True
) -> str:
    """The command that continues a campaign until its arms settle, with the boots it needs.

    resume False: the campaign's alpha is spent by its looks (stats/looks.py), or it was collected
    without --until-resolved (which a resume cannot add): a new campaign in a fresh directory, planned
    for its looks from the start.
    """
    import shlex

    if not resume:
        return (
            "this campaign's looks have spent its alpha (one collected without --until-resolved has one "
            f"look); set boots = {boots_per_arm} in {campaign} and collect a new campaign: "
            + shlex.join(
                [
                    "mtpverdict",
                    "collect",
                    campaign,
                    "--out",
                    NEW_RESULTS,
                    "--until-resolved",
                    "--rules",
                    policy,
                ]
            )
        )
    return f"set boots = {boots_per_arm} in {campaign}, then: " + shlex.join(
        [
            "mtpverdict",
            "collect",
            campaign,
            "--out",
            results,
            "--resume",
            "--until-resolved",
            "--rules",
            policy,
        ]
    )
