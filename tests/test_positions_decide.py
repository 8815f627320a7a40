"""Control positions confounded with role are never decided; drawn positions are (decide end to end)."""

from __future__ import annotations

import math

import numpy as np

from mtpverdict.decide import decide
from mtpverdict.formats.decision import ControlStatus, Decision, DecisionKind
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules import load_policy
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

ARMS = (SimArm("off_A"), SimArm("k1", 1, math.log(1.2)), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B"))


def _decided(order_seed: int | None, devices: int = 6, ends_slow: float = 0.0, seed: int = 3) -> Decision:
    scenario = Scenario(
        name="devices",
        arms=ARMS,
        boots_per_arm=1,
        concurrency=(1, 4),
        completion_tokens=64,
        devices=devices,
        order_seed=order_seed,
        ends_slow=ends_slow,
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(seed))
    return decide(results_from_records(campaign, records, label="devices"), load_policy("default"))


def test_every_control_at_an_end_of_its_device_is_inconclusive_with_that_reason() -> None:
    """off_A first and off_B last on every device, one round: k1 truly +20% is still not promoted."""
    decision = _decided(order_seed=None)
    assert decision.decision is DecisionKind.INCONCLUSIVE
    positions = [c for c in decision.controls if c.name == "positions"]
    assert positions and positions[0].status is ControlStatus.FAIL
    assert any("confounded with their role" in r for r in decision.reasons)


def test_drawn_control_positions_are_decided() -> None:
    decision = _decided(order_seed=20261201)
    assert not [c for c in decision.controls if c.name == "positions"]
    assert decision.decision is DecisionKind.PROMOTE
    assert decision.selected is not None and decision.selected.arm == "k1"
    drift = next(c for c in decision.controls if c.name == "drift")
    assert "ends vs middle" in drift.detail and drift.status is ControlStatus.PASS
