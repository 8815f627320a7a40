"""The planner's values: variance components, a design, its costs, the plan and its rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

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
