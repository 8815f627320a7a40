"""A way out of inconclusive: what an arm lacks and the boots per arm that would likely settle it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mtpverdict.plan import Design, resolution, settle_probability, until_resolved_command, welch_floor
from mtpverdict.sim import BootArm, BootScenario, simulate_boots
from mtpverdict.stats.procedure import (
    OUTCOMES,
    BootValue,
    Cell,
    FamilyOutcome,
    Outcome,
    Why,
    batch_procedure,
    family_procedure,
)

ALPHA, MARGIN = 0.05, 0.03
C1, C4, C8 = ("chat", 1), ("chat", 4), ("chat", 8)


def _family(
    ctrl: dict[Cell, list[float]], arms: dict[str, dict[Cell, list[float]]], design: tuple[Cell, ...]
) -> FamilyOutcome:
    controls = {
        c: [BootValue("off_A" if i % 2 == 0 else "off_B", i // 2 + 1, i + 1, v) for i, v in enumerate(vals)]
        for c, vals in ctrl.items()
    }
    cands = {
        name: {
            c: [BootValue(name, b + 1, 10 + b, v) for b, v in enumerate(vals)] for c, vals in cells.items()
        }
        for name, cells in arms.items()
    }
    return family_procedure(controls, cands, design, alpha=ALPHA, equivalence_margin=MARGIN)


NOISE = [0.02, -0.015, 0.0, 0.01, -0.02, 0.005]


def test_an_inconclusive_null_arm_gets_boots_that_settle_it_in_simulation() -> None:
    design = (C1, C4)
    k1 = [0.005, -0.02, 0.02]
    family = _family(
        dict.fromkeys(design, NOISE), {"k1": dict.fromkeys(design, k1), "k2": {}, "k3": {}}, design
    )
    arm = family.arm("k1")
    assert arm.outcome == Outcome.INCONCLUSIVE and arm.why == Why.NOT_RESOLVED
    plan = resolution(arm, family)
    assert plan.boots_per_arm is not None and plan.boots_per_arm > plan.current_boots == 3
    assert plan.likely in ("equivalent", "below_min_effect") and plan.probability >= 0.8
    assert any("too wide" in m for m in plan.missing)
    # the planning truth, simulated at the planned boots: the arm settles about as often as planned
    effects = tuple(c.estimate for c in arm.cells)
    sc = BootScenario(
        "planned",
        (
            BootArm("off_A", True),
            BootArm("k1", effects=effects),
            BootArm("k2"),
            BootArm("k3"),
            BootArm("off_B", True),
        ),
        boots=plan.boots_per_arm,
        boot_sd=max(plan.sd_arm, plan.sd_control),
        cell_sd=0.0,
    )
    batch = simulate_boots(sc, np.random.default_rng(5), 400)
    _, arrays = batch_procedure(batch.arm, batch.control, alpha=ALPHA, equivalence_margin=MARGIN)
    settled = arrays.outcome[:, 0] != OUTCOMES.index(Outcome.INCONCLUSIVE)
    assert settled.mean() >= 0.7


def test_a_missing_cell_is_named_and_cannot_be_settled_by_boots_alone() -> None:
    design = (C1, C4, C8)
    fast = [0.10, 0.12, 0.11]
    family = _family(dict.fromkeys(design, NOISE), {"k1": {C1: fast, C4: fast}}, design)
    plan = resolution(family.arm("k1"), family)
    assert any("chat at concurrency 8" in m and "run that cell" in m for m in plan.missing)
    assert any("missing cell" in a for a in plan.assumptions)


def test_a_one_boot_arm_plans_with_the_controls_sd_and_says_so() -> None:
    family = _family({C1: NOISE}, {"k1": {C1: [0.15]}}, (C1,))
    arm = family.arm("k1")
    assert arm.why == Why.UNKNOWN_VARIANCE
    plan = resolution(arm, family)
    assert any("booted once" in m for m in plan.missing)
    assert any("equal the controls'" in a for a in plan.assumptions)
    assert plan.boots_per_arm is not None and plan.boots_per_arm >= 2 and plan.likely == "better"


def test_a_settled_arm_needs_nothing_more() -> None:
    family = _family({C1: NOISE}, {"k1": {C1: [0.20, 0.21, 0.19]}}, (C1,))
    plan = resolution(family.arm("k1"), family)
    assert plan.outcome == "better" and plan.boots_per_arm == plan.current_boots and plan.missing == ()


def test_settle_probability_tends_to_the_right_outcome() -> None:
    kwargs = {"alpha": ALPHA, "shift": math.log1p(MARGIN), "margin": math.log1p(MARGIN), "family_size": 3}
    big = settle_probability([0.3, 0.3], 0.02, 0.02, 5, 10, **kwargs)  # type: ignore[arg-type]
    assert big["better"] > 0.99 and big["equivalent"] < 1e-9
    null = settle_probability([0.0, 0.0], 0.005, 0.005, 10, 20, **kwargs)  # type: ignore[arg-type]
    assert null["equivalent"] > 0.9 and null["better"] < 0.01
    assert settle_probability([0.1], 0.02, 0.02, 1, 2, **kwargs) == {  # type: ignore[arg-type]
        "better": 0.0,
        "equivalent": 0.0,
        "worse": 0.0,
        "below_min_effect": 0.0,
    }


def test_welch_floor_is_the_floor_the_procedure_states_when_the_sds_are_the_truth() -> None:
    unit = np.array([-1.0, 0.0, 1.0])
    s = 0.02  # both groups' sample sd exactly 0.02
    ctrl = list(s * np.concatenate([unit, unit]) / math.sqrt(0.8))
    ctrl_sd = float(np.std(ctrl, ddof=1))
    assert ctrl_sd == pytest.approx(s)
    family = _family({C1: ctrl}, {"k1": {C1: list(s * unit)}, "k2": {}, "k3": {}}, (C1,))
    stated = family.arm("k1").cells[0].floor_first
    assert stated == pytest.approx(
        welch_floor(s, 3, Design(depths=3, control_arms=2), ALPHA, min_effect=MARGIN)
    )


def test_the_command_continues_the_campaign() -> None:
    text = until_resolved_command("campaign.toml", "results/run 1", "default", 7)
    assert text.startswith("set boots = 7 in campaign.toml")
    assert (
        "mtpverdict collect campaign.toml --out 'results/run 1' --resume --until-resolved --rules default"
        in text
    )


@pytest.mark.parametrize(
    ("alpha", "futility"),
    [(ALPHA, None), (ALPHA / 10, None), (ALPHA / 10, ALPHA)],  # fixed; a look's; a look's, futility at alpha
)
def test_the_planned_futility_probability_is_decides_in_simulation(
    alpha: float, futility: float | None
) -> None:
    """The planner's below_min_effect is decide's futility decision, at the same level: an arm truly
    at 0 settled keep off (not better by min_effect, or worse) about as often as planned. Before, the
    planner tested futility at alpha / (family x cells) while decide uses alpha unadjusted, so it
    planned 0.27 where decide settles 0.5 of the time (alpha 0.05)."""
    from mtpverdict.stats.tdist import clopper_pearson

    sd, n_arm, n_ctrl, min_effect, margin, campaigns = 0.02, 5, 10, 0.02, 0.005, 4000
    planned = settle_probability(
        [0.0],
        sd,
        sd,
        n_arm,
        n_ctrl,
        alpha=alpha,
        shift=math.log1p(min_effect),
        margin=math.log1p(margin),
        family_size=3,
        keep_off_alpha=futility,
    )["below_min_effect"]
    rng = np.random.default_rng(26)
    arm = rng.normal(0.0, sd, (campaigns, 3, 1, n_arm))
    control = rng.normal(0.0, sd, (campaigns, 1, n_ctrl))
    _, arrays = batch_procedure(
        arm, control, alpha=alpha, equivalence_margin=margin, min_effect=min_effect, keep_off_alpha=futility
    )
    kept_off = np.isin(
        arrays.outcome[:, 0], [OUTCOMES.index(Outcome.BELOW_MIN_EFFECT), OUTCOMES.index(Outcome.WORSE)]
    )
    low, high = clopper_pearson(int(kept_off.sum()), campaigns, 0.01)
    assert 0.1 < planned < 0.9  # a probability the simulation can tell apart from a neighbour's
    assert low <= planned <= high, (planned, kept_off.mean())
