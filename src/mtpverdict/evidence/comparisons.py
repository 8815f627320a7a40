"""Every candidate against its family's controls: the family procedure over the design's cells.

The design of a family for one metric is every (workload, concurrency) cell the campaign declares
(campaign.json's `concurrency`, crossed with its workloads), else every cell any arm of the family
measured: a cell a candidate never measured is then missing for it, and it cannot be better "at every
cell" (issue 13 item 1). Each boot is one value per cell (the median of its counted runs, log scale)
with its boot order and device; the procedure (stats/procedure.py, stats/blocked.py on several
devices) compares each arm with the controls using the arm's own variance, combines its cells by the
largest p-value and corrects across the family's arms by Holm.

Where the policy says what to do when no boot variance exists (`[floor] when_unknown = "assume"` or
`"within_boot"`), a cell whose variance is unknown gets that comparison instead, clearly labelled, and
the arm's outcome is then read from its cells.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mtpverdict.formats.policy import FloorMode, Policy
from mtpverdict.formats.results import Campaign
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.blocked import BlockedFamilyOutcome, DeviceBootValue, blocked_family_procedure
from mtpverdict.stats.history import HistoryFit, history_fit
from mtpverdict.stats.procedure import (
    ArchivedVariance,
    ArmOutcome,
    CellComparison,
    Outcome,
    VarianceMethod,
    Why,
)
from mtpverdict.stats.runs import HIGHER_IS_BETTER

Cell = tuple[str, int]
BootKey = tuple[str, str, int, str]  # (arm, workload, concurrency, metric)
UNKNOWN_VARIANCE = (VarianceMethod.UNKNOWN, VarianceMethod.MISSING)


@dataclass(frozen=True, slots=True)
class BootValues:
    """Per-boot log statistics per (arm, workload, concurrency, metric), and run-level logs per cell."""

    boots: Mapping[BootKey, tuple[DeviceBootValue, ...]]
    runs: Mapping[BootKey, tuple[tuple[float, ...], bool]]  # run-level logs, and whether all runs are known
    withheld: frozenset[BootKey] = frozenset()  # measured, but refused for missingness: still design cells
    # every boot measured, refused cells included: what the controls are reported on (empty: `boots`)
    measured: Mapping[BootKey, tuple[DeviceBootValue, ...]] = dataclasses.field(default_factory=dict)

    @property
    def every(self) -> Mapping[BootKey, tuple[DeviceBootValue, ...]]:
        return self.measured or self.boots

    def of(self, arm: str, cell: Cell, metric: str) -> tuple[DeviceBootValue, ...]:
        return self.boots.get((arm, cell[0], cell[1], metric), ())


@dataclass(frozen=True, slots=True)
class FamilyRun:
    """One family's procedure for one metric (and min_effect), with the cells it ran over."""

    family: str
    metric: str
    cells: tuple[Cell, ...]
    outcome: BlockedFamilyOutcome

    @property
    def arms(self) -> tuple[ArmOutcome, ...]:
        return self.outcome.family.arms

    def arm(self, name: str) -> ArmOutcome | None:
        return next((a for a in self.arms if a.arm == name), None)


def design_cells(campaign: Campaign, values: BootValues, family: str, metric: str) -> tuple[Cell, ...]:
    """The cells a family is judged on for a metric (module docstring)."""
    members = {a.name for a in campaign.arms if a.family == family}
    measured = {
        (w, c) for (arm, w, c, m) in (*values.boots, *values.withheld) if arm in members and m == metric
    }
    if campaign.concurrency:
        declared = {(w.id, c) for w in campaign.workloads for c in campaign.concurrency}
        measured |= declared
    order = {w.id: i for i, w in enumerate(campaign.workloads)}
    return tuple(sorted(measured, key=lambda wc: (order.get(wc[0], len(order)), wc[0], wc[1])))


