"""ttft: the worst cell's time-to-first-token ratio to off, at most 1 + max_regression."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mtpverdict.evidence.latency import Latencies
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.ttft import KIND
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.percentiles import Latency, latency

from .conftest import assert_on_missing, candidate, cell, comparison, control, make_evidence, params, refused

K2 = candidate()
TTFT = "ttft_ms"


def evidence(*ratios: tuple[int, float], outcome: str = cmp.INCONCLUSIVE) -> Evidence:
    """k2's TTFT against off at short c=N, one ratio per concurrency."""
    return make_evidence(
        [control(), K2],
        cells=[cell("k2", (120.0,), concurrency=c, metric=TTFT) for c, _ in ratios],
        comparisons={("k2", "short", c, TTFT): comparison(r, outcome) for c, r in ratios},
    )


def test_the_worst_ratio_within_the_limit_passes() -> None:
    finding = KIND.evaluate(evidence((1, 1.05), (4, 1.20)), K2, params("ttft", "max_regression = 0.25"))
    assert finding.status is RuleStatus.PASS
    assert finding.value == pytest.approx(1.20) and finding.threshold == 1.25
    assert [(w, c) for w, c, _ in finding.ratios] == [("short", 1), ("short", 4)]


def test_beyond_the_limit_fails() -> None:
    finding = KIND.evaluate(evidence((1, 1.05), (4, 1.20)), K2, params("ttft", "max_regression = 0.1"))
    assert finding.status is RuleStatus.FAIL and finding.value == pytest.approx(1.20)
    assert finding.threshold == pytest.approx(1.1)
    strict = KIND.evaluate(evidence((1, 1.01)), K2, params("ttft", "max_regression = 0"))
    assert (strict.status, strict.threshold) == (RuleStatus.FAIL, 1.0)


def test_a_faster_first_token_passes() -> None:
    finding = KIND.evaluate(evidence((1, 0.8)), K2, params("ttft", "max_regression = 0"))
    assert finding.status is RuleStatus.PASS and finding.value == pytest.approx(0.8)


def test_the_point_ratio_is_judged_not_the_comparisons_outcome() -> None:
    worse_but_small = evidence((1, 1.04), outcome=cmp.WORSE)
    assert (
        KIND.evaluate(worse_but_small, K2, params("ttft", "max_regression = 0.05")).status is RuleStatus.PASS
    )


def test_selectors_narrow_the_cells() -> None:
    finding = KIND.evaluate(
        evidence((1, 1.05), (4, 1.20)), K2, params("ttft", "max_regression = 0.1\nconcurrency = [1]")
    )
    assert finding.status is RuleStatus.PASS and finding.value == pytest.approx(1.05)
    rule = params("ttft", 'max_regression = 0.1\nworkloads = ["long"]')
    assert KIND.evaluate(evidence((1, 1.05)), K2, rule).status is RuleStatus.MISSING


def test_no_ttft_comparison_is_missing() -> None:
    measured_only = make_evidence([control(), K2], cells=[cell("k2", (120.0,), metric=TTFT)])
    finding = KIND.evaluate(measured_only, K2, params("ttft", "max_regression = 0.2"))
    assert (finding.status, finding.value, finding.threshold, finding.ratios) == (
        RuleStatus.MISSING,
        None,
        1.2,
        (),
    )
    assert_on_missing(measured_only, K2, "ttft", "max_regression = 0.2")


def test_max_regression_is_required_and_not_negative() -> None:
    assert refused("ttft", "", "rules[0].max_regression", "missing")
    assert refused("ttft", "max_regression = -0.1", "rules[0].max_regression", ">= 0")
    assert refused("ttft", 'max_regression = 0.1\nmetric = "decode_tps"', "rules[0].metric", "unknown key")


def test_sentences() -> None:
    ev = evidence((1, 1.05), (4, 1.20))
    assert KIND.render(KIND.evaluate(ev, K2, params("ttft", "max_regression = 0.1")), K2) == (
        "k2: TTFT ratio to off (geometric mean of boot medians): short c=1 1.05x, short c=4 1.20x; above the "
        "1.10x limit"
    )
    assert KIND.render(KIND.evaluate(ev, K2, params("ttft", "max_regression = 0.3")), K2) == (
        "k2: TTFT ratio to off (geometric mean of boot medians): short c=1 1.05x, short c=4 1.20x"
    )
    missing = KIND.evaluate(make_evidence([control(), K2]), K2, params("ttft", "max_regression = 0.3"))
    assert KIND.render(missing, K2) == "k2: no TTFT comparison with its control"


