"""The stats core against hand computations, the seeds' numbers and the libraries it stands beside."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind

from mtpverdict.stats import compare as cmp
from mtpverdict.stats.acceptance import arm_acceptance
from mtpverdict.stats.economics import RegimePoint, crossing, round_economics
from mtpverdict.stats.runs import boot_statistics, cell_summaries, run_table, values_table


def _req(
    rep: int, stream: int, t0: float, t1: float, t2: float, tokens: int, boot: int = 1, status: str = "ok"
) -> dict[str, object]:
    return {
        "arm": "a",
        "boot": boot,
        "workload": "w",
        "concurrency": 2,
        "rep": rep,
        "stream": stream,
        "warmup": False,
        "t_start": t0,
        "t_first": t1,
        "t_end": t2,
        "completion_tokens": tokens,
        "status": status,
    }


def test_run_table_uses_the_seed_definitions() -> None:
    requests = pd.DataFrame(
        [
            _req(1, 0, 10.0, 10.2, 11.2, 101),  # decode 100 tok/s, TTFT 200 ms
            _req(1, 1, 10.0, 10.4, 14.4, 201),  # decode 50 tok/s, TTFT 400 ms
            _req(2, 0, 20.0, 20.1, 21.1, 51),
            _req(2, 1, 20.0, 20.1, 21.1, 51),
        ]
    )
    runs = run_table(requests)
    first = runs[runs["rep"] == 1].iloc[0]
    assert first["decode_tps"] == pytest.approx(75.0)  # median of the two streams
    assert first["ttft_ms"] == pytest.approx(300.0)
    assert first["aggregate_tps"] == pytest.approx(302 / 4.4)  # tokens / wall clock of the whole run
    assert bool(first["cold"]) and not bool(runs[runs["rep"] == 2].iloc[0]["cold"])


def test_errors_are_counted_not_measured() -> None:
    requests = pd.DataFrame(
        [
            _req(1, 0, 0.0, 0.1, 1.1, 101),
            {**_req(1, 1, 0.0, math.nan, math.nan, 0, status="error")},
        ]
    )
    run = run_table(requests).iloc[0]
    assert run["n_errors"] == 1 and run["decode_tps"] == pytest.approx(100.0)


def test_summaries_become_runs_only_when_the_runs_are_known() -> None:
    summaries = pd.DataFrame(
        [
            {
                "arm": "a",
                "boot": None,
                "workload": "w",
                "concurrency": 1,
                "metric": "decode_tps",
                "n": 3,
                "median": 27.0,
                "min": 26.0,
                "max": 28.0,
            },
            {
                "arm": "b",
                "boot": None,
                "workload": "w",
                "concurrency": 1,
                "metric": "decode_tps",
                "n": 3,
                "median": 9.0,
                "min": None,
                "max": None,
            },
        ]
    )
    values = values_table(pd.DataFrame(), summaries)
    assert sorted(values[values["arm"] == "a"]["value"]) == [26.0, 27.0, 28.0]
    b = values[values["arm"] == "b"]
    assert list(b["value"]) == [9.0] and not b["runs_known"].any()
    cells = {c.arm: c for c in cell_summaries(values, include_cold=True)}
    assert cells["a"].median == 27.0 and cells["a"].runs_known and not cells["b"].runs_known
    assert set(boot_statistics(values, include_cold=True)["n_runs"]) == {3, 1}


def test_tost_matches_statsmodels_when_variance_comes_from_the_two_samples() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(0.01, 0.02, 6), rng.normal(0.0, 0.02, 5)
    variance = cmp.pooled_variance([("a", a), ("b", b)])
    mine = cmp.compare_boots(a, b, variance, alpha=0.05, family_size=1, equivalence_margin=0.03)
    margin = math.log1p(0.03)
    theirs = ttost_ind(a, b, -margin, margin, usevar="pooled")[0]
    assert mine.p_equivalent == pytest.approx(theirs, rel=1e-9)
    t = sps.ttest_ind(a, b, alternative="greater")
    assert mine.p_better == pytest.approx(t.pvalue, rel=1e-9)


@pytest.mark.slow
def test_holm_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    for _ in range(50):
        p = rng.uniform(0, 0.2, rng.integers(1, 6))
        assert np.allclose(cmp.holm(p), multipletests(p, method="holm")[1])


def test_outcomes_are_better_worse_equivalent_or_inconclusive() -> None:
    var = cmp.Variance(0.0004, 10, ("controls",))
    big = cmp.compare_boots([0.2, 0.21], [0.0, 0.01], var, alpha=0.05, family_size=1, equivalence_margin=0.03)
    low = cmp.compare_boots(
        [-0.2, -0.21], [0.0, 0.01], var, alpha=0.05, family_size=1, equivalence_margin=0.03
    )
    same = cmp.compare_boots([0.0] * 6, [0.0] * 6, var, alpha=0.05, family_size=1, equivalence_margin=0.03)
    noisy = cmp.compare_boots(
        [0.02], [0.0], cmp.Variance(0.01, 2, ("c",)), alpha=0.05, family_size=1, equivalence_margin=0.03
    )
    got = [c.outcome for c in cmp.classify([big, low, same, noisy], alpha=0.05)]
    assert got == [cmp.BETTER, cmp.WORSE, cmp.EQUIVALENT, cmp.INCONCLUSIVE]


def test_no_variance_means_no_interval_and_no_verdict() -> None:
    comp = cmp.compare_boots(
        [0.3], [0.0], cmp.Variance(math.nan, 0, ()), alpha=0.05, family_size=1, equivalence_margin=0.03
    )
    assert comp.method == cmp.NONE and math.isnan(comp.floor)
    assert cmp.classify([comp], alpha=0.05)[0].outcome == cmp.INCONCLUSIVE


def test_within_boot_and_assumed_floor_are_labelled() -> None:
    within = cmp.compare_within_boot(
        [0.1, 0.11, 0.12], [0.0, 0.01, 0.02], alpha=0.05, family_size=1, equivalence_margin=0.03
    )
    assert within.method == cmp.WITHIN_BOOT
    assumed = cmp.compare_assumed([0.0], [0.2], assumed_floor=0.05)
    assert assumed.method == cmp.ASSUMED_FLOOR and assumed.outcome == cmp.WORSE


def test_round_economics_reproduce_the_arc_dense_numbers() -> None:
    # seed 004: off 27.006 tok/s (37.0 ms step); MTP-1 7.177 tok/s at 1.7 tokens/round -> 236.4 ms, 6.39
    econ = round_economics(27.00599804897194, 7.17734366063463, 1.6961325966850829, 1)
    assert econ is not None
    assert econ.baseline_step_ms == pytest.approx(37.03, abs=0.01)
    assert econ.round_ms == pytest.approx(236.3, abs=0.2)
    assert econ.cost_in_baseline_steps == pytest.approx(6.38, abs=0.02)
    assert econ.exceeds_max_return and not econ.pays
    assert round_economics(10.0, 0.0, 1.5, 1) is None


def test_crossing_is_where_the_ratio_stays_below_one() -> None:
    pts = [
        RegimePoint("d", 80, 0.5, None, None, "worse"),
        RegimePoint("a", 4, 1.3, None, None, "better"),
        RegimePoint("b", 32, 0.9, None, None, "worse"),
        RegimePoint("c", 64, 0.6, None, None, "worse"),
    ]
    assert crossing(pts) == "b"
    assert crossing([RegimePoint("a", 4, 1.3, None, None, "better")]) is None


def test_acceptance_pools_counts_and_keeps_surfaces_apart() -> None:
    table = pd.DataFrame(
        [
            {
                "arm": "k",
                "source": "metrics",
                "scoped": "run",
                "status": "ok",
                "drafts": 10,
                "draft_tokens": 30,
                "accepted_tokens": 24,
                "accepted_per_position": (10, 8, 6),
                "per_position_rate": None,
                "acceptance_rate": None,
                "mean_acceptance_length": None,
            },
            {
                "arm": "k",
                "source": "metrics",
                "scoped": "run",
                "status": "ok",
                "drafts": 10,
                "draft_tokens": 30,
                "accepted_tokens": 18,
                "accepted_per_position": (9, 6, 3),
                "per_position_rate": None,
                "acceptance_rate": None,
                "mean_acceptance_length": None,
            },
            {
                "arm": "k",
                "source": "metrics",
                "scoped": "run",
                "status": "void",
                "drafts": None,
                "draft_tokens": None,
                "accepted_tokens": None,
                "accepted_per_position": None,
                "per_position_rate": None,
                "acceptance_rate": None,
                "mean_acceptance_length": None,
            },
            {
                "arm": "k",
                "source": "log",
                "scoped": "window",
                "status": "ok",
                "drafts": None,
                "draft_tokens": None,
                "accepted_tokens": None,
                "accepted_per_position": None,
                "per_position_rate": (0.9, 0.6, 0.4),
                "acceptance_rate": 0.633,
                "mean_acceptance_length": 2.9,
            },
        ]
    )
    table = table.assign(boot=1, workload=None, concurrency=None, rep=None)  # the loader's other columns
    acc = arm_acceptance(table, "k", 0.1)
    assert acc.primary is not None and acc.primary.source == "metrics"
    assert (acc.primary.draft_tokens, acc.primary.accepted_tokens, acc.primary.void_windows) == (60, 42, 1)
    assert acc.primary.mean_acceptance_length == pytest.approx(1 + 42 / 20)
    assert acc.per_position_rate == pytest.approx((19 / 20, 14 / 20, 9 / 20))
    assert acc.wasted_fraction == pytest.approx(18 / 60)
    assert [s.source for s in acc.surfaces] == ["metrics", "log"]


def test_a_stream_read_in_a_burst_is_not_a_decode_measurement() -> None:
    streamed = {**_req(1, 0, 0.0, 0.1, 1.1, 101), "chunks": 50, "bunched_chunks": 2}
    burst = {**_req(1, 1, 0.0, 0.9, 0.9005, 101), "chunks": 50, "bunched_chunks": 48}
    run = run_table(pd.DataFrame([streamed, burst])).iloc[0]
    assert run["decode_tps"] == pytest.approx(100.0) and run["ttft_ms"] == pytest.approx(100.0)
    assert run["n_burst"] == 1
    assert run["aggregate_tps"] == pytest.approx(202 / 1.1)  # the wall clock still counts every token


def test_a_boots_only_run_in_a_cell_is_not_counted_when_cold() -> None:
    """The policy leaves cold runs out; before, a boot whose only run in a cell was its cold run was
    counted there anyway (a cold boot compared with warm ones)."""
    import pandas as pd

    from mtpverdict.stats.runs import boot_statistics

    rows = [
        {"arm": "a", "boot": 1, "workload": "w", "concurrency": 1, "rep": 1, "value": 50.0, "cold": True},
        {"arm": "a", "boot": 1, "workload": "w", "concurrency": 4, "rep": 1, "value": 40.0, "cold": False},
        {"arm": "a", "boot": 2, "workload": "w", "concurrency": 1, "rep": 1, "value": 60.0, "cold": False},
    ]
    values = pd.DataFrame(
        [
            {
                **r,
                "metric": "decode_tps",
                "origin": "request",
                "runs_known": True,
                "n_requests": 1,
                "n_errors": 0,
            }
            for r in rows
        ]
    )
    warm = boot_statistics(values, include_cold=False)
    assert sorted(zip(warm["boot"], warm["concurrency"], strict=True)) == [(1, 4), (2, 1)]
    every = boot_statistics(values, include_cold=True)
    assert len(every) == 3
