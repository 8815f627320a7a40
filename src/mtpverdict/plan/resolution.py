"""The family procedure (stats/procedure.py): per-arm (Welch) variance, and a way out of "inconclusive"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict._logscale import change
from mtpverdict.plan.model import (
    DEFAULT_POWER,
    MAX_BOOTS_PER_ARM,
    Design,
)

if TYPE_CHECKING:
    from mtpverdict.stats.procedure import ArmOutcome, FamilyOutcome


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
    keep_off_alpha: float | None = None,
) -> dict[str, float]:
    """Probability that each outcome is shown at n_arm boots per arm (noncentral t, Holm's first step).

    The levels are decide's (stats/procedure.py): better and equivalent must hold at every cell (their
    product: a lower bound, as design_power); worse at some cell at alpha / (family x cells), Holm's
    first step; below_min_effect, the futility decision, at some cell at alpha unadjusted (the upper
    bound of the 1 - 2 alpha interval below log(1 + min_effect); `keep_off_alpha` when the family
    takes it at another level, FamilyOutcome.keep_off_level). "At some cell" is the largest
    per-cell probability: a lower bound, exact with one cell. Equivalence uses the normal-shift
    approximation of TOST power with t quantiles.
    """
    from mtpverdict.stats import tdist

    df = welch_df(sd_arm, n_arm, sd_control, n_control)
    if math.isnan(df):
        return {"better": 0.0, "equivalent": 0.0, "worse": 0.0, "below_min_effect": 0.0}
    se = math.sqrt(sd_arm**2 / n_arm + sd_control**2 / n_control)
    m, cells = max(family_size, 1), max(len(effects), 1)
    t_all = float(tdist.t_ppf(1 - alpha / m, df))
    t_any = float(tdist.t_ppf(1 - alpha / (m * cells), df))
    # futility only keeps an arm off: no correction
    t_futile = float(tdist.t_ppf(1 - (alpha if keep_off_alpha is None else keep_off_alpha), df))
    better = equivalent = 1.0
    worse = short = 0.0
    for d in effects:
        better *= float(tdist.nct_sf(t_all, df, (d - shift) / se))
        short = max(short, float(tdist.nct_cdf(-t_futile, df, (d - shift) / se)))
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
                keep_off_alpha=family.keep_off_level,
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

    Either way the command runs on `results` and its looks stay counted (stats/looks.py). resume
    True: the campaign has looks left, so it is resumed. resume False: its looks have spent its alpha
    (one collected without --until-resolved has one look, and a resume cannot add --until-resolved):
    a new campaign in a fresh directory that continues this one (`--continues`), so what its looks
    spent is counted; it can still keep arms off, but not promote.
    """
    import shlex

    if not resume:
        return (
            "this campaign's looks have spent its alpha (one collected without --until-resolved has one "
            "look), so no campaign that continues it can promote an arm; set boots = "
            f"{boots_per_arm} in {campaign} and collect a campaign that continues this one, its looks "
            "counted: "
            + shlex.join(
                [
                    "mtpverdict",
                    "collect",
                    campaign,
                    "--out",
                    NEW_RESULTS,
                    "--continues",
                    results,
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
