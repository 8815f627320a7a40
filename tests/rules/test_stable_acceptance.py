"""stable_acceptance: the primary surface's acceptance against each threshold the rule gives."""

from __future__ import annotations

import dataclasses

import pytest

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.stable_acceptance import KIND, Check
from mtpverdict.stats.acceptance import Surface

from .conftest import (
    acceptance,
    assert_on_missing,
    candidate,
    control,
    make_evidence,
    params,
    refusals,
    refused,
    surface,
)

K2 = candidate()
PRIMARY = surface(0.6, 1000, ci=(0.55, 0.65), positions=(0.8, 0.6, 0.4))  # wasted 0.4, last 0.4


def evidence(primary: Surface | None = PRIMARY, *others: Surface) -> Evidence:
    return make_evidence([control(), K2], acceptance=[acceptance("k2", primary, *others)])


def judge(body: str, ev: Evidence | None = None) -> tuple[RuleStatus, dict[str, bool | None]]:
    finding = KIND.evaluate(evidence() if ev is None else ev, K2, params("stable_acceptance", body))
    return finding.status, {c.key: c.passed for c in finding.checks}


def test_every_threshold_met_passes_with_its_numbers() -> None:
    body = (
        "min_drafted_tokens = 500\nmin_rate = 0.5\nmin_lower_bound = 0.5\n"
        "min_last_position_rate = 0.3\nmax_wasted_fraction = 0.45"
    )
    finding = KIND.evaluate(evidence(), K2, params("stable_acceptance", body))
    assert (finding.status, finding.value) == (RuleStatus.PASS, 0.6)
    assert finding.threshold == {
        "min_drafted_tokens": 500,
        "min_rate": 0.5,
        "min_lower_bound": 0.5,
        "min_last_position_rate": 0.3,
        "max_wasted_fraction": 0.45,
    }
    assert finding.checks == (
        Check("min_drafted_tokens", 500.0, 1000.0, True),
        Check("min_rate", 0.5, 0.6, True),
        Check("min_lower_bound", 0.5, 0.55, True),
        Check("min_last_position_rate", 0.3, 0.4, True),
        Check("max_wasted_fraction", 0.45, 1.0 - 0.6, True),
    )
    assert finding.surface == PRIMARY and finding.per_position_rate == (0.8, 0.6, 0.4)


def test_only_the_thresholds_given_are_checked() -> None:
    finding = KIND.evaluate(evidence(), K2, params("stable_acceptance", "min_rate = 0.5"))
    assert finding.threshold == {"min_rate": 0.5}
    assert [c.key for c in finding.checks] == ["min_rate"]


@pytest.mark.parametrize(
    "body",
    [
        "min_rate = 0.61",
        "min_lower_bound = 0.66",
        "min_last_position_rate = 0.41",
        "max_wasted_fraction = 0.39",
    ],
)
def test_each_threshold_fails_just_beyond_the_number(body: str) -> None:
    status, checks = judge(body)
    assert status is RuleStatus.FAIL and list(checks.values()) == [False]


@pytest.mark.parametrize(
    "body",
    ["min_rate = 0.6", "min_lower_bound = 0.55", "min_last_position_rate = 0.4", "max_wasted_fraction = 0.4"],
)
def test_each_threshold_holds_at_the_number(body: str) -> None:
    assert judge(body)[0] is RuleStatus.PASS


def test_a_lower_bound_below_the_minimum_whose_interval_reaches_it_is_not_proven() -> None:
    """[0.55, 0.65] against 0.56: the sample is too small to prove the rate, not a rate shown below it."""
    status, checks = judge("min_lower_bound = 0.56")
    assert status is RuleStatus.MISSING and checks == {"min_lower_bound": None}
    assert judge("min_lower_bound = 0.651")[0] is RuleStatus.FAIL  # the whole interval below


