"""The family procedure: every candidate arm against the controls at every design cell, combined once.

One call per (family, metric). Per arm and cell a boot-level comparison on log scale with the arm's own
variance (stats/welch.py); per arm an intersection-union test over the design's cells (the largest
p-value), then Holm across the full family of candidate arms. The outcome of an arm, in this order:
- equivalent: TOST inside +-log(1 + equivalence_margin) at every design cell (Holm across arms);
- better: beyond log(1 + min_effect) at every design cell (IUT, Holm across arms), and still beyond it
  at unadjusted alpha with any one boot left out, arm or control (one boot cannot carry a promotion);
- worse: shown slower than the controls at some cell (Bonferroni over its cells, Holm across arms);
- below_min_effect: not better by min_effect: at some cell the two-sided 1 - 2 alpha interval's upper
  bound is below log(1 + min_effect) (one-sided p_below_min_effect < alpha there, unadjusted). It fails
  a rule that asks for min_effect even when it is faster than off. This is a futility decision: it only
  ever keeps an arm off, so it cannot raise the false-promotion rate and needs no correction across
  cells or arms; its error is a missed promotion, at most alpha per cell for an arm truly at
  min_effect there. `p_below_min_effect_holm` (Bonferroni over cells, Holm across arms) is the
  corrected claim "shown below min_effect", reported beside it;
- inconclusive otherwise, with the reason: a design cell it never measured, a cell without a credible
  variance, one boot carrying the promotion, or too little evidence.
min_effect defaults to the equivalence margin, so "better" and "equivalent" cannot both hold and one
truth gets one answer. Deciding equivalence first keeps that true when a policy sets a smaller
min_effect.

The floor of a cell is log(1 + min_effect) + t(1 - alpha/m, df) se, Holm's first step: the smallest
effect called better when no other arm is. Holm's later steps test at alpha/(m-1), ..., alpha, so once
other arms are called better a smaller effect is too, down to log(1 + min_effect) + t(1 - alpha, df) se
(`floor_last`).

Per-cell outcomes (the regime map of a depth across concurrencies) use Holm across every (arm, cell)
comparison of the family, so the extra comparisons are counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from mtpverdict.stats.welch import (
    MIN_CREDIBLE_SD,
    Array,
    CellTests,
    Method,
    Thresholds,
    cell_tests,
    holm_along,
)

Cell = tuple[str, int]  # (workload, concurrency)


class Outcome(StrEnum):
    """What the evidence says about one arm (or one arm at one cell)."""

    BETTER = "better"
    WORSE = "worse"
    EQUIVALENT = "equivalent"
    BELOW_MIN_EFFECT = "below_min_effect"
    INCONCLUSIVE = "inconclusive"


OUTCOMES = (
    Outcome.BETTER,
    Outcome.WORSE,
    Outcome.EQUIVALENT,
    Outcome.BELOW_MIN_EFFECT,
    Outcome.INCONCLUSIVE,
)  # array codes are indices into this tuple


class Why(StrEnum):
    """Why an arm got its outcome."""

    RESOLVED = "resolved"  # the outcome's test rejected at alpha after Holm
    MISSING_CELL = "missing_cell"  # a design cell without any boot of the arm
    UNKNOWN_VARIANCE = "unknown_variance"  # a cell without a credible boot variance
    ONE_BOOT_CARRIES = "one_boot_carries"  # better only with every boot; not with one left out
    NOT_RESOLVED = "not_resolved"  # measured everywhere, but no test rejected


WHYS = (Why.RESOLVED, Why.MISSING_CELL, Why.UNKNOWN_VARIANCE, Why.ONE_BOOT_CARRIES, Why.NOT_RESOLVED)


class VarianceMethod(StrEnum):
    """The variance behind one comparison (stats/welch.py Method, by name)."""

    WELCH = "welch"
    POOLED = "pooled"
    HISTORY = "history"
    UNKNOWN = "unknown"
    MISSING = "missing"
    BLOCKED = "blocked"  # stats/blocked.py: within device, each group's variance pooled within device
    DEVICES = "devices"  # stats/blocked.py: the spread of the per-device differences
    ASSUMED = "assumed"  # no boot variance: the point estimate against the policy's assumed floor
    WITHIN_BOOT = "within_boot"  # no boot variance: runs inside single boots (certainty overstated)


_METHOD_NAMES = {
    Method.WELCH: VarianceMethod.WELCH,
    Method.POOLED: VarianceMethod.POOLED,
    Method.HISTORY: VarianceMethod.HISTORY,
    Method.UNKNOWN: VarianceMethod.UNKNOWN,
    Method.MISSING: VarianceMethod.MISSING,
}


@dataclass(frozen=True, slots=True)
class BootValue:
    """One boot's statistic in one cell: log of its median counted run, and its place in boot order."""

    arm: str
    boot: int
    order: int  # position of the boot in the campaign's boot order
    log_value: float


