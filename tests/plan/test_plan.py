"""Planning: variance components recovered from simulated pilots, the test's floor and power, refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mtpverdict.errors import InputError
from mtpverdict.formats.results_io import Results, results_from_records
from mtpverdict.plan import (
    Costs,
    Design,
    boot_level_sd,
    design_df,
    design_floor,
    design_power,
    layout_rounds,
    make_plan,
    median_efficiency,
    pilot_components,
    pilot_costs,
    pilot_design,
    required_boots,
    stated_components,
)
from mtpverdict.sim import Scenario, SimArm, simulate_campaign
from mtpverdict.stats import compare as cmp

BOOT_SD = 0.03
RUN_SD = 0.01
ARMS = (SimArm("off_A"), SimArm("k1", 1, 0.05), SimArm("k2", 2), SimArm("k3", 3, 0.1), SimArm("off_B"))


def _pilot(boots: int, seed: int, boot_sd: float = BOOT_SD) -> Results:
    scenario = Scenario(
        name=f"pilot-{boots}",
        arms=ARMS,
        boots_per_arm=boots,
        reps=3,
        concurrency=(1, 4),
        completion_tokens=64,
        boot_sd=boot_sd,
        run_sd=RUN_SD,
        request_sd=0.001,  # small, so a run's value carries run noise only
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(seed))
    return results_from_records(campaign, records, label=f"pilot-{seed}")


def test_variance_components_are_recovered_from_simulated_pilots() -> None:
    fits = [pilot_components(_pilot(4, seed)) for seed in range(6)]
    boot = float(np.mean([f.boot_sd for f in fits]))
    run = float(np.mean([f.run_sd for f in fits]))
    assert boot == pytest.approx(BOOT_SD, rel=0.15)
    assert run == pytest.approx(RUN_SD, rel=0.10)
    # off_A and off_B are one configuration: 5 arms x 4 boots, 4 configurations
    assert {f.boot_df for f in fits} == {16}
    assert all("mixedlm" in f.source for f in fits)


def test_no_boot_spread_is_reported_not_hidden() -> None:
    fit = pilot_components(_pilot(3, 1, boot_sd=0.0))
    assert fit.boot_sd < 0.004
    assert fit.run_sd == pytest.approx(RUN_SD, rel=0.2)


def test_a_one_boot_pilot_cannot_separate_boot_from_run_variance() -> None:
    pilot = _pilot(1, 2)
    with pytest.raises(InputError) as caught:
        pilot_components(pilot)
    message = str(caught.value.problems[0])
    assert "booted once" in message and "--boot-sd" in message
    stated = pilot_components(pilot, boot_sd=0.02)
    assert stated.boot_sd == 0.02 and stated.boot_df == 0
    assert stated.run_sd == pytest.approx(RUN_SD, rel=0.35)  # within boots: 10 arm-cells x 1-2 df
    assert "stated" in stated.source


def test_pilot_design_and_costs() -> None:
    pilot = _pilot(2, 3)
    design = pilot_design(pilot)
    assert design == Design(depths=3, control_arms=2, cells=2)
    costs = pilot_costs(pilot)
    assert costs.boot_seconds == pytest.approx(60.0, abs=6.0)  # the simulator's boots take ~60 s
    assert costs.run_seconds is not None and 0 < costs.run_seconds < 5


def test_the_floor_is_the_one_decide_prints() -> None:
    design = Design(depths=3, control_arms=2, cells=1)
    for boots in (1, 3, 5):
        df = design_df(boots, design)
        engine = cmp.compare_boots(
            np.zeros(boots),
            np.zeros(2 * boots),
            cmp.Variance(0.02**2, df, ("controls",)),
            alpha=0.05,
            family_size=3,
            equivalence_margin=0.03,
        )
        assert engine.df == df
        assert design_floor(0.02, boots, design, 0.05) == pytest.approx(engine.floor, rel=1e-12)
    assert [design_df(n, design) for n in (1, 3, 5)] == [1, 11, 21]


def test_one_pair_floor_is_five_and_a_half_times_the_pair_difference() -> None:
    # s = |D| / sqrt(2) from one off_A/off_B pair; one depth, one boot: the FIELD's 5.5 x |D|
    floor = design_floor(1 / math.sqrt(2), 1, Design(depths=1, control_arms=2), 0.05)
    assert floor == pytest.approx(5.47, abs=0.01)


def test_power_at_the_floor_is_about_a_half_and_rises_with_boots() -> None:
    design = Design()
    sd = 0.02
    for boots in (10, 20):
        at_floor = design_power(design_floor(sd, boots, design, 0.05), sd, boots, design, 0.05)
        assert 0.45 < at_floor < 0.55
    powers = [design_power(math.log1p(0.03), sd, n, design, 0.05) for n in range(1, 15)]
    assert powers == sorted(powers)
    two_cells = design_power(0.03, sd, 6, Design(cells=2), 0.05)
    assert two_cells == pytest.approx(design_power(0.03, sd, 6, design, 0.05) ** 2)


def test_required_boots_fall_as_the_effect_grows() -> None:
    design = Design()
    sd = boot_level_sd(0.02, 0.01, 2)
    needed = [required_boots(math.log1p(e), sd, design, 0.05, 0.8) for e in (0.01, 0.02, 0.03, 0.05, 0.1)]
    assert needed[0] is None  # 1% is beyond 40 boots per arm at 2% boot noise
    found = [n for n in needed if n is not None]
    assert found == sorted(found, reverse=True) and found[-1] >= 1
    for n, effect in zip(needed[1:], (0.02, 0.03, 0.05, 0.1), strict=True):
        assert n is not None
        assert design_power(math.log1p(effect), sd, n, design, 0.05) >= 0.8
        if n > 1:
            assert design_power(math.log1p(effect), sd, n - 1, design, 0.05) < 0.8


def test_median_efficiency_is_the_normal_order_statistic_value() -> None:
    assert median_efficiency(1) == median_efficiency(2) == 1.0
    assert median_efficiency(3) == pytest.approx(1.3475, rel=0.02)  # var of median of 3 = 0.4487
    assert median_efficiency(3) == median_efficiency(3)  # fixed generator: reproducible


def test_make_plan_picks_the_cheapest_reachable_design() -> None:
    plan = make_plan(
        0.05,
        stated_components(0.02, 0.01),
        Design(),
        Costs(boot_seconds=600.0, run_seconds=10.0),
    )
    assert plan.best is not None
    reachable = [r for r in plan.rows if r.boots_per_arm is not None]
    assert plan.best.seconds == min(r.seconds for r in reachable if r.seconds is not None)
    for row in reachable:
        assert row.power >= 0.8
        assert row.total_boots == 5 * (row.boots_per_arm or 0)
        assert row.total_runs == row.total_boots * (row.runs_per_boot + 1)  # one cold run per boot


@pytest.mark.parametrize(
    ("effect", "alpha", "power", "fragment"),
    [(0.0, 0.05, 0.8, "--effect"), (0.05, 0.7, 0.8, "--alpha"), (0.05, 0.05, 1.0, "--power")],
)
def test_bad_parameters_name_the_option(effect: float, alpha: float, power: float, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        make_plan(effect, stated_components(0.02, 0.0), Design(), Costs(None, None), alpha=alpha, power=power)


def test_the_plan_says_how_many_rounds_per_device_a_layout_needs() -> None:
    assert [layout_rounds(d, 2) for d in (1, 2, 3, 8, 16)] == [2, 2, 1, 1, 1]
    assert layout_rounds(1, 3) == 2  # one round on one device: every control an end of the device
    design = Design(depths=3, cells=2, devices=2)
    plan = make_plan(0.1, stated_components(0.02, 0.01), design, Costs(600.0, 10.0))
    assert plan.best is not None and plan.best.boots_per_arm is not None
    assert plan.best.boots_per_arm >= 2 * 2
    assert any("needs 2 round(s) per device on 2 device(s)" in n for n in plan.notes)
