"""beats_target: the worst selected cell's median (or lower bound over runs) against an absolute target."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.beats_target import KIND, CellValue

from .conftest import assert_on_missing, candidate, cell, control, make_evidence, params, refused

K2 = candidate()
SHORT_C1 = (100.0, 110.0, 120.0)  # median 110
SHORT_C4 = (80.0, 90.0, 100.0)  # median 90


def evidence(alpha: float = 0.05) -> Evidence:
    return make_evidence(
        [control(), K2],
        alpha=alpha,
        cells=[
            cell("k2", SHORT_C1),
            cell("k2", SHORT_C4, concurrency=4),
            cell("k2", (500.0, 520.0), metric="aggregate_tps"),
            cell("off_A", (50.0, 60.0)),
        ],
    )


def one_sided_lower_bound(values: tuple[float, ...], confidence: float) -> float:
    """The geometric mean's one-sided t lower bound, by scipy's one-sample t-test."""
    test = sps.ttest_1samp(np.log(values), 0.0, alternative="greater")
    return float(np.exp(test.confidence_interval(confidence).low))


def test_the_worst_median_clears_the_target() -> None:
    finding = KIND.evaluate(evidence(), K2, params("beats_target", "target = 90"))
    assert finding.status is RuleStatus.PASS
    assert (finding.value, finding.threshold, finding.metric) == (90.0, 90.0, "decode_tps")
    assert finding.cells == (
        CellValue("short", 1, 110.0, "median of 3 runs"),
        CellValue("short", 4, 90.0, "median of 3 runs"),
    )
    assert finding.missing is None


def test_one_cell_below_the_target_fails() -> None:
    finding = KIND.evaluate(evidence(), K2, params("beats_target", "target = 90.5"))
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.FAIL, 90.0, 90.5)


def test_selectors_narrow_the_cells() -> None:
    only_c1 = KIND.evaluate(evidence(), K2, params("beats_target", "target = 100\nconcurrency = [1]"))
    assert (only_c1.status, only_c1.value) == (RuleStatus.PASS, 110.0)
    assert [(c.workload, c.concurrency) for c in only_c1.cells] == [("short", 1)]
    aggregate = KIND.evaluate(
        evidence(), K2, params("beats_target", 'target = 600\nmetric = "aggregate_tps"')
    )
    assert (aggregate.status, aggregate.value, aggregate.metric) == (RuleStatus.FAIL, 510.0, "aggregate_tps")


def test_no_cell_at_the_selectors_is_missing() -> None:
    finding = KIND.evaluate(evidence(), K2, params("beats_target", 'target = 90\nworkloads = ["long"]'))
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, 90.0)
    assert finding.missing == "no decode_tps measured at the rule's cells"
    assert finding.cells == ()


def test_the_floor_is_stated_not_judged() -> None:
    for target in (85, 95):
        with_floor = KIND.evaluate(evidence(), K2, params("beats_target", f"target = {target}\nfloor = 80"))
        without = KIND.evaluate(evidence(), K2, params("beats_target", f"target = {target}"))
        assert (with_floor.status, with_floor.value) == (without.status, without.value)
        assert (with_floor.floor, without.floor) == (80.0, None)


def test_lower_bound_is_the_one_sided_t_bound_of_the_geometric_mean() -> None:
    finding = KIND.evaluate(evidence(), K2, params("beats_target", 'target = 70\nstatistic = "lower_bound"'))
    c1, c4 = finding.cells
    assert c1.value == pytest.approx(one_sided_lower_bound(SHORT_C1, 0.95), rel=1e-12)
    assert c4.value == pytest.approx(one_sided_lower_bound(SHORT_C4, 0.95), rel=1e-12)
    assert c4.value < 90.0 < c1.value  # below the cell's median: the bound is conservative
    assert finding.value == c4.value and finding.status is RuleStatus.PASS
    strict = KIND.evaluate(evidence(), K2, params("beats_target", 'target = 75\nstatistic = "lower_bound"'))
    assert strict.status is RuleStatus.FAIL


def test_lower_bound_follows_the_policy_alpha() -> None:
    rule = params("beats_target", 'target = 70\nstatistic = "lower_bound"\nconcurrency = [4]')
    at_5 = KIND.evaluate(evidence(alpha=0.05), K2, rule).value
    at_10 = KIND.evaluate(evidence(alpha=0.10), K2, rule).value
    assert at_10 == pytest.approx(one_sided_lower_bound(SHORT_C4, 0.90), rel=1e-12)
    assert at_5 is not None and at_10 is not None and at_5 < at_10


@pytest.mark.parametrize(
    ("runs", "known"), [((100.0,), True), ((100.0, 110.0), False)], ids=["one run", "a summary's median"]
)
def test_lower_bound_without_runs_is_missing(runs: tuple[float, ...], known: bool) -> None:
    ev = make_evidence([control(), K2], cells=[cell("k2", runs, runs_known=known)])
    finding = KIND.evaluate(ev, K2, params("beats_target", 'target = 50\nstatistic = "lower_bound"'))
    assert (finding.status, finding.value, finding.threshold) == (RuleStatus.MISSING, None, 50.0)
    assert finding.missing == "too few runs at short c=1 for a lower bound"


def test_a_failing_cell_outranks_a_cell_too_short_for_a_bound() -> None:
    ev = make_evidence(
        [control(), K2],
        cells=[cell("k2", (50.0, 52.0, 54.0)), cell("k2", (100.0,), concurrency=4)],
    )
    finding = KIND.evaluate(ev, K2, params("beats_target", 'target = 90\nstatistic = "lower_bound"'))
    assert finding.status is RuleStatus.FAIL


def test_the_lower_bound_sentence_states_its_level() -> None:
    rule = params("beats_target", 'target = 70\nstatistic = "lower_bound"')
    finding = KIND.evaluate(evidence(alpha=0.10), K2, rule)
    assert finding.cells[0].what == "one-sided 90% lower bound over runs"


def test_control_arms_are_judged_too() -> None:
    assert KIND.reported_for_controls
    finding = KIND.evaluate(evidence(), control(), params("beats_target", "target = 50"))
    assert (finding.status, finding.value) == (RuleStatus.PASS, 55.0)


def test_on_missing_decides_what_no_cell_means() -> None:
    assert_on_missing(evidence(), K2, "beats_target", 'target = 90\nworkloads = ["long"]')


def test_contradictions_are_refused() -> None:
    assert refused(
        "beats_target", "target = 90\nfloor = 95", "rules[0].floor", "floor 95.0 exceeds target 90.0"
    )
    assert refused("beats_target", 'target = 9\nmetric = "ttft_ms"', "rules[0].metric", "lower-is-better")
    assert refused("beats_target", "floor = 9", "rules[0].target", "missing")
    assert refused("beats_target", 'target = 9\nstatistic = "mean"', "rules[0].statistic", "lower_bound")
    assert params("beats_target", "target = 90\nfloor = 90").floor == 90.0  # an equal floor is meant


def test_sentences() -> None:
    rule = params("beats_target", "target = 95\nfloor = 85")
    assert KIND.render(KIND.evaluate(evidence(), K2, rule), K2) == (
        "k2: 110.0 tok/s (median of 3 runs, short c=1) clears the 85.0 floor and clears the 95.0 target; "
        "90.0 tok/s (median of 3 runs, short c=4) clears the 85.0 floor and misses the 95.0 target"
    )
    one_run = make_evidence([control(), K2], cells=[cell("k2", (9.5,))])
    rule = params("beats_target", "target = 9")
    assert KIND.render(KIND.evaluate(one_run, K2, rule), K2) == (
        "k2: 9.5 tok/s (median of 1 run, short c=1) clears the 9 target"
    )
    missing = KIND.evaluate(evidence(), K2, params("beats_target", 'target = 1\nworkloads = ["long"]'))
    assert KIND.render(missing, K2) == "k2: no decode_tps measured at the rule's cells"