def test_a_single_window_is_too_small_for_the_lower_bound_and_says_so() -> None:
    one = surface(0.6, 1000, ci=(0.55, 0.65), positions=(0.8, 0.6, 0.4))
    one = dataclasses.replace(one, too_small="one window: collect more windows")
    finding = KIND.evaluate(evidence(one), K2, params("stable_acceptance", "min_lower_bound = 0.3"))
    assert finding.status is RuleStatus.MISSING
    why = "one window: collect more windows"
    assert finding.checks == (Check("min_lower_bound", 0.3, None, None, "", why),)
    assert "not proven: too small a sample" in KIND.render(finding, K2)
    assert "90% CI" not in KIND.render(finding, K2)  # bounds of one window's rounds are not shown


def test_too_few_drafted_tokens_is_missing_evidence() -> None:
    status, checks = judge("min_drafted_tokens = 1001\nmin_rate = 0.5")
    assert status is RuleStatus.MISSING
    assert checks == {"min_drafted_tokens": None, "min_rate": True}
    assert judge("min_drafted_tokens = 1000")[0] is RuleStatus.PASS


def test_a_failed_rate_outranks_a_small_sample() -> None:
    # Current behaviour: a threshold that fails rejects even when the sample is below min_drafted_tokens.
    status, checks = judge("min_drafted_tokens = 5000\nmin_rate = 0.7")
    assert status is RuleStatus.FAIL and checks == {"min_drafted_tokens": None, "min_rate": False}


def test_a_number_not_recorded_is_missing() -> None:
    bare = evidence(surface(0.6, None))  # no interval, no sample size, no per-position rates
    status, checks = judge("min_lower_bound = 0.5\nmin_last_position_rate = 0.3\nmin_rate = 0.5", bare)
    assert status is RuleStatus.MISSING
    assert checks == {"min_rate": True, "min_lower_bound": None, "min_last_position_rate": None}
    assert judge("min_drafted_tokens = 1", bare)[0] is RuleStatus.MISSING


def test_the_last_position_rate_may_come_from_another_surface() -> None:
    other = surface(0.5, None, positions=(0.7, 0.2), source="log")
    ev = evidence(surface(0.6, 1000), other)
    assert judge("min_last_position_rate = 0.2", ev)[0] is RuleStatus.PASS
    assert judge("min_last_position_rate = 0.25", ev)[0] is RuleStatus.FAIL


def test_no_acceptance_is_missing() -> None:
    for ev in (make_evidence([control(), K2]), evidence(None)):
        finding = KIND.evaluate(ev, K2, params("stable_acceptance", "min_rate = 0.5"))
        assert (finding.status, finding.value, finding.threshold, finding.checks) == (
            RuleStatus.MISSING,
            None,
            None,
            (),
        )
    assert_on_missing(evidence(None), K2, "stable_acceptance", "min_rate = 0.5")


def test_contradictions_are_refused() -> None:
    assert refusals("stable_acceptance", "") == [
        (
            "rules[0]",
            "sets no threshold; give at least one of min_drafted_tokens, min_rate, min_lower_bound, "
            "min_last_position_rate, max_wasted_fraction",
        )
    ]
    body = "min_rate = 0.9\nmax_wasted_fraction = 0.2"
    assert refused("stable_acceptance", body, "rules[0].max_wasted_fraction", "they contradict")
    assert params("stable_acceptance", "min_rate = 0.8\nmax_wasted_fraction = 0.2").min_rate == 0.8
    assert refused("stable_acceptance", "min_rate = 1.2", "rules[0].min_rate", "fraction")


def test_sentences() -> None:
    rule = params("stable_acceptance", "min_rate = 0.7\nmin_drafted_tokens = 5000")
    assert KIND.render(KIND.evaluate(evidence(), K2, rule), K2) == (
        "k2: acceptance 60.0% [90% CI 55.0%, 65.0%] on 1000 drafted tokens (metrics); per position "
        "0.800, 0.600, 0.400; acceptance rate 0.600 against the minimum 0.7; drafted tokens 1000 against "
        "the minimum 5000"
    )
    rule = params("stable_acceptance", "min_lower_bound = 0.5")
    bare = evidence(surface(0.6, None))
    assert KIND.render(KIND.evaluate(bare, K2, rule), K2) == (
        "k2: acceptance 60.0% sample size not recorded (metrics); acceptance lower bound not recorded"
    )
    assert KIND.render(KIND.evaluate(evidence(None), K2, rule), K2) == "k2: no acceptance recorded"
