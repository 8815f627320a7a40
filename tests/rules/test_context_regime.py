"""context_regime: not worse than off at the listed context depths; the ratio profile and its crossing."""

from __future__ import annotations

import math

import pytest

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.context_regime import KIND
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.procedure import VarianceMethod

from .conftest import (
    assert_on_missing,
    candidate,
    comparison,
    control,
    make_evidence,
    params,
    refused,
    workload,
)

K2 = candidate()
DEPTHS = (workload("long", 16000), workload("short", 100), workload("mid", 4000))  # not in depth order


def evidence(*points: tuple[str, float, str], concurrency: int = 1, metric: str = "decode_tps") -> Evidence:
    """k2 against off at (workload, ratio, outcome) points."""
    return make_evidence(
        [control(), K2],
        workloads=DEPTHS,
        comparisons={
            ("k2", wl, concurrency, metric): comparison(ratio, outcome, ci=(ratio * 0.95, ratio * 1.05))
            for wl, ratio, outcome in points
        },
    )


def test_better_or_equivalent_at_every_listed_depth_passes() -> None:
    ev = evidence(("mid", 1.01, cmp.EQUIVALENT), ("long", 1.2, cmp.BETTER))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["mid", "long"]'))
    assert finding.status is RuleStatus.PASS
    assert finding.value == pytest.approx(1.01) and finding.threshold == ("mid", "long")
    assert (finding.losing, finding.crossing, finding.metric) == ((), None, "decode_tps")


def test_worse_at_a_listed_depth_fails_naming_it() -> None:
    ev = evidence(("mid", 1.1, cmp.BETTER), ("long", 0.9, cmp.WORSE))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["mid", "long"]'))
    assert (finding.status, finding.losing) == (RuleStatus.FAIL, ("long",))
    assert finding.value == pytest.approx(0.9)


def test_an_unresolved_listed_depth_is_inconclusive() -> None:
    ev = evidence(("mid", 1.1, cmp.BETTER), ("long", 0.97, cmp.INCONCLUSIVE))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["mid", "long"]'))
    assert finding.status is RuleStatus.INCONCLUSIVE and finding.value == pytest.approx(0.97)


def test_an_unresolved_depth_shown_not_worse_beyond_the_margin_passes() -> None:
    # not told apart from off at Holm's level, but its interval lies above -margin: "does not lose" holds
    # (non-inferiority, one-sided at alpha per depth; every depth must hold, so no multiplicity correction)
    ev = evidence(("mid", 1.1, cmp.BETTER), ("long", 1.2, cmp.INCONCLUSIVE))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["mid", "long"]'))
    assert finding.status is RuleStatus.PASS
    assert [p.outcome for p in finding.profile] == ["better", "not_worse"]
    assert "long 1.200x (not_worse)" in KIND.render(finding, K2)


def test_an_interval_reaching_below_the_margin_is_not_not_worse() -> None:
    # ci (0.95, 1.05): the low end lies below 1/1.03, a loss beyond the margin is not excluded
    ev = evidence(("mid", 1.1, cmp.BETTER), ("long", 1.0, "below_min_effect"))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["mid", "long"]'))
    assert finding.status is RuleStatus.INCONCLUSIVE
    assert finding.profile[1].outcome == "below_min_effect"


def test_unlisted_depths_are_profiled_not_judged() -> None:
    ev = evidence(("short", 0.9, cmp.WORSE), ("mid", 1.1, cmp.BETTER), ("long", 1.2, cmp.BETTER))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]'))
    assert (finding.status, finding.losing) == (RuleStatus.PASS, ())
    assert finding.value == pytest.approx(1.2)
    assert [p.workload for p in finding.profile] == ["short", "mid", "long"]  # by prompt tokens
    short = finding.profile[0]
    assert (short.prompt_tokens, short.outcome) == (100, cmp.WORSE)
    assert [short.ratio, short.ci_low, short.ci_high] == pytest.approx([0.9, 0.855, 0.945])