def run_family(
    campaign: Campaign,
    policy: Policy,
    values: BootValues,
    history: Mapping[Cell, ArchivedVariance],
    *,
    family: str,
    metric: str,
    cells: Sequence[Cell] | None = None,
    min_effect: float | None = None,
) -> FamilyRun | None:
    """The family procedure for one family and metric over `cells` (default: its design); None when the
    family has no control or no candidate, or nothing measured at those cells."""
    controls = [a.name for a in campaign.controls(family)]
    candidates = [a.name for a in campaign.candidates(family)]
    design = tuple(cells) if cells is not None else design_cells(campaign, values, family, metric)
    if not controls or not candidates or not design:
        return None
    control_values = {cell: [v for c in controls for v in values.of(c, cell, metric)] for cell in design}
    candidate_values = {a: {cell: list(values.of(a, cell, metric)) for cell in design} for a in candidates}
    if not any(control_values.values()) and not any(
        v for arm in candidate_values.values() for v in arm.values()
    ):
        return None
    usable, _ = usable_history(control_values, history, design)
    outcome = blocked_family_procedure(
        {cell: vals for cell, vals in control_values.items() if vals},
        {a: {cell: vals for cell, vals in cells_.items() if vals} for a, cells_ in candidate_values.items()},
        design,
        alpha=policy.alpha,
        equivalence_margin=policy.equivalence_margin,
        min_effect=min_effect,
        higher_is_better=HIGHER_IS_BETTER[metric],
        history=usable,
        lend_history=policy.floor.lend_history,
        keep_off_alpha=policy.keep_off_alpha,
    )
    outcome = _with_fallbacks(outcome, policy, values, controls, metric)
    return FamilyRun(family, metric, design, outcome)


def usable_history(
    control_values: Mapping[Cell, Sequence[DeviceBootValue]],
    history: Mapping[Cell, ArchivedVariance],
    design: Sequence[Cell],
) -> tuple[dict[Cell, ArchivedVariance], dict[Cell, HistoryFit]]:
    """The archived variance of each design cell whose test against the current controls passes
    (stats/history.py), and every cell's test."""
    fits = {
        cell: history_fit([v.log_value for v in control_values.get(cell, ())], history[cell])
        for cell in design
        if cell in history
    }
    return {cell: history[cell] for cell, fit in fits.items() if fit.compatible}, fits


# ---------------------------------------------------------------------------------------------------
# what the policy says for cells without a boot variance


def _with_fallbacks(
    found: BlockedFamilyOutcome, policy: Policy, values: BootValues, controls: list[str], metric: str
) -> BlockedFamilyOutcome:
    """Replace unknown-variance cells by the policy's fallback comparison, and re-read arm outcomes."""
    mode = policy.floor.when_unknown
    if mode is FloorMode.INCONCLUSIVE or (mode is FloorMode.ASSUME and policy.floor.assumed is None):
        return found
    unknown = [c for arm in found.family.arms for c in arm.cells if c.variance in UNKNOWN_VARIANCE]
    if not unknown:
        return found
    replaced = _fallbacks(unknown, mode, policy, values, controls, metric)
    arms = []
    for arm in found.family.arms:
        if not any((c.arm, c.cell) in replaced for c in arm.cells):
            arms.append(arm)
            continue
        cells = tuple(replaced.get((c.arm, c.cell), c) for c in arm.cells)
        arms.append(_read_from_cells(dataclasses.replace(arm, cells=cells, unknown_cells=())))
    family = dataclasses.replace(found.family, arms=tuple(arms))
    return dataclasses.replace(found, family=family)


def _fallbacks(
    cells: list[CellComparison],
    mode: FloorMode,
    policy: Policy,
    values: BootValues,
    controls: list[str],
    metric: str,
) -> dict[tuple[str, Cell], CellComparison]:
    """The policy's comparison for each unknown-variance cell; within-boot tests Holm across arms per cell."""
    if mode is FloorMode.ASSUME:
        return {(c.arm, c.cell): _assumed(c, policy, values, controls, metric) for c in cells}
    out: dict[tuple[str, Cell], CellComparison] = {}
    for cell in dict.fromkeys(c.cell for c in cells):
        at = [c for c in cells if c.cell == cell]
        raw = [_within_boot(c, policy, values, controls, metric, len(at)) for c in at]
        testable = [i for i, r in enumerate(raw) if math.isfinite(r.p_better)]
        classified = dict(
            zip(testable, cmp.classify([raw[i] for i in testable], alpha=policy.alpha), strict=True)
        )
        reason = (
            "within-boot: runs inside single boots; boot-to-boot variance is not seen and certainty is "
            "overstated"
        )
        for i, c in enumerate(at):
            comp = classified.get(i, raw[i])
            out[(c.arm, c.cell)] = _as_cell(c, comp, VarianceMethod.WITHIN_BOOT, reason, comp.outcome)
    return out