@dataclass(frozen=True, slots=True)
class ArchivedVariance:
    """Boot-level variance of log statistics of the seat's control boots in earlier campaigns (A/A)."""

    s2: float
    df: int
    label: str


@dataclass(frozen=True, slots=True)
class CellComparison:
    """One arm against the controls at one cell; log scale, natural sign (arm minus control)."""

    arm: str
    cell: Cell
    n_arm: int
    n_control: int
    estimate: float
    se: float
    sd_arm: float  # boot sd of the arm's log statistic as used (NaN unknown)
    sd_control: float  # boot sd of the controls' as used
    df: float  # Welch-Satterthwaite (NaN when the variance is unknown)
    ci_low: float  # two-sided 1 - 2 alpha (90% at alpha 0.05, the TOST convention)
    ci_high: float
    p_better: float  # one-sided, against log(1 + min_effect)
    p_worse: float  # one-sided, against 0
    p_equivalent: float  # TOST
    p_below_min_effect: float  # one-sided: the effect is below log(1 + min_effect)
    floor_first: float  # log effect called better at Holm's first step
    floor_last: float  # ... at Holm's last step
    variance: VarianceMethod
    variance_reason: str
    loo_p: float  # worst p_better with one boot left out (NaN: no boot could be left out)
    loo_estimate: float  # good-direction estimate at that drop
    loo_boot: str | None  # "off_A boot 2"
    cell_outcome: Outcome  # this cell alone, Holm across every (arm, cell) of the family


@dataclass(frozen=True, slots=True)
class ArmOutcome:
    """An arm's combined outcome over the design's cells, with the numbers behind it."""

    arm: str
    outcome: Outcome
    why: Why
    cells: tuple[CellComparison, ...]  # the design cells it measured, in design order
    missing_cells: tuple[Cell, ...]
    unknown_cells: tuple[Cell, ...]
    worst_cell: Cell  # the cell with the largest p_better (the IUT's)
    p_better: float  # intersection-union: largest over the design cells (1 for a missing cell)
    p_better_holm: float
    p_equivalent: float  # intersection-union
    p_equivalent_holm: float
    p_worse: float  # union: smallest over measured cells times their number (Bonferroni)
    p_worse_holm: float
    p_below_min_effect: float  # union, as p_worse
    p_below_min_effect_holm: float
    loo_p: float  # worst leave-one-boot-out p_better over its cells (NaN: untestable)
    loo_boot: str | None
    loo_cell: Cell | None
    floor_first: float  # largest over its cells: the effect it must show everywhere (NaN unknown)
    floor_last: float

    def cell(self, cell: Cell) -> CellComparison | None:
        return next((c for c in self.cells if c.cell == cell), None)


@dataclass(frozen=True, slots=True)
class FamilyOutcome:
    """Every candidate arm of one family for one metric."""

    design_cells: tuple[Cell, ...]
    arms: tuple[ArmOutcome, ...]  # the Holm family, in the order given
    alpha: float
    equivalence_margin: float
    min_effect: float  # as applied (the margin when none was given)
    higher_is_better: bool
    control_boots: int  # distinct control boots over every cell
    keep_off_alpha: float | None = None  # the level of outcomes that only keep arms off; None: alpha

    @property
    def keep_off_level(self) -> float:
        return self.alpha if self.keep_off_alpha is None else self.keep_off_alpha

    def arm(self, name: str) -> ArmOutcome:
        for a in self.arms:
            if a.arm == name:
                return a
        raise KeyError(name)


