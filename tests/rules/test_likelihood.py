"""likelihood: the median teacher-forced NLL delta to the control, within max_delta and k x its spread."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.likelihood import KIND

from .conftest import assert_on_missing, candidate, control, make_evidence, params, refusals

K2 = candidate()
# the arm's median 2.01; the controls' runs pooled: median 2.00, spread 2.005 - 1.995 = 0.01
RUNS = {"k2": (2.00, 2.02, 2.01), "off_A": (2.00, 2.005), "off_B": (1.995,)}


def evidence(runs: Mapping[str, tuple[float, ...]] = RUNS) -> Evidence:
    return make_evidence([control(), control("off_B"), K2], likelihood=runs)


def test_delta_within_max_delta_passes() -> None:
    finding = KIND.evaluate(evidence(), K2, params("likelihood", "max_delta = 0.02"))
    assert finding.status is RuleStatus.PASS
    assert finding.value == pytest.approx(0.01)
    assert finding.threshold == {"max_delta": 0.02, "max_delta_vs_spread": None}
    assert finding.spread == pytest.approx(0.01) and finding.control_runs == 3
    assert (finding.above_delta, finding.above_spread) == (False, False)


def test_delta_beyond_max_delta_fails() -> None:
    finding = KIND.evaluate(evidence(), K2, params("likelihood", "max_delta = 0.005"))
    assert (finding.status, finding.above_delta, finding.above_spread) == (RuleStatus.FAIL, True, False)


def test_a_lower_nll_counts_by_its_size() -> None:
    better = evidence({**RUNS, "k2": (1.97,)})  # delta -0.03
    finding = KIND.evaluate(better, K2, params("likelihood", "max_delta = 0.02"))
    assert finding.status is RuleStatus.FAIL and finding.value == pytest.approx(-0.03)


@pytest.mark.parametrize(("k", "status"), [(1.5, RuleStatus.PASS), (0.5, RuleStatus.FAIL)])
def test_delta_against_the_controls_spread(k: float, status: RuleStatus) -> None:
    finding = KIND.evaluate(evidence(), K2, params("likelihood", f"max_delta_vs_spread = {k}"))
    assert (finding.status, finding.above_spread) == (status, status is RuleStatus.FAIL)
    assert finding.threshold == {"max_delta": None, "max_delta_vs_spread": k}


def test_one_control_run_leaves_the_spread_bound_missing() -> None:
    one_run = evidence({"k2": (2.01,), "off_A": (2.00,)})
    finding = KIND.evaluate(one_run, K2, params("likelihood", "max_delta_vs_spread = 2"))
    assert (finding.status, finding.spread) == (RuleStatus.MISSING, None)
    assert finding.value == pytest.approx(0.01)
    assert finding.control_runs == 1


def test_with_one_control_run_a_known_failure_or_no_delta_still_settles() -> None:
    one_run = evidence({"k2": (2.01,), "off_A": (2.00,)})
    both = params("likelihood", "max_delta = 0.005\nmax_delta_vs_spread = 2")
    assert KIND.evaluate(one_run, K2, both).status is RuleStatus.FAIL
    same = evidence({"k2": (2.00,), "off_A": (2.00,)})
    assert KIND.evaluate(same, K2, params("likelihood", "max_delta_vs_spread = 2")).status is RuleStatus.PASS


def test_no_likelihood_on_either_side_is_missing() -> None:
    for runs in ({"k2": (2.0,)}, {"off_A": (2.0,)}, {}):
        finding = KIND.evaluate(evidence(runs), K2, params("likelihood", "max_delta = 0.01"))
        assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, None)
    assert_on_missing(evidence({}), K2, "likelihood", "max_delta = 0.01")


def test_contradictions_are_refused() -> None:
    assert refusals("likelihood", "") == [
        ("rules[0]", "sets no threshold; give max_delta or max_delta_vs_spread")
    ]
    assert refusals("likelihood", "max_delta = -0.1") == [("rules[0].max_delta", "must be >= 0, got -0.1")]


def test_sentences() -> None:
    rule = params("likelihood", "max_delta = 0.005\nmax_delta_vs_spread = 0.5")
    assert KIND.render(KIND.evaluate(evidence(), K2, rule), K2) == (
        "k2: mean NLL delta +0.01000 nats vs the control (control spread 0.01000 over 3 runs); |delta| "
        "above 0.005; |delta| above 0.5 x the control spread"
    )
    one_run = evidence({"k2": (2.01,), "off_A": (2.00,)})
    rule = params("likelihood", "max_delta = 0.02")
    assert KIND.render(KIND.evaluate(one_run, K2, rule), K2) == (
        "k2: mean NLL delta +0.01000 nats vs the control (control spread unknown: one run)"
    )
    missing = KIND.evaluate(evidence({}), K2, rule)
    assert KIND.render(missing, K2) == "k2: no teacher-forced likelihood for the arm and its control"
