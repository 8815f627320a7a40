"""Break-even acceptance: the step cost in baseline steps, its interval, and the seeds' round economics."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtpverdict.stats.breakeven import Interval, break_even, conservative_bound, length_interval
from mtpverdict.stats.economics import round_economics

from ..conftest import ROOT

GOLDEN = ROOT / "tests" / "golden"

# Thor (seed 000), k=3 at c=1: off 68.5 tok/s, k=3 129.0 tok/s, mean acceptance length 3.82 of 4
THOR_OFF, THOR_K3, THOR_LENGTH = 68.5, 129.0, 3.82


def test_thor_k3_breaks_even_at_2_03_tokens_per_step_and_34_percent() -> None:
    found = break_even(Interval(THOR_LENGTH, None, None), 3.0, math.log(THOR_K3 / THOR_OFF))
    assert found is not None
    assert found.step_cost.value == pytest.approx(THOR_LENGTH / THOR_K3 * THOR_OFF)
    assert round(found.step_cost.value, 2) == 2.03
    assert found.rate is not None and round(found.rate.value, 2) == 0.34
    assert found.margin == pytest.approx(THOR_LENGTH - found.step_cost.value) and found.pays
    assert found.step_cost.low is None and found.conservative_bound == found.step_cost.value


def test_the_step_cost_is_round_economics_cost_in_baseline_steps() -> None:
    econ = round_economics(THOR_OFF, THOR_K3, THOR_LENGTH, 3)
    found = break_even(Interval(THOR_LENGTH, None, None), 3.0, math.log(THOR_K3 / THOR_OFF))
    assert econ is not None and found is not None
    assert found.step_cost.value == pytest.approx(econ.cost_in_baseline_steps)
    assert found.pays == econ.pays


def test_the_interval_comes_from_the_comparisons_and_the_bound_is_its_upper_end() -> None:
    length = length_interval(Interval(0.9, 0.85, 0.95), 1.9, 1.0)
    assert (length.low, length.high) == pytest.approx((1.85, 1.95))
    found = break_even(length, 1.0, math.log(1.1), math.log(1.05), math.log(1.15))
    assert found is not None
    assert found.step_cost.low == pytest.approx(1.9 / 1.15) and found.step_cost.high == pytest.approx(
        1.9 / 1.05
    )
    assert found.conservative_bound == found.step_cost.high
    assert found.conservative_margin == pytest.approx(1.85 - 1.9 / 1.05)
    assert found.rate is not None and found.rate.high == pytest.approx(1.9 / 1.05 - 1.0)


def test_a_slower_arm_breaks_even_above_its_acceptance_and_a_step_above_k_plus_1_cannot_pay() -> None:
    found = break_even(Interval(1.7, None, None), 1.0, math.log(7.18 / 27.0))
    assert found is not None and not found.pays and found.margin < 0
    assert found.rate is not None and found.rate.value > 1.0  # no acceptance rate could pay


@pytest.mark.parametrize(
    ("length", "log_ratio"), [(math.nan, 0.1), (0.5, 0.1), (1.5, math.nan), (1.5, math.inf)]
)
def test_missing_inputs_give_no_break_even(length: float, log_ratio: float) -> None:
    assert break_even(Interval(length, None, None), 2.0, log_ratio) is None


def test_without_drafts_per_step_there_is_no_rate_and_the_bound_is_the_largest() -> None:
    a = break_even(Interval(2.0, None, None), None, 0.0, -0.2, 0.2)
    b = break_even(Interval(2.0, None, None), 0.0, 0.1)
    assert a is not None and b is not None and a.rate is None and b.rate is None
    assert conservative_bound([b, a]) is a and conservative_bound([]) is None


@given(
    length=st.floats(1.0, 9.0),
    estimate=st.floats(-2.0, 2.0),
    below=st.floats(0.0, 1.0),
    above=st.floats(0.0, 1.0),
    k=st.floats(0.5, 8.0),
)
def test_the_interval_contains_its_estimate(
    length: float, estimate: float, below: float, above: float, k: float
) -> None:
    found = break_even(Interval(length, None, None), k, estimate, estimate - below, estimate + above)
    assert found is not None and found.rate is not None
    assert found.step_cost.low is not None and found.step_cost.high is not None
    assert found.step_cost.low <= found.step_cost.value * (1 + 1e-12)
    assert found.step_cost.value <= found.step_cost.high * (1 + 1e-12)
    assert found.rate.value == pytest.approx((found.step_cost.value - 1.0) / k)
    assert found.conservative_margin <= found.margin + 1e-9


def _cell(golden: str, arm: str, workload: str, concurrency: int) -> dict[str, float]:
    decision = json.loads((GOLDEN / golden).read_text())
    found = next(a for a in decision["arms"] if a["name"] == arm)["break_even"]
    cell = next(c for c in found["cells"] if (c["workload"], c["concurrency"]) == (workload, concurrency))
    assert isinstance(cell, dict)
    return cell


def test_arc_mtp1_round_costs_6_39_baseline_steps_in_the_decision() -> None:
    """Seed 004's round_economics_at_4k: 236.4 ms / 37.0 ms = 6.39 (rounded inputs); the fixture's
    exact rates and the ctx4k cell's own acceptance give 6.382."""
    cell = _cell("arc-b70-qwen36@arc-b70.json", "dense_mtp1", "ctx4k", 1)
    assert cell["step_cost"] == pytest.approx(6.39, abs=0.01)
    assert cell["mean_acceptance_length"] == pytest.approx(1.6961, abs=1e-4)  # the cell's, not the pool's
    assert cell["margin"] < 0 and cell["break_even_rate"] > 1  # more than a round can return


def test_thor_k3_break_even_in_the_decision() -> None:
    cell = _cell("thor-qwen36-35b-a3b@default.json", "k3", "code", 1)
    assert cell["step_cost"] == pytest.approx(2.03, abs=0.03)
    assert cell["break_even_rate"] == pytest.approx(0.34, abs=0.01)
    assert cell["margin"] > 1.5


def test_absurd_inputs_give_no_break_even_or_no_interval_never_an_overflow() -> None:
    assert break_even(Interval(2.0, None, None), 2.0, -1000.0) is None  # exp(1000) overflows
    assert break_even(Interval(1e308, None, None), 2.0, -1.0) is None  # a finite product overflows to inf
    wide = break_even(Interval(2.0, None, None), 2.0, 0.1, -1000.0, 0.2)
    assert wide is not None and wide.step_cost.high is None and wide.step_cost.low is not None
    assert wide.rate is not None and wide.rate.high is None and math.isfinite(wide.conservative_bound)