# --------------------------------------------------------------------------------------------------
# arrays: the combination, shared by the typed call and the calibration


@dataclass(frozen=True, slots=True)
class ArmArrays:
    """Per (campaign, arm) results; outcome and why are indices into OUTCOMES and WHYS."""

    outcome: npt.NDArray[np.int64]
    why: npt.NDArray[np.int64]
    p_better: Array
    worst_cell: npt.NDArray[np.int64]
    p_better_holm: Array
    p_equivalent: Array
    p_equivalent_holm: Array
    p_worse: Array
    p_worse_holm: Array
    p_short: Array
    p_short_holm: Array
    loo_p: Array
    loo_cell: npt.NDArray[np.int64]
    cell_outcome: npt.NDArray[np.int64]  # (B, A, C): per-cell outcomes, Holm across arm x cell


def thresholds(
    alpha: float, equivalence_margin: float, min_effect: float | None, higher_is_better: bool, family: int
) -> Thresholds:
    """Validate the family's levels and turn them into log-scale thresholds."""
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), not {alpha}")
    if not (math.isfinite(equivalence_margin) and equivalence_margin > 0):
        raise ValueError(f"equivalence_margin must be a positive fraction, not {equivalence_margin}")
    effect = equivalence_margin if min_effect is None else min_effect
    if not (math.isfinite(effect) and effect >= 0):
        raise ValueError(f"min_effect must be a non-negative fraction, not {min_effect}")
    return Thresholds(
        alpha=alpha,
        shift=math.log1p(effect),
        margin=math.log1p(equivalence_margin),
        family_size=family,
        sign=1.0 if higher_is_better else -1.0,
    )


def _union(p: Array, known: npt.NDArray[np.bool_]) -> Array:
    """Bonferroni over the measured cells: 'shown at some cell'."""
    m = np.maximum(known.sum(axis=-1), 1)
    return np.asarray(np.minimum(1.0, np.where(known, p, 1.0).min(axis=-1) * m))


def _decide(
    p_eq: Array,
    p_better: Array,
    loo_ok: npt.NDArray[np.bool_],
    p_worse: Array,
    p_short: Array,
    alpha: float,
    keep_off: float | None = None,
) -> npt.NDArray[np.int64]:
    """Outcome codes with the stated precedence: equivalent, better, worse, below min_effect.

    Better is tested at alpha; the outcomes that only keep an arm off (equivalent, worse, below
    min_effect) at keep_off (None: alpha), after better, so a wider keep_off takes no promotion away."""
    off = alpha if keep_off is None else keep_off
    equivalent = OUTCOMES.index(Outcome.EQUIVALENT)
    return np.where(
        p_eq < alpha,
        equivalent,
        np.where(
            (p_better < alpha) & loo_ok,
            OUTCOMES.index(Outcome.BETTER),
            np.where(
                p_eq < off,
                equivalent,
                np.where(
                    p_worse < off,
                    OUTCOMES.index(Outcome.WORSE),
                    np.where(
                        p_short < off,
                        OUTCOMES.index(Outcome.BELOW_MIN_EFFECT),
                        OUTCOMES.index(Outcome.INCONCLUSIVE),
                    ),
                ),
            ),
        ),
    ).astype(np.int64)


