"""Latency percentiles: per-stream TTFT / ITL / E2E from the decode window, and the boot-level median."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from mtpverdict.stats.percentiles import (
    MIN_STREAMS,
    PercentileRatio,
    latency,
    percentile_ratio,
    stream_latencies,
)
from mtpverdict.stats.runs import run_table


def _request(
    rep: int, stream: int, t_start: float, t_first: float, t_end: float, tokens: int, **extra: object
) -> dict[str, object]:
    return {
        "arm": "a",
        "boot": 1,
        "workload": "w",
        "concurrency": 2,
        "rep": rep,
        "stream": stream,
        "warmup": False,
        "t_start": t_start,
        "t_first": t_first,
        "t_end": t_end,
        "prompt_tokens": 10,
        "completion_tokens": tokens,
        "status": "ok",
        **extra,
    }


def test_each_stream_gets_ttft_itl_and_e2e_from_its_decode_window() -> None:
    requests = pd.DataFrame(
        [
            _request(1, 0, 0.0, 0.1, 0.1 + 0.02 * 10, 11),  # 100 ms to the first token, 20 ms a token
            _request(1, 1, 0.0, 0.3, 0.3 + 0.05 * 4, 5),
            _request(2, 0, 1.0, 1.2, 1.2, 1),  # one token: no decode window, E2E = TTFT
            {**_request(2, 1, 1.0, 1.1, 1.5, 5), "status": "error"},
            {**_request(0, 0, 0.0, 0.1, 0.2, 5), "warmup": True},
        ]
    )
    streams = stream_latencies(requests, run_table(requests), include_cold=True)
    assert len(streams) == 4  # the warm-up is not measured
    assert streams["ttft_ms"].tolist()[:3] == pytest.approx([100.0, 300.0, 200.0])
    assert streams["itl_ms"].tolist()[:2] == pytest.approx([20.0, 50.0])
    assert math.isnan(streams["itl_ms"].iloc[2]) and streams["e2e_ms"].iloc[2] == pytest.approx(200.0)
    assert streams["e2e_ms"].tolist()[:2] == pytest.approx([300.0, 500.0])
    assert streams.iloc[3][["ttft_ms", "itl_ms", "e2e_ms"]].isna().all()  # a failed request has none
    assert set(streams["timing"]) == {"client"}


def test_the_cold_run_is_left_out_unless_counted() -> None:
    requests = pd.DataFrame([_request(1, 0, 0.0, 0.5, 0.6, 3), _request(2, 0, 1.0, 1.1, 1.2, 3)])
    runs = run_table(requests)
    assert stream_latencies(requests, runs, include_cold=False)["rep"].tolist() == [2]
    assert stream_latencies(requests, runs, include_cold=True)["rep"].tolist() == [1, 2]


def test_the_servers_clock_is_used_when_it_timed_every_stream() -> None:
    timing = {"server_ttft_ms": 40.0, "server_queue_ms": 10.0, "server_generation_ms": 100.0}
    requests = pd.DataFrame([_request(1, 0, 0.0, 0.5, 0.9, 11, **timing)])
    streams = stream_latencies(requests, pd.DataFrame(), include_cold=True)
    assert streams.iloc[0][["ttft_ms", "itl_ms", "e2e_ms"]].tolist() == pytest.approx([50.0, 10.0, 150.0])
    assert streams["timing"].tolist() == ["server"]


def test_percentiles_and_the_boot_interval_match_numpy_and_scipy() -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.lognormal(np.log(m), 0.1, 50) for m in (100, 110, 95)])
    boots = [b for b in (1, 2, 3) for _ in range(50)]
    found = latency(values.tolist(), boots, alpha=0.05)
    assert found is not None and (found.n, found.n_boots) == (150, 3)
    assert (found.p50, found.p90, found.p99) == pytest.approx(tuple(np.percentile(values, (50, 90, 99))))
    logs = np.log([np.median(values[i * 50 : (i + 1) * 50]) for i in range(3)])
    low, high = sps.t.interval(0.90, 2, loc=logs.mean(), scale=sps.sem(logs))
    assert (found.boot_median_low, found.boot_median_high) == pytest.approx((math.exp(low), math.exp(high)))
    assert found.boot_median == pytest.approx(math.exp(logs.mean()))


def test_one_boot_has_no_interval_and_nothing_finite_has_no_latency() -> None:
    one = latency([1.0, 2.0, 3.0], [1, 1, 1], alpha=0.05)
    assert one is not None and (one.boot_median_low, one.boot_median_high) == (None, None)
    assert latency([math.nan], [1], alpha=0.05) is None
    assert latency([], [], alpha=0.05) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.5, 5000.0, allow_nan=False), st.integers(1, 4)), min_size=1, max_size=40)
)
def test_percentiles_are_ordered_and_the_interval_holds_its_estimate(pairs: list[tuple[float, int]]) -> None:
    values, boots = zip(*pairs, strict=True)
    found = latency(list(values), list(boots), alpha=0.05)
    assert found is not None
    assert min(values) <= found.p50 <= found.p90 <= found.p99 <= max(values)
    if found.boot_median_low is not None and found.boot_median_high is not None:
        assert found.boot_median_low <= found.boot_median * (1 + 1e-9)
        assert found.boot_median <= found.boot_median_high * (1 + 1e-9)


def test_no_interval_is_stated_at_alpha_zero_or_where_it_overflows() -> None:
    """A campaign whose looks spent its alpha decides at alpha 0: the boot-level interval of the median is
    the whole line, stated as none (it raised OverflowError and collect --until-resolved exited 70)."""
    from mtpverdict.stats.percentiles import latency

    values = [10.0, 11.0, 30.0, 31.0]
    boots = ["a", "a", "b", "b"]
    spent = latency(values, boots, 0.0)
    assert spent is not None and (spent.boot_median_low, spent.boot_median_high) == (None, None)
    tiny = latency(values, boots, 1e-300)
    assert tiny is not None and (tiny.boot_median_low, tiny.boot_median_high) == (None, None)
    stated = latency(values, boots, 0.05)
    assert stated is not None and stated.boot_median_low is not None and stated.boot_median_high is not None


def _rates(true: float, q: int, reps: int, seed: int, limit: float = 1.25) -> tuple[float, float]:
    """How often a campaign's boot-level p`q` ratio is shown within the limit (pass) and beyond it
    (fail): the arm 4 boots, two controls 4 boots each, 20 streams a boot, TTFT lognormal (sigma 0.3)
    with a boot effect (sigma 0.05), the arm's every stream `true` times off's."""
    rng = np.random.default_rng(seed)
    passed = failed = 0
    for _ in range(reps):
        sides = []
        for boots, scale in ((4, true), (8, 1.0)):
            effect = rng.normal(0.0, 0.05, boots)
            values = [
                scale * math.exp(effect[b]) * x for b in range(boots) for x in rng.lognormal(4, 0.3, 20)
            ]
            found = latency(values, [b for b in range(boots) for _ in range(20)], 0.05)
            assert found is not None
            sides.append(found)
        ratio = percentile_ratio(sides[0], sides[1], q, 0.05)
        assert isinstance(ratio, PercentileRatio)
        passed += ratio.high <= limit
        failed += ratio.low > limit
    return passed / reps, failed / reps


@pytest.mark.parametrize("q", [50, 90])
def test_the_percentile_ratio_holds_its_error_rates(q: int) -> None:
    # a true regression beyond the limit is passed at most alpha of the time, ...
    assert _rates(1.30, q, 300, seed=11)[0] <= 0.05
    # ... at the limit itself either way about alpha (300 campaigns: 5% give or take 3 sd)
    at_limit = _rates(1.25, q, 300, seed=12)
    assert at_limit[0] <= 0.09 and at_limit[1] <= 0.09
    # and an arm equal to off is not rejected, and is mostly shown within the limit
    equal = _rates(1.0, q, 300, seed=13)
    assert equal[1] <= 0.05 and equal[0] >= 0.7


def test_the_percentile_ratio_needs_enough_streams_in_every_boot() -> None:
    assert MIN_STREAMS == {50: 2, 90: 10, 99: 100}
    few = latency([1.0, 2.0, 3.0] * 6, [b for b in range(6) for _ in range(3)], 0.05)
    one = latency([1.0] * 20, [0] * 20, 0.05)
    assert few is not None and one is not None
    assert percentile_ratio(few, few, 90, 0.05) == "a boot of the arm has 3 streams; p90 needs 10 per boot"
    assert percentile_ratio(few, one, 50, 0.05) == "the controls measured 1 boot(s); the interval needs 2"
    assert isinstance(percentile_ratio(few, few, 50, 0.05), PercentileRatio)


def test_the_percentile_ratio_at_alpha_zero_is_unbounded_not_an_error() -> None:
    """At alpha 0 (a campaign whose looks spent its alpha) the interval is the whole half-line: a rule
    reading it can neither pass nor fail the cell."""
    boots = [b for b in range(2) for _ in range(20)]
    arm = latency([10.0 + i % 7 + boots[i] for i in range(40)], boots, 0.05)
    off = latency([11.0 + i % 5 + 2 * boots[i] for i in range(40)], boots, 0.05)
    assert arm is not None and off is not None
    found = percentile_ratio(arm, off, 50, 0.0)
    assert isinstance(found, PercentileRatio) and found.low == 0.0 and found.high == math.inf
