"""Fast calibration: under the null the default policy promotes at most alpha of the time."""

from __future__ import annotations

import pytest

from mtpverdict.rules import load_policy
from mtpverdict.sim import Scenario, SimArm, calibrate

NULL_CAMPAIGNS = 240  # a few hundred: the interval below still detects a rate twice alpha


def _null(boots: int) -> Scenario:
    return Scenario(
        name=f"null-{boots}-boots",
        arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B")),
        boots_per_arm=boots,
        reps=2,
        concurrency=(1, 4),
        completion_tokens=64,
    )


@pytest.mark.slow
def test_default_policy_false_promotion_rate_is_at_most_alpha() -> None:
    policy = load_policy("default")
    result = calibrate(_null(3), policy, NULL_CAMPAIGNS, seed=11)
    low, _ = result.rate_interval(result.promotions, alpha=0.10)  # one-sided 95% lower bound
    assert low <= policy.alpha, (
        f"{result.promotions}/{result.campaigns} null campaigns promoted: the rate exceeds alpha "
        f"{policy.alpha} beyond sampling error"
    )


@pytest.mark.slow
def test_a_single_pair_design_never_promotes_noise() -> None:
    # one off_A/off_B pair and single boots: one degree of freedom, a huge floor, no promotion
    result = calibrate(_null(1), load_policy("default"), 60, seed=12)
    assert result.promotions <= 3


@pytest.mark.slow
def test_a_real_effect_is_found() -> None:
    scenario = Scenario(
        name="effect",
        arms=(SimArm("off_A"), SimArm("k1", 1, 0.15), SimArm("k2", 2, 0.15), SimArm("off_B")),
        boots_per_arm=3,
        reps=2,
        concurrency=(1, 4),
        completion_tokens=64,
    )
    result = calibrate(scenario, load_policy("default"), 40, seed=13)
    assert result.correct_promotions >= 30


def _seed_shaped(workloads: tuple[str, ...], k2_effect: float) -> Scenario:
    return Scenario(
        name="seed-shaped",
        arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2, k2_effect), SimArm("k3", 3), SimArm("off_B")),
        boots_per_arm=3,
        reps=2,
        concurrency=(1, 4),
        completion_tokens=64,
        workloads=workloads,
        base_decode_tps=150.0,  # thor-c21's target is 100 tok/s
    )


@pytest.mark.slow
def test_thor_policy_keeps_its_reference_under_the_null_and_switches_for_a_clear_win() -> None:
    policy = load_policy("thor-c21")
    null = calibrate(_seed_shaped(("code",), 0.0), policy, 20, seed=14)
    # 5 or more false switches of 20 has probability 0.3% at a 5% rate: the rate would be wrong.
    # Under the null a campaign may also fail to settle (inconclusive, with a next step), but it never
    # drops the reference for "disabled"
    assert null.false_promotions <= 4 and null.keep_disabled == 0
    assert null.keep_reference + null.inconclusive + null.false_promotions == 20
    assert null.keep_reference > null.inconclusive
    win = calibrate(_seed_shaped(("code",), 0.2), policy, 20, seed=15)
    assert win.correct_promotions >= 18


@pytest.mark.slow
def test_arc_policy_judges_campaigns_with_its_context_workloads() -> None:
    policy = load_policy("arc-b70")
    workloads = ("ctx115k", "ctx32k", "ctx4k", "ctx64k", "ctx80k")
    null = calibrate(_seed_shaped(workloads, 0.0), policy, 20, seed=16)
    assert null.false_promotions <= 4 and null.inconclusive + null.keep_disabled + null.promotions == 20
    assert null.inconclusive < 20  # its rules find their workloads: not inconclusive by construction
    win = calibrate(_seed_shaped(workloads, 0.2), policy, 20, seed=17)
    assert win.correct_promotions >= 18