def combine(tests: CellTests, alpha: float, keep_off_alpha: float | None = None) -> ArmArrays:
    """Intersection-union over cells, then Holm across arms; per-cell outcomes beside it.

    keep_off_alpha: the level of the outcomes that only keep an arm off (equivalent, worse, below
    min_effect, its futility unadjusted): a look that splits alpha for promotions keeps the policy's
    alpha for them, since a false keep-off is no false promotion; None is alpha."""
    known = tests.method <= Method.HISTORY
    missing = tests.method == Method.MISSING
    unknown = tests.method == Method.UNKNOWN
    pb_cells = np.where(known, tests.p_better, 1.0)
    p_better = pb_cells.max(axis=-1)
    worst = pb_cells.argmax(axis=-1)
    p_eq = np.where(known, tests.p_equivalent, 1.0).max(axis=-1)
    p_worse = _union(tests.p_worse, known)
    p_short = _union(tests.p_short, known)
    # futility: the interval's upper bound below log(1 + min_effect) at some cell, unadjusted
    p_futile = np.where(known, tests.p_short, 1.0).min(axis=-1)
    loo = np.where(known, tests.loo_p, np.nan)
    some_loo = np.asarray(~np.isnan(loo).all(axis=-1))
    loo_p = np.where(some_loo, np.nanmax(np.where(some_loo[..., None], loo, 0.0), axis=-1), np.nan)
    loo_cell = np.argmax(np.where(np.isnan(loo), -1.0, loo), axis=-1)
    loo_ok = ~(loo_p >= alpha)  # NaN: no boot could be left out (an arm and controls of one boot each)
    holm = {name: holm_along(p) for name, p in (("b", p_better), ("e", p_eq), ("w", p_worse), ("s", p_short))}
    off = alpha if keep_off_alpha is None else keep_off_alpha
    p_keep_off = np.minimum(holm["s"], np.where(p_futile < off, 0.0, 1.0))
    outcome = _decide(holm["e"], holm["b"], loo_ok, holm["w"], p_keep_off, alpha, off)
    inconclusive = outcome == OUTCOMES.index(Outcome.INCONCLUSIVE)
    why = np.where(
        ~inconclusive,
        WHYS.index(Why.RESOLVED),
        np.where(
            missing.any(axis=-1),
            WHYS.index(Why.MISSING_CELL),
            np.where(
                unknown.any(axis=-1),
                WHYS.index(Why.UNKNOWN_VARIANCE),
                np.where(holm["b"] < alpha, WHYS.index(Why.ONE_BOOT_CARRIES), WHYS.index(Why.NOT_RESOLVED)),
            ),
        ),
    ).astype(np.int64)
    return ArmArrays(
        outcome=outcome,
        why=why,
        p_better=p_better,
        worst_cell=worst.astype(np.int64),
        p_better_holm=holm["b"],
        p_equivalent=p_eq,
        p_equivalent_holm=holm["e"],
        p_worse=p_worse,
        p_worse_holm=holm["w"],
        p_short=p_short,
        p_short_holm=holm["s"],
        loo_p=loo_p,
        loo_cell=loo_cell.astype(np.int64),
        cell_outcome=_cell_outcomes(tests, known, alpha),
    )


def _cell_outcomes(tests: CellTests, known: npt.NDArray[np.bool_], alpha: float) -> npt.NDArray[np.int64]:
    """Each (arm, cell) on its own, Holm across every (arm, cell) of the campaign's family."""
    shape = tests.method.shape
    flat = (shape[0], shape[1] * shape[2])

    def adjusted(p: Array) -> Array:
        return holm_along(np.where(known, p, 1.0).reshape(flat)).reshape(shape)

    loo_ok = ~(np.where(known, tests.loo_p, np.nan) >= alpha)
    return _decide(
        adjusted(tests.p_equivalent),
        adjusted(tests.p_better),
        loo_ok,
        adjusted(tests.p_worse),
        adjusted(tests.p_short),
        alpha,
    )


