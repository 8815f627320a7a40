"""Campaign planning: variance components from a pilot, the boots and runs that resolve an effect, their cost.

Pure functions. The model is the one `decide` tests with: the per-run log statistic of a configuration
in one cell is its level plus a boot shift (sd `boot_sd`, shared by every cell of the boot) plus run
noise (sd `run_sd`). A boot is reduced to the median of its r counted runs, so its statistic has
variance boot_sd^2 + e(r) run_sd^2 / r, where e(r) is the variance of a median of r normal values
relative to their mean. `decide` pools that variance over every configuration booted more than once
(off_A and off_B are one configuration) and compares each depth with the controls by a one-sided
t-test, Holm across the depths; "faster at every cell" is an intersection-union test across cells.

One module per section: `model` (the values), `design` (the test as functions of the design, the
plan), `pilot` (what a pilot shows), `render` (the plan as text), `resolution` (per-arm Welch
floors and the next step out of "inconclusive").
"""

from mtpverdict.plan.design import (
    POSITION_TERMS,
    blocked_df,
    blocked_floor,
    blocked_power,
    boot_level_sd,
    check_parameters,
    critical_value,
    design_df,
    design_floor,
    design_power,
    layout_rounds,
    make_plan,
    median_efficiency,
    required_boots,
    standard_error,
)
from mtpverdict.plan.model import (
    COLD_RUNS_PER_BOOT,
    DEFAULT_ALPHA,
    DEFAULT_POWER,
    MAX_BOOTS_PER_ARM,
    MEDIAN_EFFICIENCY_DRAWS,
    MEDIAN_EFFICIENCY_SEED,
    MIN_BOOT_DF,
    RUNS_PER_BOOT_CHOICES,
    UNCERTAIN_BOOT_DF,
    Costs,
    Design,
    Plan,
    PlanRow,
    VarianceComponents,
)
from mtpverdict.plan.pilot import (
    pilot_components,
    pilot_costs,
    pilot_design,
    stated_components,
)
from mtpverdict.plan.render import (
    render_plan,
)
from mtpverdict.plan.resolution import (
    NEW_RESULTS,
    Resolution,
    resolution,
    settle_probability,
    until_resolved_command,
    welch_df,
    welch_floor,
)

__all__ = [
    "COLD_RUNS_PER_BOOT",
    "Costs",
    "DEFAULT_ALPHA",
    "DEFAULT_POWER",
    "Design",
    "MAX_BOOTS_PER_ARM",
    "MEDIAN_EFFICIENCY_DRAWS",
    "MEDIAN_EFFICIENCY_SEED",
    "MIN_BOOT_DF",
    "NEW_RESULTS",
    "POSITION_TERMS",
    "Plan",
    "PlanRow",
    "RUNS_PER_BOOT_CHOICES",
    "Resolution",
    "UNCERTAIN_BOOT_DF",
    "VarianceComponents",
    "blocked_df",
    "blocked_floor",
    "blocked_power",
    "boot_level_sd",
    "check_parameters",
    "critical_value",
    "design_df",
    "design_floor",
    "design_power",
    "layout_rounds",
    "make_plan",
    "median_efficiency",
    "pilot_components",
    "pilot_costs",
    "pilot_design",
    "render_plan",
    "required_boots",
    "resolution",
    "settle_probability",
    "standard_error",
    "stated_components",
    "until_resolved_command",
    "welch_df",
    "welch_floor",
]
