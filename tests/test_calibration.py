"""Fast calibration: under the null the default policy promotes at most alpha of the time."""

from __future__ import annotations

from mtpverdict.rules import load_policy
from mtpverdict.simulate import Scenario, SimArm, calibrate

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


def test_default_policy_false_promotion_rate_is_at_most_alpha() -> None:
    policy = load_policy("default")
    result = calibrate(_null(3), policy, NULL_CAMPAIGNS, seed=11)
    low, _ = result.rate_interval(result.promotions, alpha=0.10)  # one-sided 95% lower bound
    assert low <= policy.alpha, (
        f"{result.promotions}/{result.campaigns} null campaigns promoted: the rate exceeds alpha "
        f"{policy.alpha} beyond sampling error"
    )


def test_a_single_pair_design_never_promotes_noise() -> None:
    # one off_A/off_B pair and single boots: one degree of freedom, a huge floor, no promotion
    result = calibrate(_null(1), load_policy("default"), 60, seed=12)
    assert result.promotions <= 3


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