def batch_procedure(
    arm: Array,
    control: Array,
    *,
    alpha: float,
    equivalence_margin: float,
    min_effect: float | None = None,
    higher_is_better: bool = True,
    hist_s2: Array | None = None,
    hist_df: Array | None = None,
    lend_history: bool = False,
    keep_off_alpha: float | None = None,
) -> tuple[CellTests, ArmArrays]:
    """The procedure over many campaigns at once (arm (B, A, C, Na), control (B, C, Nc), NaN = absent).

    The archived A/A variance (hist_s2, hist_df) pools into the controls'; it is lent to an arm booted
    once only with lend_history (welch.cell_tests)."""
    if (
        arm.ndim != 4
        or control.ndim != 3
        or arm.shape[0] != control.shape[0]
        or arm.shape[2] != control.shape[1]
    ):
        raise ValueError(f"shapes do not match: arm {arm.shape}, control {control.shape}")
    th = thresholds(alpha, equivalence_margin, min_effect, higher_is_better, arm.shape[1])
    cells = control.shape[1]
    s2 = np.full(cells, np.nan) if hist_s2 is None else np.asarray(hist_s2, dtype=float)
    df = np.zeros(cells) if hist_df is None else np.asarray(hist_df, dtype=float)
    tests = cell_tests(arm, control, s2, df, th, lend_history=lend_history)
    return tests, combine(tests, alpha, keep_off_alpha)


# --------------------------------------------------------------------------------------------------
# the typed call


def _check_input(
    controls: Mapping[Cell, Sequence[BootValue]],
    candidates: Mapping[str, Mapping[Cell, Sequence[BootValue]]],
    design: tuple[Cell, ...],
) -> None:
    if not design or len(set(design)) != len(design):
        raise ValueError(f"the design needs distinct cells, not {list(design)}")
    if not candidates:
        raise ValueError("the family has no candidate arm")
    sources = [("controls", controls)] + [(name, cells) for name, cells in candidates.items()]
    for name, cells in sources:
        for cell, values in cells.items():
            if cell not in design:
                raise ValueError(f"{name}: cell {cell} is not in the design {list(design)}")
            seen: set[tuple[str, int]] = set()
            for v in values:
                if not math.isfinite(v.log_value):
                    raise ValueError(f"{name} at {cell}: {v.arm} boot {v.boot} has log value {v.log_value}")
                if (v.arm, v.boot) in seen:
                    raise ValueError(f"{name} at {cell}: {v.arm} boot {v.boot} appears twice")
                seen.add((v.arm, v.boot))


def _padded(groups: Sequence[Sequence[BootValue]], width: int) -> Array:
    out = np.full((len(groups), max(width, 1)), np.nan)
    for i, values in enumerate(groups):
        out[i, : len(values)] = [v.log_value for v in values]
    return out


def family_procedure(
    controls: Mapping[Cell, Sequence[BootValue]],
    candidates: Mapping[str, Mapping[Cell, Sequence[BootValue]]],
    design_cells: Sequence[Cell],
    *,
    alpha: float,
    equivalence_margin: float,
    min_effect: float | None = None,
    higher_is_better: bool = True,
    history: Mapping[Cell, ArchivedVariance] | None = None,
    lend_history: bool = False,
    keep_off_alpha: float | None = None,
) -> FamilyOutcome:
    """Compare each candidate arm with the controls at every design cell and combine (module docstring).

    `history` pools into the controls' variance; it is lent to an arm booted once only with
    `lend_history` (a policy's explicit choice). `keep_off_alpha` is the level of the outcomes that only
    keep an arm off (combine; None: alpha); under looks it is the policy's alpha, above the look's
    (docs/statistics.md).

    `candidates` is the whole Holm family in its order, including arms that measured nothing.
    Raises ValueError on a cell outside the design, a non-finite value or a boot listed twice.
    """
    design = tuple(design_cells)
    _check_input(controls, candidates, design)
    history = history or {}
    names = list(candidates)
    ctrl_rows = [sorted(controls.get(c, ()), key=lambda v: (v.order, v.arm, v.boot)) for c in design]
    arm_rows = [
        [sorted(candidates[a].get(c, ()), key=lambda v: (v.order, v.boot)) for c in design] for a in names
    ]
    width_c = max(len(r) for r in ctrl_rows)
    width_a = max(len(r) for rows in arm_rows for r in rows)
    control = _padded(ctrl_rows, width_c)[None]
    arm = np.stack([_padded(rows, width_a) for rows in arm_rows])[None]
    hist_s2 = np.array([history[c].s2 if c in history else np.nan for c in design])
    hist_df = np.array([float(history[c].df) if c in history else 0.0 for c in design])
    tests, arrays = batch_procedure(
        arm,
        control,
        alpha=alpha,
        equivalence_margin=equivalence_margin,
        min_effect=min_effect,
        higher_is_better=higher_is_better,
        hist_s2=hist_s2,
        hist_df=hist_df,
        lend_history=lend_history,
        keep_off_alpha=keep_off_alpha,
    )
    th = thresholds(alpha, equivalence_margin, min_effect, higher_is_better, len(names))
    arms = tuple(
        _arm_outcome(i, name, design, tests, arrays, arm_rows[i], ctrl_rows, history, th)
        for i, name in enumerate(names)
    )
    return FamilyOutcome(
        design_cells=design,
        arms=arms,
        alpha=alpha,
        equivalence_margin=equivalence_margin,
        min_effect=math.expm1(th.shift),
        higher_is_better=higher_is_better,
        control_boots=len({(v.arm, v.boot) for rows in ctrl_rows for v in rows}),
        keep_off_alpha=keep_off_alpha,
    )