@pytest.mark.parametrize(
    ("ratios", "crossing"),
    [
        ((1.1, 0.95, 0.9), "mid"),
        ((0.9, 1.1, 0.95), "long"),
        ((0.9, 0.95, 0.97), "short"),
        ((1.1, 0.9, 1.0), None),
    ],
)
def test_the_crossing_is_where_the_ratio_stays_below_one(
    ratios: tuple[float, float, float], crossing: str | None
) -> None:
    short, mid, long = ratios
    ev = evidence(
        ("short", short, cmp.INCONCLUSIVE), ("mid", mid, cmp.INCONCLUSIVE), ("long", long, cmp.INCONCLUSIVE)
    )
    assert KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]')).crossing == crossing


def test_concurrency_narrows_the_comparisons() -> None:
    ev = make_evidence(
        [control(), K2],
        workloads=DEPTHS,
        comparisons={
            ("k2", "long", 1, "decode_tps"): comparison(1.2, cmp.BETTER),
            ("k2", "long", 4, "decode_tps"): comparison(0.8, cmp.WORSE),
        },
    )
    one = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]\nconcurrency = [1]'))
    four = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]\nconcurrency = [4]'))
    assert (one.status, four.status) == (RuleStatus.PASS, RuleStatus.FAIL)


def test_the_metric_selects_the_comparisons() -> None:
    ev = evidence(("long", 0.9, cmp.WORSE), metric="aggregate_tps")
    rule = params("context_regime", 'workloads = ["long"]\nmetric = "aggregate_tps"')
    assert KIND.evaluate(ev, K2, rule).status is RuleStatus.FAIL
    assert (
        KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]')).status is RuleStatus.MISSING
    )


def test_a_comparison_without_an_interval_has_no_bounds() -> None:
    ev = make_evidence(
        [control(), K2],
        workloads=DEPTHS,
        comparisons={
            ("k2", "long", 1, "decode_tps"): comparison(
                1.05, cmp.INCONCLUSIVE, variance=VarianceMethod.UNKNOWN
            )
        },
    )
    (point,) = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]')).profile
    assert (point.ci_low, point.ci_high, math.isclose(point.ratio, 1.05)) == (None, None, True)


def test_no_comparison_at_the_listed_depths_is_missing() -> None:
    ev = evidence(("short", 1.1, cmp.BETTER))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]'))
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, ("long",))
    assert [p.workload for p in finding.profile] == ["short"]
    assert_on_missing(ev, K2, "context_regime", 'workloads = ["long"]')


def test_a_listed_depth_without_a_comparison_does_not_pass() -> None:
    ev = evidence(("mid", 1.2, cmp.BETTER))
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["mid", "long"]'))
    assert finding.status is not RuleStatus.PASS


def test_losing_names_each_workload_once() -> None:
    ev = make_evidence(
        [control(), K2],
        workloads=DEPTHS,
        comparisons={
            ("k2", "long", 1, "decode_tps"): comparison(0.9, cmp.WORSE),
            ("k2", "long", 4, "decode_tps"): comparison(0.8, cmp.WORSE),
        },
    )
    finding = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]'))
    assert finding.losing == ("long",)


def test_contradictions_are_refused() -> None:
    body = 'workloads = ["long"]\nmetric = "ttft_ms"'
    assert refused("context_regime", body, "rules[0].metric", "ttft_ms is lower-is-better; use a ttft rule")
    assert refused("context_regime", "", "rules[0].workloads", "missing")


def test_sentences() -> None:
    ev = evidence(("short", 1.1, cmp.BETTER), ("mid", 0.95, cmp.INCONCLUSIVE), ("long", 0.9, cmp.WORSE))
    assert KIND.render(KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]')), K2) == (
        "k2: ratio to off by depth: short 1.100x (better), mid 0.950x (inconclusive), long 0.900x (worse); "
        "loses from mid onward; loses at long"
    )
    ev = evidence(("long", 1.2, cmp.BETTER))
    assert KIND.render(KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["long"]')), K2) == (
        "k2: ratio to off by depth: long 1.200x (better)"
    )
    missing = KIND.evaluate(ev, K2, params("context_regime", 'workloads = ["mid", "x"]'))
    assert KIND.render(missing, K2) == "k2: no decode_tps comparison at mid, x"
