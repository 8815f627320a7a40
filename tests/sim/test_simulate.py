"""The simulator's scenario parsing and calibration bookkeeping."""

from __future__ import annotations

import math

import pytest

from mtpverdict.errors import InputError
from mtpverdict.rules import load_policy
from mtpverdict.sim import (
    SCENARIOS,
    Scenario,
    SimArm,
    calibrate,
    combine,
    parse_arm,
    parse_effect,
    simulate,
    simulation_from_mapping,
)


def test_effects_are_relative_and_stored_as_log_ratios() -> None:
    assert parse_effect("5%", "x") == pytest.approx(0.05)
    assert parse_effect("+5%", "x") == pytest.approx(0.05)
    assert parse_effect(0.05, "x") == 0.05
    for bad in ("fast", True, None, "-100%"):
        with pytest.raises(ValueError):
            parse_effect(bad, "x")
    sim = simulation_from_mapping({"arms": [{"name": "off"}, {"name": "k2", "k": 2, "effect": "10%"}]}, "t")
    assert sim.scenario.arms[1].effect == pytest.approx(math.log(1.1))
    assert parse_arm("k2:2:5%") == {"name": "k2", "k": 2, "effect": "5%"}
    assert parse_arm("off_A") == {"name": "off_A"}


def test_defaults_are_a_null_depth_sweep_bracketed_by_controls() -> None:
    sim = simulation_from_mapping({}, "t")
    assert [(a.name, a.k, a.effect) for a in sim.scenario.arms] == [
        ("off_A", 0, 0.0),
        ("k1", 1, 0.0),
        ("k2", 2, 0.0),
        ("k3", 3, 0.0),
        ("off_B", 0, 0.0),
    ]
    assert sim.seed == 0 and sim.scenario.boots_per_arm == 1


def test_void_and_failed_arms() -> None:
    sim = simulation_from_mapping({"void_arms": ["k2"], "failed_boots": ["k1"]}, "t")
    by_name = {a.name: a for a in sim.scenario.arms}
    assert by_name["k2"].first_position_rate == 0.0 and by_name["k1"].first_position_rate > 0
    _, records = simulate(sim)
    failed = [r for r in records if r["kind"] == "boot" and r["status"] == "failed"]
    assert [r["arm"] for r in failed] == ["k1"]
    with pytest.raises(InputError) as caught:
        simulation_from_mapping({"void_arms": ["off_A", "nobody"]}, "t.toml")
    text = [str(p) for p in caught.value.problems]
    assert "t.toml: arms[0].void: a control arm drafts nothing, so it cannot be void" in text
    assert "t.toml: void_arms: 'nobody' is not an arm" in text


def test_a_control_arm_has_no_effect() -> None:
    with pytest.raises(InputError, match="a control arm"):
        simulation_from_mapping({"arms": [{"name": "off", "effect": 0.1}, {"name": "k1", "k": 1}]}, "t")


def test_the_fixture_scenarios_are_unchanged() -> None:
    # fixtures/synthesize.py regenerates fixtures/synthetic-* from these; see tests/test_fixtures.py
    assert set(SCENARIOS) == {"clean-win", "null", "void-arm", "drift", "blind", "crossover"}


def test_calibration_in_pieces_adds_up_to_one_run() -> None:
    scenario = Scenario(
        name="pieces",
        arms=(SimArm("off_A"), SimArm("k1", 1, 0.2), SimArm("off_B")),
        boots_per_arm=2,
        reps=2,
        concurrency=(1, 4),
        completion_tokens=64,
    )
    policy = load_policy("default")
    whole = calibrate(scenario, policy, 4, seed=3)
    parts = combine([calibrate(scenario, policy, 2, seed=3), calibrate(scenario, policy, 2, seed=3, start=2)])
    assert parts == whole
    assert whole.false_promotions == whole.promotions - whole.correct_promotions
    with pytest.raises(ValueError):
        combine([])


def test_chain_acceptance_draws_each_position_from_the_one_before() -> None:
    import dataclasses

    import numpy as np

    from mtpverdict.sim import SCENARIOS, simulate_campaign

    base = SCENARIOS["clean-win"]
    chained = dataclasses.replace(base, chain_acceptance=True)
    old = [r for r in simulate_campaign(base, np.random.default_rng(3))[1] if r["kind"] == "acceptance"]
    new = [r for r in simulate_campaign(chained, np.random.default_rng(3))[1] if r["kind"] == "acceptance"]
    assert len(old) == len(new)
    for rec in new:
        pos = rec["accepted_per_position"]
        assert all(b <= a for a, b in zip(pos, pos[1:], strict=False))
        assert rec["accepted_tokens"] == sum(pos)
    k3 = [r["accepted_per_position"] for r in new if r["arm"] == "k3"]
    drafts = sum(r["drafts"] for r in new if r["arm"] == "k3")
    totals = np.sum(k3, axis=0) / drafts
    assert totals == pytest.approx([0.9, 0.81, 0.729], abs=0.03)  # first_position_rate x decay^i


def test_a_bare_effect_of_one_or_more_is_refused_not_read_as_hundreds_of_percent() -> None:
    # k1:1:5 or effect = 5 would be +500%: the unit must be written, as plan --effect asks
    for bare in (5, "5", 1.0, "2.5"):
        with pytest.raises(ValueError, match="a bare number is a fraction"):
            parse_effect(bare, "arms[1].effect")
    assert parse_effect("150%", "x") == pytest.approx(1.5)
    assert parse_effect(0.5, "x") == 0.5


def test_the_file_is_checked_by_the_formats_validator_naming_every_bad_key() -> None:
    # the shape through formats/_check (its wording), every arm table checked, then the meaning
    obj = {
        "boots": 0,
        "run_sd": 1.5,
        "concurrency": [1, True],
        "colour": "red",
        "arms": [
            {"name": "off", "k": -1},
            {"name": "k1", "k": 1, "effect": "fast"},
            {"name": "k2", "kk": 2},
            {"name": "k3", "k": 3, "effect": "5%"},
        ],
    }
    with pytest.raises(InputError) as caught:
        simulation_from_mapping(obj, "s.toml")
    by_key = {p.key: p.message for p in caught.value.problems}
    assert all(p.source == "s.toml" for p in caught.value.problems)
    assert by_key["boots"] == "must be >= 1, got 0"
    assert by_key["run_sd"] == "must be <= 1, got 1.5 (a fraction between 0 and 1)"
    assert by_key["concurrency[1]"] == "must be an integer, got bool"
    assert by_key["colour"].startswith("unknown key; allowed keys are ")
    assert by_key["arms[0].k"] == "must be >= 0, got -1"
    assert by_key["arms[1].effect"].startswith("'fast' is not an effect")
    assert by_key["arms[2].kk"].startswith("unknown key; allowed keys are ")
    assert by_key["arms"] == "no control arm: add one with k 0 (e.g. off_A first and off_B last)"


def test_repeated_concurrency_an_empty_arm_list_and_an_unbounded_integer_are_refused() -> None:
    with pytest.raises(InputError) as caught:
        simulation_from_mapping({"seed": 2**60}, "t")
    [problem] = caught.value.problems
    assert problem.key == "seed" and problem.message.startswith("must be between -2**53 and 2**53 ")
    with pytest.raises(InputError, match="concurrency: must list distinct levels"):
        simulation_from_mapping({"concurrency": [1, 4, 1]}, "t")
    with pytest.raises(InputError, match="arms: must list the arms"):
        simulation_from_mapping({"arms": []}, "t")
