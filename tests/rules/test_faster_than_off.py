"""faster_than_off: better than off at every selected cell (an intersection-union test), beyond min_effect."""

from __future__ import annotations

import pytest

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.faster_than_off import KIND
from mtpverdict.stats import compare as cmp

from .conftest import (
    assert_on_missing,
    candidate,
    cell,
    comparison,
    control,
    make_evidence,
    params,
    refused,
)

K2 = candidate()
CI = (1.0, 1.2)


def compared(*cells: tuple[int, cmp.Comparison], metric: str = "decode_tps") -> Evidence:
    """k2 measured at short c=N and compared with off there, one comparison per concurrency."""
    return make_evidence(
        [control(), K2],
        cells=[cell("k2", (100.0,), concurrency=c, metric=metric) for c, _ in cells],
        comparisons={("k2", "short", c, metric): comp for c, comp in cells},
    )


def test_better_everywhere_passes_with_the_worst_ratio() -> None:
    ev = compared((1, comparison(1.10, cmp.BETTER)), (4, comparison(1.06, cmp.BETTER)))
    finding = KIND.evaluate(ev, K2, params("faster_than_off"))
    assert finding.status is RuleStatus.PASS
    assert finding.value == pytest.approx(1.06) and finding.threshold == 1.0
    assert [(c.workload, c.concurrency, c.outcome) for c in finding.cells] == [
        ("short", 1, "better"),
        ("short", 4, "better"),
    ]


@pytest.mark.parametrize("outcome", [cmp.WORSE, cmp.EQUIVALENT])
def test_worse_or_equivalent_at_any_cell_fails(outcome: str) -> None:
    ev = compared((1, comparison(1.20, cmp.BETTER)), (4, comparison(1.01, outcome)))
    finding = KIND.evaluate(ev, K2, params("faster_than_off"))
    assert finding.status is RuleStatus.FAIL and finding.value == pytest.approx(1.01)


def test_an_unresolved_cell_leaves_the_rule_inconclusive() -> None:
    ev = compared((1, comparison(1.20, cmp.BETTER)), (4, comparison(1.04, cmp.INCONCLUSIVE)))
    assert KIND.evaluate(ev, K2, params("faster_than_off")).status is RuleStatus.INCONCLUSIVE


def test_a_failing_cell_outranks_an_unresolved_one() -> None:
    ev = compared((1, comparison(1.02, cmp.INCONCLUSIVE)), (4, comparison(0.9, cmp.WORSE)))
    assert KIND.evaluate(ev, K2, params("faster_than_off")).status is RuleStatus.FAIL


def test_min_effect_turns_a_smaller_gain_into_unresolved() -> None:
    ev = compared((1, comparison(1.08, cmp.BETTER)), (4, comparison(1.04, cmp.BETTER)))
    finding = KIND.evaluate(ev, K2, params("faster_than_off", "min_effect = 0.05"))
    assert finding.status is RuleStatus.INCONCLUSIVE
    assert finding.threshold == pytest.approx(1.05)
    assert [c.outcome for c in finding.cells] == ["better", "inconclusive"]
    assert KIND.evaluate(ev, K2, params("faster_than_off", "min_effect = 0.04")).status is RuleStatus.PASS


def test_selectors_and_metric() -> None:
    ev = compared((1, comparison(1.10, cmp.BETTER)), (4, comparison(0.95, cmp.WORSE)))
    finding = KIND.evaluate(ev, K2, params("faster_than_off", "concurrency = [1]"))
    assert finding.status is RuleStatus.PASS and finding.value == pytest.approx(1.10)
    agg = compared((2, comparison(1.30, cmp.BETTER)), metric="aggregate_tps")
    finding = KIND.evaluate(agg, K2, params("faster_than_off", 'metric = "aggregate_tps"'))
    assert (finding.status, finding.metric) == (RuleStatus.PASS, "aggregate_tps")


def test_a_cell_without_a_comparison_is_not_judged() -> None:
    ev = make_evidence(
        [control(), K2],
        cells=[cell("k2", (100.0,)), cell("k2", (90.0,), concurrency=4)],
        comparisons={("k2", "short", 1, "decode_tps"): comparison(1.1, cmp.BETTER)},
    )
    finding = KIND.evaluate(ev, K2, params("faster_than_off"))
    assert [(c.workload, c.concurrency) for c in finding.cells] == [("short", 1)]
    assert finding.status is RuleStatus.PASS


def test_no_comparison_is_missing() -> None:
    ev = make_evidence([control(), K2], cells=[cell("k2", (100.0,))])
    finding = KIND.evaluate(ev, K2, params("faster_than_off"))
    assert (finding.status, finding.value, finding.cells) == (RuleStatus.MISSING, None, ())
    assert_on_missing(ev, K2, "faster_than_off")


def test_a_missing_finding_states_the_same_bar() -> None:
    ev = make_evidence([control(), K2])
    finding = KIND.evaluate(ev, K2, params("faster_than_off", "min_effect = 0.05"))
    assert finding.threshold == pytest.approx(1.05)


def test_contradictions_are_refused() -> None:
    assert refused("faster_than_off", 'metric = "ttft_ms"', "rules[0].metric", "lower-is-better")
    assert refused("faster_than_off", "min_effect = -0.1", "rules[0].min_effect", ">= 0")


def test_sentences() -> None:
    ev = compared(
        (1, comparison(1.10, cmp.BETTER, ci=(1.05, 1.15), floor=0.03, df=4)),
        (4, comparison(1.02, cmp.INCONCLUSIVE, ci=(0.98, 1.06), method=cmp.WITHIN_BOOT, floor=0.05)),
    )
    assert KIND.render(KIND.evaluate(ev, K2, params("faster_than_off")), K2) == (
        "k2 vs off: short c=1 better: +10.0% decode_tps [90% CI +5.0%, +15.0%] (between boots, df 4; "
        "floor +3.0%); short c=4 inconclusive: +2.0% decode_tps [90% CI -2.0%, +6.0%] (within-boot; "
        "floor +5.0%)"
    )
    assumed = compared((1, comparison(1.08, cmp.BETTER, method=cmp.ASSUMED_FLOOR, floor=0.05)))
    assert KIND.render(KIND.evaluate(assumed, K2, params("faster_than_off")), K2) == (
        "k2 vs off: short c=1 better: +8.0% decode_tps (point estimate; floor assumed +5.0%)"
    )
    unknown = compared((1, comparison(1.08, cmp.INCONCLUSIVE, method=cmp.NONE)))
    assert KIND.render(KIND.evaluate(unknown, K2, params("faster_than_off")), K2) == (
        "k2 vs off: short c=1 inconclusive: +8.0% decode_tps (no interval: floor unknown)"
    )
    missing = KIND.evaluate(make_evidence([control(), K2]), K2, params("faster_than_off"))
    assert KIND.render(missing, K2) == "k2: no decode_tps comparison with its control"