def _f(a: Array, *index: int) -> float:
    return float(a[(0, *index)])


def _cell_comparison(
    i: int,
    j: int,
    name: str,
    cell: Cell,
    tests: CellTests,
    arrays: ArmArrays,
    rows: tuple[list[BootValue], list[BootValue]],
    history: ArchivedVariance | None,
    min_sd: float,
) -> CellComparison:
    """The typed comparison of arm i at design cell j; rows are (arm boots, control boots) there."""
    method = Method(int(tests.method[0, i, j]))
    drop = int(tests.loo_drop[0, i, j])
    loo_p = _f(tests.loo_p, i, j)
    dropped = None
    if not math.isnan(loo_p):
        boot = rows[0][drop] if drop >= 0 else rows[1][-1 - drop]
        dropped = f"{boot.arm} boot {boot.boot}"
    return CellComparison(
        arm=name,
        cell=cell,
        n_arm=int(tests.n_arm[0, i, j]),
        n_control=int(tests.n_control[0, i, j]),
        estimate=_f(tests.estimate, i, j),
        se=_f(tests.se, i, j),
        sd_arm=_f(tests.sd_arm, i, j),
        sd_control=_f(tests.sd_control, i, j),
        df=_f(tests.df, i, j),
        ci_low=_f(tests.ci_low, i, j),
        ci_high=_f(tests.ci_high, i, j),
        p_better=_f(tests.p_better, i, j),
        p_worse=_f(tests.p_worse, i, j),
        p_equivalent=_f(tests.p_equivalent, i, j),
        p_below_min_effect=_f(tests.p_short, i, j),
        floor_first=_f(tests.floor_first, i, j),
        floor_last=_f(tests.floor_last, i, j),
        variance=_METHOD_NAMES[method],
        variance_reason=variance_reason(method, rows[0], rows[1], history, min_sd),
        loo_p=loo_p,
        loo_estimate=_f(tests.loo_estimate, i, j),
        loo_boot=dropped,
        cell_outcome=OUTCOMES[int(arrays.cell_outcome[0, i, j])],
    )


