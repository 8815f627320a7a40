"""Property tests of the maths and of the decision: invariants that must hold for any input."""

from __future__ import annotations

import copy
import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtpverdict.decide import decide
from mtpverdict.formats.decision import decision_json
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules import load_policy
from mtpverdict.sim import SCENARIOS, simulate_campaign
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.runs import cell_summaries

finite = st.floats(min_value=0.5, max_value=500.0, allow_nan=False)
logs = st.lists(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), min_size=1, max_size=8)


@given(st.lists(finite, min_size=1, max_size=12), st.booleans())
def test_a_cell_median_lies_within_min_and_max(values: list[float], include_cold: bool) -> None:
    import pandas as pd

    frame = pd.DataFrame(
        {
            "arm": "a",
            "boot": [1 + i % 2 for i in range(len(values))],
            "workload": "w",
            "concurrency": 1,
            "rep": range(1, len(values) + 1),
            "metric": "decode_tps",
            "value": values,
            "cold": [i == 0 for i in range(len(values))],
            "origin": "request",
            "runs_known": True,
            "n_requests": 1,
            "n_errors": 0,
        }
    )
    (cell,) = cell_summaries(frame, include_cold=include_cold)
    assert cell.minimum <= cell.median <= cell.maximum
    counted = values if include_cold or len(values) == 1 else values[1:]
    assert cell.median == float(np.median(counted)) and cell.n == len(counted)


@given(logs, logs, st.floats(min_value=1e-6, max_value=0.5), st.integers(min_value=1, max_value=30))
def test_an_interval_contains_its_estimate(a: list[float], b: list[float], s2: float, df: int) -> None:
    comp = cmp.compare_boots(
        a, b, cmp.Variance(s2, df, ("x",)), alpha=0.05, family_size=3, equivalence_margin=0.03
    )
    assert comp.ci_low <= comp.estimate <= comp.ci_high
    assert comp.floor >= 0


@given(st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=8))
def test_holm_never_lowers_a_p_value(p: list[float]) -> None:
    adjusted = cmp.holm(p)
    assert np.all(adjusted >= np.asarray(p) - 1e-15) and np.all(adjusted <= 1.0)


CAMPAIGN, RECORDS = simulate_campaign(SCENARIOS["clean-win"], np.random.default_rng(100))
POLICY = load_policy("default")
BASELINE = decision_json(decide(results_from_records(CAMPAIGN, RECORDS), POLICY))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_shuffling_records_never_changes_the_decision(rnd: random.Random) -> None:
    shuffled = list(RECORDS)
    rnd.shuffle(shuffled)
    got = decision_json(decide(results_from_records(CAMPAIGN, shuffled), POLICY))
    assert got == BASELINE


def _identical_arms(seed: int) -> tuple[dict[str, object], list[dict[str, object]]]:
    """A campaign whose candidates replay the control's own measurements: no arm can be faster."""
    campaign, records = simulate_campaign(SCENARIOS["null"], np.random.default_rng(seed))
    control = [r for r in records if r["arm"] == "off_A"]
    out = [r for r in records if r["arm"] in ("off_A", "off_B") or r["kind"] == "acceptance"]
    out += [
        {**copy.deepcopy(r), "arm": name}
        for name in ("k1", "k2", "k3")
        for r in control
        if r["kind"] in ("request", "coherence", "likelihood")
    ]
    boots = [r for r in records if r["kind"] == "boot" and r["arm"] in ("k1", "k2", "k3")]
    return campaign, out + boots


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10_000))
def test_identical_arms_never_promote(seed: int) -> None:
    campaign, records = _identical_arms(seed)
    for name in ("default", "strict-ci"):
        decision = decide(results_from_records(campaign, records), load_policy(name))
        assert decision.decision != "promote"
        assert json.loads(decision_json(decision))["decision"] != "promote"