def _assumed(
    cell: CellComparison, policy: Policy, values: BootValues, controls: list[str], metric: str
) -> CellComparison:
    assumed = policy.floor.assumed
    assert assumed is not None
    arm_boots = [v.log_value for v in values.of(cell.arm, cell.cell, metric)]
    base = [v.log_value for c in controls for v in values.of(c, cell.cell, metric)]
    comp = cmp.compare_assumed(
        arm_boots, base, assumed_floor=assumed, higher_is_better=HIGHER_IS_BETTER[metric]
    )
    reason = (
        f"assumed: no boot variance; the point estimate is judged against the policy's {assumed:.0%} floor"
    )
    return _as_cell(cell, comp, VarianceMethod.ASSUMED, reason, comp.outcome)


def _within_boot(
    cell: CellComparison, policy: Policy, values: BootValues, controls: list[str], metric: str, family: int
) -> cmp.Comparison:
    key = (cell.cell[0], cell.cell[1], metric)
    arm_runs, arm_known = values.runs.get((cell.arm, *key), ((), False))
    base_runs: list[float] = []
    base_known = True
    for c in controls:
        logs, known = values.runs.get((c, *key), ((), True))
        base_runs += logs
        base_known = base_known and known
    if not (arm_known and base_known):
        arm_runs, base_runs = (), []
    return cmp.compare_within_boot(
        list(arm_runs),
        base_runs,
        alpha=policy.alpha,
        family_size=family,
        equivalence_margin=policy.equivalence_margin,
        higher_is_better=HIGHER_IS_BETTER[metric],
    )


def _as_cell(
    cell: CellComparison, comp: cmp.Comparison, method: VarianceMethod, reason: str, outcome: str
) -> CellComparison:
    nan = math.nan
    return dataclasses.replace(
        cell,
        estimate=comp.estimate,
        se=comp.se,
        df=float(comp.df) if comp.df else nan,
        ci_low=comp.ci_low,
        ci_high=comp.ci_high,
        p_better=comp.p_better,
        p_worse=comp.p_worse,
        p_equivalent=comp.p_equivalent,
        p_below_min_effect=nan,
        floor_first=comp.floor,
        floor_last=comp.floor,
        variance=method,
        variance_reason=reason,
        loo_p=nan,
        loo_estimate=nan,
        loo_boot=None,
        cell_outcome=Outcome(outcome),
    )


def _read_from_cells(arm: ArmOutcome) -> ArmOutcome:
    """An arm's outcome read from its cells' outcomes (fallback comparisons have no family test)."""
    outcomes = [c.cell_outcome for c in arm.cells]
    if arm.missing_cells:
        return dataclasses.replace(arm, outcome=Outcome.INCONCLUSIVE, why=Why.MISSING_CELL)
    if any(o is Outcome.WORSE for o in outcomes):
        return dataclasses.replace(arm, outcome=Outcome.WORSE, why=Why.RESOLVED)
    if outcomes and all(o is Outcome.BETTER for o in outcomes):
        return dataclasses.replace(arm, outcome=Outcome.BETTER, why=Why.RESOLVED)
    if any(o is Outcome.EQUIVALENT for o in outcomes):
        return dataclasses.replace(arm, outcome=Outcome.EQUIVALENT, why=Why.RESOLVED)
    return dataclasses.replace(arm, outcome=Outcome.INCONCLUSIVE, why=Why.NOT_RESOLVED)


def flatten(runs: Sequence[FamilyRun]) -> dict[BootKey, CellComparison]:
    """Every cell comparison of every family run, keyed (arm, workload, concurrency, metric)."""
    return {
        (c.arm, c.cell[0], c.cell[1], run.metric): c for run in runs for arm in run.arms for c in arm.cells
    }
