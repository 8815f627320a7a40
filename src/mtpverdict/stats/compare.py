"""Arm-vs-baseline comparisons on log scale at the boot level: t-intervals, floors, TOST and Holm.

Model: the per-boot log statistic of an arm is its true level plus a boot effect with variance
sigma^2 (which already contains the run-to-run noise averaged inside the boot). sigma^2 is estimated
by pooling the within-arm spread of every arm with several boots (off_A and off_B count as one
configuration) plus archived A/A pairs; its degrees of freedom set the t critical values. With one
off_A/off_B pair and single boots elsewhere that is one degree of freedom: the ratio of an arm's
difference to |off_B - off_A| is then Cauchy-like, which is why the floor multiplier is large.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mtpverdict.stats import tdist

# Outcomes of one comparison (FIELD §4: criterion-style plus equivalence)
BETTER = "better"
WORSE = "worse"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"

# How the interval was obtained
BETWEEN_BOOTS = "between_boots"  # t on per-boot statistics with pooled boot variance
WITHIN_BOOT = "within_boot"  # runs inside single boots: precision of those boots, not across boots
ASSUMED_FLOOR = "assumed_floor"  # no variance estimate: the policy's assumed floor
NONE = "none"


@dataclass(frozen=True, slots=True)
class Variance:
    """Pooled boot-level variance of log statistics and its degrees of freedom."""

    s2: float
    df: int
    sources: tuple[str, ...]

    @property
    def known(self) -> bool:
        return self.df > 0 and math.isfinite(self.s2)


def pooled_variance(
    groups: Sequence[tuple[str, npt.ArrayLike]], extra: Sequence[tuple[str, float, int]] = ()
) -> Variance:
    """Pool within-group variance; groups are (label, log values), extra is (label, s2, df)."""
    ss = 0.0
    df = 0
    labels: list[str] = []
    for label, values in groups:
        arr = np.asarray(values, dtype=float)
        if arr.size >= 2:
            ss += float(np.sum((arr - arr.mean()) ** 2))
            df += int(arr.size - 1)
            labels.append(label)
    for label, s2, d in extra:
        if d > 0 and math.isfinite(s2):
            ss += s2 * d
            df += d
            labels.append(label)
    return Variance(s2=ss / df if df else math.nan, df=df, sources=tuple(labels))


@dataclass(frozen=True, slots=True)
class Comparison:
    """One arm against a baseline for one metric and cell; estimate and bounds are log ratios."""

    estimate: float
    se: float
    df: int
    method: str
    n_arm: int
    n_base: int
    ci_low: float
    ci_high: float
    p_better: float
    p_worse: float
    p_equivalent: float
    floor: float  # smallest log effect this comparison could resolve (nan when unknown)
    outcome: str = INCONCLUSIVE
    p_better_adjusted: float = math.nan

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate)


def compare_boots(
    arm: npt.ArrayLike,
    base: npt.ArrayLike,
    variance: Variance,
    *,
    alpha: float,
    family_size: int,
    equivalence_margin: float,
    min_effect: float = 0.0,
    higher_is_better: bool = True,
) -> Comparison:
    """Compare per-boot log statistics of an arm with the baseline's, using the pooled variance.

    `alpha` is the one-sided family-wise level; `family_size` arms share the baseline (Holm), so the
    stated floor uses alpha / family_size, the most stringent Holm step.
    The confidence interval is two-sided at 1 - 2*alpha (90% for alpha 0.05, the TOST convention).
    """
    a = np.asarray(arm, dtype=float)
    b = np.asarray(base, dtype=float)
    sign = 1.0 if higher_is_better else -1.0
    estimate = float(a.mean() - b.mean())
    if not variance.known:
        return Comparison(
            estimate,
            math.nan,
            0,
            NONE,
            a.size,
            b.size,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
        )
    se = math.sqrt(variance.s2 * (1.0 / a.size + 1.0 / b.size))
    df = variance.df
    tq = float(tdist.t_ppf(1.0 - alpha, df))
    t_family = float(tdist.t_ppf(1.0 - alpha / max(family_size, 1), df))
    shift = math.log1p(min_effect)
    good = sign * estimate
    if se > 0:
        p_better = float(tdist.t_sf((good - shift) / se, df))
        p_worse = float(tdist.t_cdf(good / se, df))
        margin = math.log1p(equivalence_margin)
        # TOST: two one-sided tests against -margin and +margin with the pooled boot variance
        p_equiv = max(
            float(tdist.t_sf((estimate + margin) / se, df)), float(tdist.t_cdf((estimate - margin) / se, df))
        )
    else:
        p_better = 0.0 if good > shift else 1.0
        p_worse = 0.0 if good < 0 else 1.0
        p_equiv = 0.0 if abs(estimate) < math.log1p(equivalence_margin) else 1.0
    return Comparison(
        estimate=estimate,
        se=se,
        df=df,
        method=BETWEEN_BOOTS,
        n_arm=int(a.size),
        n_base=int(b.size),
        ci_low=estimate - tq * se,
        ci_high=estimate + tq * se,
        p_better=p_better,
        p_worse=p_worse,
        p_equivalent=p_equiv,
        floor=t_family * se,
    )


def compare_within_boot(
    arm_runs: npt.ArrayLike,
    base_runs: npt.ArrayLike,
    *,
    alpha: float,
    family_size: int,
    equivalence_margin: float,
    min_effect: float = 0.0,
    higher_is_better: bool = True,
) -> Comparison:
    """Welch t on run-level log values of single boots: the precision of those boots only.

    Boot-to-boot variance is invisible here, so the interval is narrower than the truth; callers must
    label it within-boot and never present it as evidence across boots.
    """
    a = np.asarray(arm_runs, dtype=float)
    b = np.asarray(base_runs, dtype=float)
    estimate = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return Comparison(
            estimate,
            math.nan,
            0,
            NONE,
            a.size,
            b.size,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
            math.nan,
        )
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        df_f = float(a.size + b.size - 2)
    else:  # Welch-Satterthwaite
        df_f = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    df = max(1, int(math.floor(df_f)))
    variance = Variance(
        s2=se**2 / (1.0 / a.size + 1.0 / b.size) if se > 0 else 0.0, df=df, sources=("within-boot runs",)
    )
    comp = compare_boots(
        a,
        b,
        variance,
        alpha=alpha,
        family_size=family_size,
        equivalence_margin=equivalence_margin,
        min_effect=min_effect,
        higher_is_better=higher_is_better,
    )
    return _with_method(comp, WITHIN_BOOT)


def compare_assumed(
    arm: npt.ArrayLike, base: npt.ArrayLike, *, assumed_floor: float, higher_is_better: bool = True
) -> Comparison:
    """No variance estimate at all: judge the point estimate against a floor the policy assumes."""
    a = np.asarray(arm, dtype=float)
    b = np.asarray(base, dtype=float)
    estimate = float(a.mean() - b.mean())
    floor = math.log1p(assumed_floor)
    good = estimate if higher_is_better else -estimate
    outcome = BETTER if good > floor else WORSE if good < -floor else INCONCLUSIVE
    return Comparison(
        estimate,
        math.nan,
        0,
        ASSUMED_FLOOR,
        a.size,
        b.size,
        math.nan,
        math.nan,
        math.nan,
        math.nan,
        math.nan,
        floor,
        outcome=outcome,
    )


def _with_method(comp: Comparison, method: str) -> Comparison:
    return Comparison(
        comp.estimate,
        comp.se,
        comp.df,
        method,
        comp.n_arm,
        comp.n_base,
        comp.ci_low,
        comp.ci_high,
        comp.p_better,
        comp.p_worse,
        comp.p_equivalent,
        comp.floor,
        comp.outcome,
        comp.p_better_adjusted,
    )


def holm(pvalues: npt.ArrayLike) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error control, no dependence assumption).

    Written here rather than called from statsmodels: multipletests(method="holm") runs gc.collect()
    on every call, which costs ~0.1 s with a loaded heap and dominated `decide`. A test checks that
    the two agree.
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return p
    order = np.argsort(p, kind="mergesort")
    scaled = np.minimum(1.0, np.maximum.accumulate(p[order] * np.arange(m, 0, -1)))
    out = np.empty(m)
    out[order] = scaled
    return out


def classify(comparisons: Sequence[Comparison], *, alpha: float) -> list[Comparison]:
    """Holm-adjust the 'better' p-values of arms sharing one baseline, then give each an outcome.

    better: Holm-adjusted one-sided p < alpha; worse: one-sided p < alpha; equivalent: TOST p < alpha;
    otherwise inconclusive. Comparisons without a variance keep their outcome (assumed floor) or stay
    inconclusive.
    """
    testable = [i for i, c in enumerate(comparisons) if math.isfinite(c.p_better)]
    adjusted: dict[int, float] = {}
    if testable:
        padj = holm([comparisons[i].p_better for i in testable])
        adjusted = {i: float(p) for i, p in zip(testable, padj, strict=True)}
    out: list[Comparison] = []
    for i, c in enumerate(comparisons):
        if i not in adjusted:
            out.append(c)
            continue
        p_adj = adjusted[i]
        if p_adj < alpha:
            outcome = BETTER
        elif c.p_worse < alpha:
            outcome = WORSE
        elif c.p_equivalent < alpha:
            outcome = EQUIVALENT
        else:
            outcome = INCONCLUSIVE
        out.append(
            Comparison(
                c.estimate,
                c.se,
                c.df,
                c.method,
                c.n_arm,
                c.n_base,
                c.ci_low,
                c.ci_high,
                c.p_better,
                c.p_worse,
                c.p_equivalent,
                c.floor,
                outcome,
                p_adj,
            )
        )
    return out