def _arm_outcome(
    i: int,
    name: str,
    design: tuple[Cell, ...],
    tests: CellTests,
    arrays: ArmArrays,
    rows: list[list[BootValue]],
    ctrl_rows: list[list[BootValue]],
    history: Mapping[Cell, ArchivedVariance],
    th: Thresholds,
) -> ArmOutcome:
    cells = [
        _cell_comparison(
            i, j, name, cell, tests, arrays, (rows[j], ctrl_rows[j]), history.get(cell), th.min_sd
        )
        for j, cell in enumerate(design)
        if int(tests.method[0, i, j]) != Method.MISSING
    ]
    measured = {c.cell for c in cells}
    loo_p = float(arrays.loo_p[0, i])
    loo_cell = None if math.isnan(loo_p) else design[int(arrays.loo_cell[0, i])]
    loo_boot = None if loo_cell is None else next(c.loo_boot for c in cells if c.cell == loo_cell)
    floors = [c.floor_first for c in cells]
    return ArmOutcome(
        arm=name,
        outcome=OUTCOMES[int(arrays.outcome[0, i])],
        why=WHYS[int(arrays.why[0, i])],
        cells=tuple(cells),
        missing_cells=tuple(c for c in design if c not in measured),
        unknown_cells=tuple(c.cell for c in cells if c.variance == VarianceMethod.UNKNOWN),
        worst_cell=design[int(arrays.worst_cell[0, i])],
        p_better=float(arrays.p_better[0, i]),
        p_better_holm=float(arrays.p_better_holm[0, i]),
        p_equivalent=float(arrays.p_equivalent[0, i]),
        p_equivalent_holm=float(arrays.p_equivalent_holm[0, i]),
        p_worse=float(arrays.p_worse[0, i]),
        p_worse_holm=float(arrays.p_worse_holm[0, i]),
        p_below_min_effect=float(arrays.p_short[0, i]),
        p_below_min_effect_holm=float(arrays.p_short_holm[0, i]),
        loo_p=loo_p,
        loo_boot=loo_boot,
        loo_cell=loo_cell,
        floor_first=max(floors) if floors and not any(math.isnan(f) for f in floors) else math.nan,
        floor_last=max((c.floor_last for c in cells), default=math.nan),
    )


def variance_reason(
    method: Method,
    arm: Sequence[BootValue],
    controls: Sequence[BootValue],
    history: ArchivedVariance | None,
    min_sd: float = MIN_CREDIBLE_SD,
) -> str:
    """Why this variance was used, and why pooling was or was not."""
    n_a, n_c = len(arm), len(controls)
    own = "the arm and the controls each from their own boots"
    not_pooled = "not pooled across arms: a candidate's boot variance can differ from off's"
    if method == Method.WELCH:
        return f"Welch: {own} ({n_a - 1} and {n_c - 1} df); {not_pooled}"
    if method == Method.POOLED:
        assert history is not None
        return (
            f"pooled: the controls' {n_c} boot(s) with archived A/A history {history.label} "
            f"({history.df} df, same configuration and seat); the arm from its own {n_a} boots"
        )
    if method == Method.HISTORY:
        assert history is not None
        return (
            f"history: the arm was booted once (or its boots agree closer than {min_sd:.1%}); its variance "
            f"is archived A/A history {history.label} ({history.df} df)"
        )
    if method == Method.MISSING:
        return "no boot of the arm measured this cell"
    return _unknown_reason(arm, controls, history, min_sd)


def _sd(values: Sequence[BootValue]) -> float:
    if len(values) < 2:
        return math.nan
    return float(np.std([v.log_value for v in values], ddof=1))


def _unknown_reason(
    arm: Sequence[BootValue], controls: Sequence[BootValue], history: ArchivedVariance | None, min_sd: float
) -> str:
    parts = []
    if len(arm) == 1 and history is None:
        parts.append(
            "the arm was booted once and no archived A/A history supports a variance for it; "
            "variance borrowed from other arms is not used"
        )
    elif len(arm) == 1:
        parts.append(
            "the arm was booted once; the archived A/A history is the controls' variance and is lent "
            "to a candidate only when the policy says so ([floor] lend_history): a drafter can add its "
            "own noise"
        )
    elif len(arm) >= 2 and _sd(arm) < min_sd:
        parts.append(f"the arm's {len(arm)} boots agree within sd {_sd(arm):.3%}: luck, not certainty")
    if not controls:
        parts.append("no control boot measured this cell")
    elif len(controls) == 1 and history is None:
        parts.append("one control boot and no archived A/A history")
    elif len(controls) >= 2 and _sd(controls) < min_sd and history is None:
        parts.append(
            f"the {len(controls)} control boots agree within sd {_sd(controls):.3%} (below the credible "
            f"{min_sd:.1%}): unknown variance, not certainty"
        )
    return "unknown: " + ("; ".join(parts) or "no credible boot variance")