def _latency(p90: float, boots: int = 4, streams: int = 20) -> Latency:
    """TTFT streams whose p90 is near p90 ms in each boot (boots a few percent apart)."""
    base = np.linspace(0.5, 1.1, streams)  # p90 of these: about 1.04
    values = [p90 / 1.04 * (1.0 + 0.02 * b) * x for b in range(boots) for x in base]
    found = latency(values, [b for b in range(boots) for _ in base], 0.05)
    assert found is not None
    return found


def with_latency(
    ev: Evidence, arm: dict[int, float], off: dict[int, float], boots: int = 4, streams: int = 20
) -> Evidence:
    """k2's and the default family's controls' TTFT p90 at short c=N."""
    return dataclasses.replace(
        ev,
        latency=Latencies(
            {("k2", "short", c, TTFT): _latency(v, boots, streams) for c, v in arm.items()},
            {("default", "short", c, TTFT): _latency(v, boots, streams) for c, v in off.items()},
            "client",
        ),
    )


def test_a_percentile_bounds_the_tail_the_median_hides() -> None:
    ev = with_latency(evidence((1, 1.0), (4, 1.0)), {1: 210.0, 4: 500.0}, {1: 200.0, 4: 250.0})
    median = KIND.evaluate(ev, K2, params("ttft", "max_regression = 0.25"))
    assert median.status is RuleStatus.PASS
    tail = KIND.evaluate(ev, K2, params("ttft", "max_regression = 0.25\npercentile = 90"))
    assert tail.status is RuleStatus.FAIL and tail.percentile == 90
    assert [(w, c) for w, c, _ in tail.ratios] == [("short", 1), ("short", 4)]
    assert [r for _, _, r in tail.ratios] == pytest.approx([1.05, 2.0])
    (_, _, low1, high1), (_, _, low4, _) = tail.bounds
    assert low1 < 1.05 < high1 < 1.25 < low4
    assert KIND.render(tail, K2).startswith(
        "k2: TTFT p90 ratio to off (boots' p90, one-sided bounds): short c=1 1.05x ["
    )
    assert KIND.render(tail, K2).endswith("; above the 1.25x limit")
    narrowed = KIND.evaluate(
        ev, K2, params("ttft", "max_regression = 0.25\npercentile = 90\nconcurrency = [1]")
    )
    assert narrowed.status is RuleStatus.PASS and narrowed.value == pytest.approx(1.05)


def test_a_percentile_within_reach_of_the_limit_is_inconclusive() -> None:
    # the boots' p90 ratio is 1.20 but the boots spread too much to show it below 1.25
    ev = with_latency(evidence((1, 1.0)), {1: 240.0}, {1: 200.0}, boots=2)
    finding = KIND.evaluate(ev, K2, params("ttft", "max_regression = 0.25\npercentile = 90"))
    assert finding.status is RuleStatus.INCONCLUSIVE and finding.value == pytest.approx(1.2)
    assert finding.bounds[0][3] > 1.25
    assert KIND.render(finding, K2).endswith("; not shown within the 1.25x limit")


def test_a_boot_too_small_for_the_percentile_is_not_judged() -> None:
    # 20 streams per boot hold a p90 but not a p99 (100 per boot)
    ev = with_latency(evidence((1, 1.0)), {1: 200.0}, {1: 200.0})
    finding = KIND.evaluate(ev, K2, params("ttft", "max_regression = 0.25\npercentile = 99"))
    assert finding.status is RuleStatus.INCONCLUSIVE and finding.ratios == ()
    assert finding.unjudged == (("short", 1, "a boot of the arm has 20 streams; p99 needs 100 per boot"),)
    assert "short c=1 not judged (a boot of the arm has 20 streams" in KIND.render(finding, K2)


def test_a_percentile_without_the_controls_streams_is_missing() -> None:
    ev = with_latency(evidence((1, 1.0)), {1: 210.0}, {})
    finding = KIND.evaluate(ev, K2, params("ttft", "max_regression = 0.25\npercentile = 99"))
    assert finding.status is RuleStatus.MISSING
    assert KIND.render(finding, K2) == "k2: no TTFT p99 with its control"


def test_the_percentile_is_one_the_decision_reports() -> None:
    assert refused("ttft", "max_regression = 0.1\npercentile = 95", "rules[0].percentile", "")
