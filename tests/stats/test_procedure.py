"""The family procedure on the cases issue 13 built to fool the method, beside what stats/compare.py did."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind

from mtpverdict.stats import compare as cmp
from mtpverdict.stats.procedure import (
    OUTCOMES,
    ArchivedVariance,
    BootValue,
    Cell,
    FamilyOutcome,
    Outcome,
    VarianceMethod,
    Why,
    batch_procedure,
    combine,
    family_procedure,
)
from mtpverdict.stats.welch import CellTests, Method, holm_along

ALPHA = 0.05
MARGIN = 0.03
C1, C4, C8 = ("chat", 1), ("chat", 4), ("chat", 8)


def boots(
    arm: str, values: Sequence[float] | np.ndarray, first_order: int = 1, step: int = 5
) -> list[BootValue]:
    return [BootValue(arm, b + 1, first_order + step * b, float(v)) for b, v in enumerate(values)]


def controls_at(
    cells: Sequence[Cell], a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray
) -> dict[Cell, list[BootValue]]:
    return {c: boots("off_A", a, 1) + boots("off_B", b, 5) for c in cells}


def run(
    controls: Mapping[Cell, Sequence[BootValue]],
    arms: Mapping[str, Mapping[Cell, Sequence[BootValue]]],
    design: Sequence[Cell],
    **kwargs: object,
) -> FamilyOutcome:
    params: dict[str, object] = {"alpha": ALPHA, "equivalence_margin": MARGIN, **kwargs}
    return family_procedure(controls, arms, design, **params)  # type: ignore[arg-type]


def old_comparison(p_better: float) -> cmp.Comparison:
    return cmp.Comparison(0.1, 0.01, 5, cmp.BETWEEN_BOOTS, 3, 6, 0.0, 0.2, p_better, 1.0, 1.0, 0.05)


# ---- item 2: combination --------------------------------------------------------------------------


def _tests_from_p(p: np.ndarray) -> CellTests:
    """CellTests whose better p-values are given (one campaign, A arms x C cells); nothing else resolves."""
    shape = p.shape
    ones = np.ones(shape)[None]
    return CellTests(
        n_arm=np.full((1, *shape), 3),
        n_control=np.full((1, *shape), 6),
        estimate=np.full((1, *shape), 0.1),
        se=ones * 0.01,
        sd_arm=ones * 0.02,
        sd_control=ones * 0.02,
        df=ones * 5,
        ci_low=ones * 0.0,
        ci_high=ones * 0.2,
        p_better=p[None],
        p_short=1.0 - p[None],
        p_worse=ones,
        p_equivalent=ones,
        floor_first=ones * 0.05,
        floor_last=ones * 0.04,
        method=np.full((1, *shape), int(Method.WELCH)),
        loo_p=p[None] * 0.0,
        loo_estimate=ones * 0.1,
        loo_drop=np.zeros((1, *shape), dtype=np.int64),
    )


P_MATRIX = np.array([[0.04, 1e-6, 1e-6], [1e-6, 0.04, 1e-6], [1e-6, 1e-6, 0.04]])  # arms x cells


def test_old_holm_per_cell_declares_every_arm_better_on_the_issue_matrix() -> None:
    per_cell = [cmp.classify([old_comparison(p) for p in P_MATRIX[:, j]], alpha=ALPHA) for j in range(3)]
    better_everywhere = [all(per_cell[j][i].outcome == cmp.BETTER for j in range(3)) for i in range(3)]
    assert better_everywhere == [True, True, True]  # the defect: three arms "better at every cell"


def test_intersection_union_then_holm_declares_none_better_on_the_issue_matrix() -> None:
    arrays = combine(_tests_from_p(P_MATRIX), ALPHA)
    assert arrays.p_better[0].tolist() == pytest.approx([0.04, 0.04, 0.04])
    assert arrays.p_better_holm[0].tolist() == pytest.approx([0.12, 0.12, 0.12])
    assert (arrays.outcome[0] == 4).all()  # inconclusive, every one


def test_a_single_arm_at_its_largest_p_is_better_when_below_alpha() -> None:
    arrays = combine(_tests_from_p(np.array([[0.01, 0.03, 0.02]])), ALPHA)
    assert arrays.p_better[0, 0] == pytest.approx(0.03)
    assert int(arrays.worst_cell[0, 0]) == 1
    assert arrays.outcome[0, 0] == 0  # better


@pytest.mark.slow
def test_holm_along_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    p = rng.random((20, 5)) ** 3
    ours = holm_along(p)
    for row, adjusted in zip(p, ours, strict=True):
        assert adjusted == pytest.approx(multipletests(row, method="holm")[1])


# ---- item 1: missing design cells -----------------------------------------------------------------


def test_old_rule_reads_only_the_cells_an_arm_measured() -> None:
    # compare.classify per present cell, then faster_than_off's "all of the cells it has": better
    present = [cmp.classify([old_comparison(1e-4)], alpha=ALPHA)[0] for _ in (C1, C4)]
    assert all(c.outcome == cmp.BETTER for c in present)


def test_a_design_cell_missing_for_an_arm_makes_it_inconclusive_and_says_which() -> None:
    design = (C1, C4, C8)
    ctrl = controls_at(design, [0.0, 0.01, -0.01], [0.005, -0.005, 0.0])
    fast = [0.10, 0.11, 0.09]
    arms = {
        "k1": {C1: boots("k1", fast, 2), C4: boots("k1", fast, 2)},  # its c=8 runs are missing
        "k2": {c: boots("k2", [0.0, 0.01, -0.01], 3) for c in design},
        "k3": {},  # measured nothing: still a member of the Holm family
    }
    out = run(ctrl, arms, design)
    k1 = out.arm("k1")
    assert all(c.p_better < 0.01 for c in k1.cells)  # clearly faster where it was measured
    assert k1.outcome == Outcome.INCONCLUSIVE and k1.why == Why.MISSING_CELL
    assert k1.missing_cells == (C8,) and k1.p_better == 1.0
    assert out.arm("k3").missing_cells == design
    assert len(out.arms) == 3  # the family is every candidate, measured or not


def test_the_holm_family_counts_arms_that_measured_nothing() -> None:
    design = (C1,)
    ctrl = controls_at(design, [0.0, 0.01, -0.01], [0.005, -0.005, 0.0])
    one = {"k1": {C1: boots("k1", [0.04, 0.05, 0.045], 2)}}
    alone = run(ctrl, one, design, min_effect=0.0).arm("k1")
    family = run(ctrl, {**one, "k2": {}, "k3": {}}, design, min_effect=0.0).arm("k1")
    assert family.p_better_holm == pytest.approx(min(1.0, 3 * alone.p_better_holm))


# ---- item 3: variance -----------------------------------------------------------------------------


def test_old_pooled_variance_of_an_identical_pair_promotes_a_null_arm() -> None:
    base = np.array([4.0, 4.0])  # off_A and off_B identical
    variance = cmp.pooled_variance([("controls", base)])
    comp = cmp.compare_boots(
        np.array([4.005]), base, variance, alpha=ALPHA, family_size=3, equivalence_margin=MARGIN
    )
    assert variance.known and comp.p_better == 0.0  # certainty from two equal numbers
    assert cmp.classify([comp], alpha=ALPHA)[0].outcome == cmp.BETTER


@pytest.mark.parametrize("gap", [0.0, 0.0005])  # identical, or 0.05% apart
def test_an_identical_or_near_identical_control_pair_is_unknown_variance(gap: float) -> None:
    design = (C1,)
    ctrl = {C1: boots("off_A", [4.0], 1) + boots("off_B", [4.0 + gap], 5)}
    arms = {
        name: {C1: boots(name, [4.0 + d], i + 2)}
        for i, (name, d) in enumerate([("k1", 0), ("k2", 0.005), ("k3", 0)])
    }
    out = run(ctrl, arms, design, min_effect=0.0)
    k2 = out.arm("k2")
    assert k2.outcome == Outcome.INCONCLUSIVE and k2.why == Why.UNKNOWN_VARIANCE
    assert k2.cells[0].variance == VarianceMethod.UNKNOWN and math.isnan(k2.cells[0].p_better)
    assert "booted once" in k2.cells[0].variance_reason


def test_three_control_boots_in_agreement_closer_than_credible_are_unknown_too() -> None:
    ctrl = {C1: boots("off_A", [0.0, 0.0002, 0.0001], 1) + boots("off_B", [0.0001, 0.0, 0.0002], 5)}
    arms = {"k1": {C1: boots("k1", [0.05, 0.07, 0.06], 2)}}
    k1 = run(ctrl, arms, (C1,), min_effect=0.0).arm("k1")
    assert k1.why == Why.UNKNOWN_VARIANCE
    assert "not certainty" in k1.cells[0].variance_reason


def test_old_code_promotes_one_boot_arms_on_variance_borrowed_from_the_controls() -> None:
    base = np.array([0.0, 0.02, -0.02, 0.01, -0.01, 0.0])
    variance = cmp.pooled_variance([("controls", base)])
    comp = cmp.compare_boots(
        np.array([0.08]), base, variance, alpha=ALPHA, family_size=1, equivalence_margin=MARGIN
    )
    assert cmp.classify([comp], alpha=ALPHA)[0].outcome == cmp.BETTER


def test_a_one_boot_arm_is_not_promoted_without_archived_history_and_is_with_it_lent() -> None:
    ctrl = controls_at((C1,), [0.0, 0.02, -0.02], [0.01, -0.01, 0.0])
    arms = {"k1": {C1: boots("k1", [0.12], 2)}}
    bare = run(ctrl, arms, (C1,), min_effect=0.0).arm("k1")
    assert bare.outcome == Outcome.INCONCLUSIVE and bare.why == Why.UNKNOWN_VARIANCE
    history = {C1: ArchivedVariance(s2=0.015**2, df=30, label="seat-2026-10")}
    backed = run(ctrl, arms, (C1,), min_effect=0.0, history=history, lend_history=True).arm("k1")
    assert backed.cells[0].variance == VarianceMethod.HISTORY
    assert "seat-2026-10" in backed.cells[0].variance_reason
    assert backed.outcome == Outcome.BETTER


def test_a_one_boot_arm_does_not_borrow_the_controls_history_unless_lent() -> None:
    """A/A history is the controls' variance: lent to a 1-boot candidate by default, a drafter truly
    2x noisier than the history was promoted in 2.1-18.2% of null campaigns."""
    ctrl = controls_at((C1,), [0.0, 0.02, -0.02], [0.01, -0.01, 0.0])
    arms = {"k1": {C1: boots("k1", [0.12], 2)}}
    history = {C1: ArchivedVariance(s2=0.015**2, df=30, label="seat-2026-10")}
    k1 = run(ctrl, arms, (C1,), min_effect=0.0, history=history).arm("k1")
    assert k1.outcome == Outcome.INCONCLUSIVE and k1.why == Why.UNKNOWN_VARIANCE
    assert k1.cells[0].variance == VarianceMethod.UNKNOWN
    assert "lend_history" in k1.cells[0].variance_reason


def test_history_is_pooled_into_the_controls_and_said_so() -> None:
    ctrl = controls_at((C1,), [0.0, 0.02, -0.02], [0.01, -0.01, 0.0])
    arms = {"k1": {C1: boots("k1", [0.05, 0.06, 0.04], 2)}}
    history = {C1: ArchivedVariance(s2=0.02**2, df=20, label="aa")}
    cell = run(ctrl, arms, (C1,), history=history).arm("k1").cells[0]
    assert cell.variance == VarianceMethod.POOLED and "pooled" in cell.variance_reason
    s2_c = (np.var([0.0, 0.02, -0.02, 0.01, -0.01, 0.0], ddof=1) * 5 + 0.02**2 * 20) / 25
    assert cell.sd_control == pytest.approx(math.sqrt(s2_c))
    v_a, v_c = np.var([0.05, 0.06, 0.04], ddof=1) / 3, s2_c / 6
    assert cell.df == pytest.approx((v_a + v_c) ** 2 / (v_a**2 / 2 + v_c**2 / 25))


def test_welch_statistics_match_scipy_and_tost_matches_statsmodels() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.normal(0.05, 0.03, 4), rng.normal(0.0, 0.01, 6)
    ctrl = {C1: boots("off_A", b[:3], 1) + boots("off_B", b[3:], 5)}
    cell = run(ctrl, {"k1": {C1: boots("k1", a, 2)}}, (C1,), min_effect=0.0).arm("k1").cells[0]
    welch = sps.ttest_ind(a, b, equal_var=False)
    assert cell.estimate / cell.se == pytest.approx(welch.statistic)
    assert cell.df == pytest.approx(welch.df)
    assert cell.p_better == pytest.approx(sps.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)
    margin = math.log1p(MARGIN)
    assert cell.p_equivalent == pytest.approx(ttost_ind(a, b, -margin, margin, usevar="unequal")[0])
    assert cell.variance == VarianceMethod.WELCH


def test_per_arm_variance_does_not_let_a_noisy_arm_borrow_the_controls_precision() -> None:
    ctrl = controls_at((C1,), [0.0, 0.005, -0.005], [0.003, -0.003, 0.0])
    noisy = [0.20, -0.05, 0.05]  # mean +6.7%, sd 12.6%
    old_var = cmp.pooled_variance([("controls", [0.0, 0.005, -0.005, 0.003, -0.003, 0.0])])
    old = cmp.compare_boots(
        np.array(noisy), np.zeros(6), old_var, alpha=ALPHA, family_size=1, equivalence_margin=MARGIN
    )
    assert old.p_better < 1e-3  # pooling over the quiet controls only
    new = run(ctrl, {"k1": {C1: boots("k1", noisy, 2)}}, (C1,), min_effect=0.0).arm("k1")
    assert new.cells[0].p_better > 0.2 and new.outcome == Outcome.INCONCLUSIVE


# ---- items 6 and 7: equivalence first, min_effect ------------------------------------------------


def _ten_boot_case(
    effect: float,
) -> tuple[dict[Cell, list[BootValue]], dict[str, dict[Cell, list[BootValue]]]]:
    spread = np.linspace(-0.004, 0.004, 10)
    ctrl = {C1: boots("off_A", spread[:10], 1, 3) + boots("off_B", spread[::-1], 2, 3)}
    return ctrl, {"k1": {C1: boots("k1", effect + spread, 3, 3)}}


def test_old_classify_calls_a_plus_two_percent_arm_better_though_it_is_equivalent() -> None:
    spread = np.linspace(-0.004, 0.004, 10)
    base = np.concatenate([spread, spread])
    variance = cmp.pooled_variance([("controls", base), ("k1", 0.0198 + spread)])
    comp = cmp.compare_boots(
        0.0198 + spread, base, variance, alpha=ALPHA, family_size=1, equivalence_margin=MARGIN
    )
    assert comp.p_equivalent < ALPHA  # equivalent too
    assert cmp.classify([comp], alpha=ALPHA)[0].outcome == cmp.BETTER  # but better wins


@pytest.mark.parametrize("min_effect", [None, 0.0])
def test_a_truth_inside_the_margin_gets_one_answer_equivalent(min_effect: float | None) -> None:
    ctrl, arms = _ten_boot_case(math.log1p(0.02))
    k1 = run(ctrl, arms, (C1,), min_effect=min_effect).arm("k1")
    assert k1.p_equivalent_holm < ALPHA
    assert k1.outcome == Outcome.EQUIVALENT


def test_min_effect_defaults_to_the_margin() -> None:
    ctrl, arms = _ten_boot_case(math.log1p(0.02))
    out = run(ctrl, arms, (C1,))
    assert out.min_effect == pytest.approx(MARGIN)
    cell = out.arm("k1").cells[0]
    assert cell.p_better > 0.5  # +2% is not better than +3%


def _interval_case(
    low: float, high: float
) -> tuple[dict[Cell, list[BootValue]], dict[str, dict[Cell, list[BootValue]]]]:
    """Boots whose 90% Welch interval of the log ratio is [log1p(low), log1p(high)]."""
    lo, hi = math.log1p(low), math.log1p(high)
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    unit = np.array([-1.0, 0.0, 1.0])  # sd 1
    # the six control boots are unit twice: variance 0.8 (ddof 1)
    se_unit = math.sqrt(1 / 3 + 0.8 / 6)
    df = (1 / 3 + 0.8 / 6) ** 2 / ((1 / 3) ** 2 / 2 + (0.8 / 6) ** 2 / 5)
    scale = half / (sps.t.ppf(1 - ALPHA, df) * se_unit)
    ctrl = {C1: boots("off_A", scale * unit, 1) + boots("off_B", scale * unit, 5)}
    return ctrl, {"k1": {C1: boots("k1", centre + scale * unit, 2)}}


def test_old_rule_keeps_an_interval_wholly_below_min_effect_inconclusive_and_one_straddling_it_eligible() -> (
    None
):
    for (low, high), expected in (((0.073, 0.136), cmp.INCONCLUSIVE), ((0.120, 0.186), cmp.BETTER)):
        ctrl, arms = _interval_case(low, high)
        base = np.array([v.log_value for v in ctrl[C1]])
        arm = np.array([v.log_value for v in arms["k1"][C1]])
        variance = cmp.pooled_variance([("controls", base), ("k1", arm)])
        comp = cmp.classify(
            [cmp.compare_boots(arm, base, variance, alpha=ALPHA, family_size=1, equivalence_margin=MARGIN)],
            alpha=ALPHA,
        )[0]
        outcome = comp.outcome  # faster_than_off: better but below min_effect becomes inconclusive
        if outcome == cmp.BETTER and comp.estimate < math.log1p(0.15):
            outcome = cmp.INCONCLUSIVE
        assert outcome == expected


def test_min_effect_is_a_test_against_its_threshold() -> None:
    ctrl, arms = _interval_case(0.073, 0.136)
    k1 = run(ctrl, arms, (C1,), min_effect=0.15).arm("k1")
    cell = k1.cells[0]
    assert math.expm1(cell.ci_low) == pytest.approx(0.073, abs=1e-9)
    assert math.expm1(cell.ci_high) == pytest.approx(0.136, abs=1e-9)
    assert k1.outcome == Outcome.BELOW_MIN_EFFECT  # the interval is wholly below +15%: fails the rule
    ctrl, arms = _interval_case(0.120, 0.186)
    k3 = run(ctrl, arms, (C1,), min_effect=0.15).arm("k1")
    assert math.expm1(k3.cells[0].estimate) > 0.15 - 1e-3
    assert k3.outcome == Outcome.INCONCLUSIVE and k3.why == Why.NOT_RESOLVED  # not eligible


def _two_cells(
    first: tuple[float, float], second: tuple[float, float]
) -> tuple[dict[Cell, list[BootValue]], dict[str, dict[Cell, list[BootValue]]]]:
    """The interval case at C1 with `first` and at C4 with `second` (same boots, shifted)."""
    ctrl, arms = _interval_case(*first)
    ctrl4, arms4 = _interval_case(*second)
    return {C1: ctrl[C1], C4: ctrl4[C1]}, {"k1": {C1: arms["k1"][C1], C4: arms4["k1"][C1]}}


def test_futility_settles_an_arm_whose_interval_is_below_min_effect_at_one_cell_only() -> None:
    # at c=1 the 90% interval's upper bound is +14.8%, under the +15% bar; at c=4 the arm is far above
    # it. Bonferroni over the two cells does not show it below +15% (the corrected p is above alpha);
    # it is not better by min_effect at every cell, so the arm is settled below_min_effect (futility)
    ctrl, arms = _two_cells((0.08, 0.148), (0.30, 0.40))
    k1 = run(ctrl, arms, (C1, C4), min_effect=0.15).arm("k1")
    assert k1.p_below_min_effect_holm > ALPHA
    assert k1.outcome == Outcome.BELOW_MIN_EFFECT and k1.why == Why.RESOLVED
    # one straddling the bar everywhere stays unresolved
    ctrl, arms = _two_cells((0.10, 0.16), (0.30, 0.40))
    assert run(ctrl, arms, (C1, C4), min_effect=0.15).arm("k1").outcome == Outcome.INCONCLUSIVE


def test_futility_never_promotes_and_keeps_an_arm_off_only_when_its_interval_says_so() -> None:
    rng = np.random.default_rng(26)
    arm = rng.normal(0.0, 0.02, (400, 3, 2, 4))
    control = rng.normal(0.0, 0.02, (400, 2, 8))
    tests, arrays = batch_procedure(arm, control, alpha=ALPHA, equivalence_margin=MARGIN)
    below = arrays.outcome == OUTCOMES.index(Outcome.BELOW_MIN_EFFECT)
    shown_below = (tests.ci_high < math.log1p(MARGIN)).any(axis=-1)
    assert np.array_equal(below & ~shown_below, np.zeros_like(below))
    assert not (arrays.outcome == OUTCOMES.index(Outcome.BETTER)).any()
    corrected = (arrays.p_equivalent_holm < ALPHA) | (arrays.p_worse_holm < ALPHA)
    corrected |= arrays.p_short_holm < ALPHA  # what settled an arm before the futility decision
    settled = arrays.outcome != OUTCOMES.index(Outcome.INCONCLUSIVE)
    assert settled.mean() > corrected.mean() + 0.05


# ---- item 5: one boot cannot carry a promotion ----------------------------------------------------


def test_old_code_promotes_on_one_slow_control_boot_when_history_tightens_the_variance() -> None:
    base = np.array([0.0, 0.01, -0.01, 0.005, -0.005, -0.20])
    arm = np.array([0.0, 0.01, -0.01])
    variance = cmp.pooled_variance([("controls", base), ("k1", arm)], [("history", 0.01**2, 200)])
    comp = cmp.compare_boots(arm, base, variance, alpha=ALPHA, family_size=1, equivalence_margin=MARGIN)
    assert cmp.classify([comp], alpha=ALPHA)[0].outcome == cmp.BETTER


def test_one_control_boot_cannot_carry_a_promotion() -> None:
    ctrl = {C1: boots("off_A", [0.0, 0.01, -0.01], 1) + boots("off_B", [0.005, -0.005, -0.20], 5)}
    arms = {"k1": {C1: boots("k1", [0.0, 0.01, -0.01], 2)}}
    history = {C1: ArchivedVariance(s2=0.01**2, df=200, label="aa")}
    k1 = run(ctrl, arms, (C1,), min_effect=0.0, history=history).arm("k1")
    assert k1.p_better_holm < ALPHA  # every boot together says better
    assert k1.loo_p > ALPHA and k1.loo_boot == "off_B boot 3"
    assert k1.outcome == Outcome.INCONCLUSIVE and k1.why == Why.ONE_BOOT_CARRIES


def test_leave_one_out_keeps_a_promotion_every_boot_supports() -> None:
    ctrl = controls_at((C1,), [0.0, 0.01, -0.01], [0.005, -0.005, 0.0])
    k1 = run(ctrl, {"k1": {C1: boots("k1", [0.10, 0.11, 0.09], 2)}}, (C1,), min_effect=0.0).arm("k1")
    assert k1.outcome == Outcome.BETTER and k1.loo_p < ALPHA


# ---- item 10: the floor as it really is -----------------------------------------------------------


def test_the_floor_is_holms_first_step_and_later_steps_resolve_less() -> None:
    ctrl = {C1: boots("off_A", [0.003, -0.003] * 5, 1) + boots("off_B", [-0.003, 0.003] * 5, 2)}
    unit = np.array([0.0021, -0.0021] * 5)
    strong = {name: {C1: boots(name, 0.30 + unit, 3)} for name in ("k1", "k3")}

    def family(effect: float) -> FamilyOutcome:
        arms = {**strong, "k2": {C1: boots("k2", effect + unit, 4)}}
        return run(ctrl, arms, (C1,), min_effect=0.0, equivalence_margin=0.001)

    cell = family(0.01).arm("k2").cells[0]
    assert cell.floor_first == pytest.approx(sps.t.ppf(1 - ALPHA / 3, cell.df) * cell.se)
    assert cell.floor_last == pytest.approx(sps.t.ppf(1 - ALPHA, cell.df) * cell.se)
    # below the floor printed for it, yet called better at Holm's last step (the others went first)
    k2 = family(0.85 * cell.floor_first + 0.15 * cell.floor_last).arm("k2")
    assert k2.floor_last < k2.cells[0].estimate < k2.floor_first
    assert ALPHA / 3 < k2.p_better < ALPHA
    assert k2.outcome == Outcome.BETTER


# ---- per-cell outcomes (the regime map) ----------------------------------------------------------


def test_per_cell_outcomes_recover_a_crossover() -> None:
    design = (C1, C8)
    ctrl = controls_at(design, [0.0, 0.01, -0.01], [0.005, -0.005, 0.0])
    cross = {C1: boots("k2", [0.26, 0.27, 0.25], 3), C8: boots("k2", [-0.16, -0.17, -0.15], 3)}
    out = run(ctrl, {"k1": {c: boots("k1", [0.0, 0.01, -0.01], 2) for c in design}, "k2": cross}, design)
    k2 = out.arm("k2")
    assert [c.cell_outcome for c in k2.cells] == [Outcome.BETTER, Outcome.WORSE]
    assert k2.outcome == Outcome.WORSE  # as one depth for every cell it loses somewhere


# ---- properties and input --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-0.2, 0.2), min_size=2, max_size=6),
    st.lists(st.floats(-0.2, 0.2), min_size=2, max_size=6),
)
def test_identical_arms_never_promote_and_intervals_hold_their_estimate(
    a: list[float], b: list[float]
) -> None:
    ctrl = {C1: boots("off_A", a, 1) + boots("off_B", b, 2)}
    same = ctrl[C1]
    arms = {
        "k1": {C1: [BootValue("k1", v.boot + 10 * (v.arm == "off_B"), v.order, v.log_value) for v in same]}
    }
    k1 = run(ctrl, arms, (C1,), min_effect=0.0).arm("k1")
    assert k1.outcome != Outcome.BETTER
    cell = k1.cells[0]
    if not math.isnan(cell.se):
        assert cell.ci_low <= cell.estimate <= cell.ci_high


def test_the_order_of_the_family_does_not_change_outcomes() -> None:
    rng = np.random.default_rng(5)
    design = (C1, C4)
    ctrl = controls_at(design, rng.normal(0, 0.02, 3), rng.normal(0, 0.02, 3))
    arms = {
        f"k{k}": {c: boots(f"k{k}", rng.normal(0.03 * k, 0.02, 3), k + 1) for c in design} for k in (1, 2, 3)
    }
    forward = run(ctrl, arms, design, min_effect=0.0)
    backward = run(ctrl, dict(reversed(list(arms.items()))), design, min_effect=0.0)
    for a in forward.arms:
        assert backward.arm(a.arm).outcome == a.outcome
        assert backward.arm(a.arm).p_better_holm == pytest.approx(a.p_better_holm)


def test_batch_and_typed_calls_agree() -> None:
    rng = np.random.default_rng(9)
    design = (C1, C4)
    a_vals = rng.normal(0.05, 0.02, (3, 2, 3))
    c_vals = rng.normal(0.0, 0.02, (2, 6))
    ctrl = {
        c: boots("off_A", c_vals[j, :3], 1) + boots("off_B", c_vals[j, 3:], 5) for j, c in enumerate(design)
    }
    arms = {f"k{i}": {c: boots(f"k{i}", a_vals[i, j], 2) for j, c in enumerate(design)} for i in range(3)}
    typed = run(ctrl, arms, design, min_effect=0.0)
    tests, arrays = batch_procedure(
        a_vals[None], c_vals[None], alpha=ALPHA, equivalence_margin=MARGIN, min_effect=0.0
    )
    for i, arm in enumerate(typed.arms):
        assert arm.p_better_holm == pytest.approx(float(arrays.p_better_holm[0, i]))
        assert [c.estimate for c in arm.cells] == pytest.approx(tests.estimate[0, i].tolist())


@pytest.mark.parametrize(
    ("controls", "arms", "message"),
    [
        ({("x", 9): [BootValue("off_A", 1, 1, 0.0)]}, {"k1": {}}, "not in the design"),
        ({C1: [BootValue("off_A", 1, 1, math.nan)]}, {"k1": {}}, "log value nan"),
        ({C1: [BootValue("off_A", 1, 1, 0.0), BootValue("off_A", 1, 2, 0.1)]}, {"k1": {}}, "appears twice"),
        ({C1: []}, {}, "no candidate"),
    ],
)
def test_bad_input_is_an_error_not_a_verdict(
    controls: dict[Cell, list[BootValue]], arms: dict[str, dict[Cell, list[BootValue]]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        run(controls, arms, (C1,))


def test_a_keep_off_level_above_alpha_only_keeps_more_arms_off() -> None:
    """A look's keep-off outcomes at the policy's alpha, above the look's: arms that were inconclusive
    may become below_min_effect, worse or equivalent, and nothing else moves (no promotion gained or
    lost at that look, min_effect at the margin or 0)."""
    from mtpverdict.stats.procedure import OUTCOMES, Outcome, batch_procedure

    rng = np.random.default_rng(26)
    sd, look = 0.02, 0.005  # the look's alpha: alpha / 10
    effects = np.array([0.0, 0.02, 0.06])[None, :, None, None]  # null, below and above min_effect
    arm = rng.normal(0.0, sd, (3000, 3, 2, 3)) + effects  # (campaigns, arms, cells, boots)
    control = rng.normal(0.0, sd, (3000, 2, 6))
    keep_off = [OUTCOMES.index(o) for o in (Outcome.BELOW_MIN_EFFECT, Outcome.WORSE, Outcome.EQUIVALENT)]
    for min_effect in (None, 0.0):
        kwargs = {"alpha": look, "equivalence_margin": 0.03, "min_effect": min_effect}
        _, at_look = batch_procedure(arm, control, **kwargs)  # type: ignore[arg-type]
        _, wider = batch_procedure(arm, control, keep_off_alpha=0.05, **kwargs)  # type: ignore[arg-type]
        moved = at_look.outcome != wider.outcome
        assert moved.any()  # the wider level does settle arms the look's could not
        # inconclusive arms settle; a kept-off arm may be kept off for a stronger reason (worse
        # before below min_effect); no arm moves into or out of better
        assert np.isin(at_look.outcome[moved], [*keep_off, OUTCOMES.index(Outcome.INCONCLUSIVE)]).all()
        assert np.isin(wider.outcome[moved], keep_off).all()
        assert (at_look.outcome[moved] == OUTCOMES.index(Outcome.INCONCLUSIVE)).sum() > moved.sum() / 2
