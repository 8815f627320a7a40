"""round_economics: a round's cost in baseline decode steps against the k + 1 tokens it can return."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import pytest

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kinds.round_economics import KIND
from mtpverdict.stats.acceptance import ArmAcceptance
from mtpverdict.stats.breakeven import Interval, break_even
from mtpverdict.stats.runs import CellSummary

from .conftest import (
    acceptance,
    assert_on_missing,
    candidate,
    cell,
    control,
    make_evidence,
    params,
    refused,
    surface,
)

K2 = candidate()
MAL = 2.0  # tokens per round, bonus token included


def evidence(
    arm_tps: float = 150.0,
    off_tps: Sequence[float] = (100.0, 110.0),
    arm: Arm = K2,
    accepted: ArmAcceptance | None = None,
    extra: Sequence[CellSummary] = (),
) -> Evidence:
    """The arm and its controls at short c=1 (decode tok/s medians); the arm's acceptance length MAL."""
    offs = [control(f"off_{i}") for i in range(len(off_tps))]
    return make_evidence(
        [*offs, arm],
        cells=[
            cell(arm.name, (arm_tps,)),
            *(cell(o.name, (tps,)) for o, tps in zip(offs, off_tps, strict=True)),
            *extra,
        ],
        acceptance=[accepted or acceptance(arm.name, surface(0.5, 1000, mal=MAL))],
    )


def cost(off_tps: float, arm_tps: float, mal: float = MAL) -> float:
    """round ms / step ms = (1000 * mal / arm) / (1000 / off)."""
    return off_tps / arm_tps * mal


def test_a_round_within_k_plus_one_steps_passes() -> None:
    finding = KIND.evaluate(evidence(), K2, params("round_economics"))
    assert finding.status is RuleStatus.PASS
    # issue 14 item 2: the controls' level as the comparisons see it (their geometric mean), not the upper
    assert finding.value == pytest.approx(cost(math.sqrt(100.0 * 110.0), 150.0))
    assert finding.threshold == 3
    ((wl, conc, econ),) = finding.cells
    assert (wl, conc, econ.tokens_per_round, econ.max_tokens_per_round) == ("short", 1, MAL, 3)
    assert econ.baseline_step_ms == pytest.approx(1000 / math.sqrt(100.0 * 110.0))
    assert econ.round_ms == pytest.approx(2000 / 150)


def test_a_round_costing_more_than_k_plus_one_steps_fails() -> None:
    finding = KIND.evaluate(evidence(arm_tps=30.0, off_tps=(100.0,)), K2, params("round_economics"))
    assert (finding.status, finding.threshold) == (RuleStatus.FAIL, 3)
    assert finding.value == pytest.approx(cost(100.0, 30.0))
    at_the_bar = evidence(arm_tps=100.0, off_tps=(150.0,))  # cost exactly 3 steps
    assert KIND.evaluate(at_the_bar, K2, params("round_economics")).status is RuleStatus.PASS


def test_the_worst_cell_is_the_value_and_selectors_narrow() -> None:
    c4 = [cell("k2", (40.0,), concurrency=4), cell("off_0", (100.0,), concurrency=4)]
    ev = evidence(off_tps=(100.0,), extra=c4)
    finding = KIND.evaluate(ev, K2, params("round_economics"))
    assert finding.status is RuleStatus.FAIL and finding.value == pytest.approx(cost(100.0, 40.0))
    only_c1 = KIND.evaluate(ev, K2, params("round_economics", "concurrency = [1]"))
    assert only_c1.status is RuleStatus.PASS and only_c1.value == pytest.approx(cost(100.0, 150.0))


def test_the_acceptance_length_may_come_from_another_surface() -> None:
    accepted = acceptance("k2", surface(0.5, 1000), surface(0.5, None, mal=3.0, source="log"))
    finding = KIND.evaluate(evidence(off_tps=(100.0,), accepted=accepted), K2, params("round_economics"))
    assert finding.value == pytest.approx(cost(100.0, 150.0, mal=3.0))


def test_the_cells_own_acceptance_length_comes_before_the_arms_pooled_one() -> None:
    """Arc's dense MTP-1: the ctx4k report names its cell (1.696 tokens per round) while the arm's pool
    over ctx4k and ctx32k is 1.69; the round costs what break-even says, from the cell's own figure."""
    ev = evidence(off_tps=(100.0,))
    at_cell = break_even(Interval(1.7, None, None), 1.0, math.log(150.0 / 100.0))
    assert at_cell is not None
    ev = replace(ev, break_even={"k2": (("short", 1, at_cell),)})
    finding = KIND.evaluate(ev, K2, params("round_economics"))
    assert finding.value == pytest.approx(cost(100.0, 150.0, mal=1.7))
    assert finding.value == pytest.approx(at_cell.step_cost.value)


def test_no_acceptance_length_is_missing() -> None:
    ev = evidence(accepted=acceptance("k2", surface(0.5, 1000)))
    finding = KIND.evaluate(ev, K2, params("round_economics"))
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, None)
    assert finding.missing == "no mean acceptance length for round economics"
    assert_on_missing(ev, K2, "round_economics")


def test_no_control_rate_beside_the_arms_is_missing() -> None:
    ev = evidence(off_tps=())
    finding = KIND.evaluate(ev, K2, params("round_economics"))
    assert (finding.status, finding.missing) == (RuleStatus.MISSING, "no decode rates beside the control's")
    assert KIND.evaluate(evidence(arm_tps=0.0), K2, params("round_economics")).status is RuleStatus.MISSING


def test_an_arm_without_a_recorded_k_is_not_a_pass() -> None:
    unknown_k = candidate(k=None)
    finding = KIND.evaluate(evidence(arm_tps=10.0, arm=unknown_k), unknown_k, params("round_economics"))
    assert finding.status is not RuleStatus.PASS


def test_selectors_are_checked() -> None:
    assert refused("round_economics", "concurrency = [0]", "rules[0].concurrency[0]", ">= 1")
    assert refused("round_economics", 'metric = "decode_tps"', "rules[0].metric", "unknown key")


def test_sentences() -> None:
    assert KIND.render(KIND.evaluate(evidence(), K2, params("round_economics")), K2) == (
        "k2: short c=1: step 9.5 ms, round 13.3 ms, 2.00 tokens/round, cost 1.40 baseline steps"
    )
    failing = KIND.evaluate(evidence(arm_tps=30.0, off_tps=(100.0,)), K2, params("round_economics"))
    assert KIND.render(failing, K2) == (
        "k2: short c=1: step 10.0 ms, round 66.7 ms, 2.00 tokens/round, cost 6.67 baseline steps > the 3 "
        "tokens a round can return at most"
    )
    missing = KIND.evaluate(evidence(off_tps=()), K2, params("round_economics"))
    assert KIND.render(missing, K2) == "k2: no decode rates beside the control's"
