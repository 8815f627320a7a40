"""Streams dropped by arm: missingness per arm, boot and cell, comparisons it refuses, the server's clock."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtpverdict.decide import decide
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules import load_policy, parse_rules
from mtpverdict.sim import Scenario, SimArm, simulate_campaign
from mtpverdict.stats.missingness import MissingRow, fisher_exact, refusals
from mtpverdict.stats.runs import run_table

from ..conftest import ROOT

CONTROLS = frozenset({"off_A", "off_B"})


def _campaign(seed: int = 3) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scenario = Scenario(
        name="bursts",
        arms=(SimArm("off_A"), SimArm("k1", 1, 0.0), SimArm("off_B")),
        boots_per_arm=3,
        reps=3,
        concurrency=(4,),
        completion_tokens=64,
        request_sd=0.15,
        boot_sd=0.005,
        run_sd=0.002,
    )
    return simulate_campaign(scenario, np.random.default_rng(seed))


def _rate(rec: dict[str, Any]) -> float:
    return float((rec["completion_tokens"] - 1) / (rec["t_end"] - rec["t_first"]))


def _burst_the_slow_half(records: list[dict[str, Any]], arm: str) -> list[dict[str, Any]]:
    """Mark the slower half of each of the arm's runs as read in a burst: the survivors are the fast ones."""
    runs: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in records:
        if rec["kind"] == "request":
            rec.setdefault("chunks", 60)
            rec.setdefault("bunched_chunks", 2)
            if rec["arm"] == arm:
                runs.setdefault((rec["boot"], rec["workload"], rec["concurrency"], rec["rep"]), []).append(
                    rec
                )
    for members in runs.values():
        for rec in sorted(members, key=_rate)[: len(members) // 2]:
            rec["bunched_chunks"] = 58
    return records


def test_streams_set_aside_by_one_arm_refuse_its_comparison_and_are_recorded() -> None:
    campaign, records = _campaign()
    biased = _burst_the_slow_half(records, "k1")
    decision = decide(results_from_records(campaign, biased, label="bursts"), load_policy("default"))
    rows = {(m.arm, m.boot): m for m in decision.missingness}
    assert len(decision.missingness) == 9  # 3 arms x 3 boots x one cell
    assert {(m.streams, m.kept, m.burst, m.timing) for a, m in rows.items() if a[0] == "k1"} == {
        (8, 4, 4, "client")  # 2 counted runs of 4 streams (the cold one is not counted); the slow 2 of each
    }
    assert all(m.kept == m.streams for a, m in rows.items() if a[0] != "k1")
    (refusal,) = decision.refused
    assert (refusal.arm, refusal.workload, refusal.concurrency) == ("k1", "chat", 4)
    assert refusal.share == pytest.approx(0.5) and refusal.versus == 0.0
    assert "chosen by the arm" in refusal.reason
    # the refused cell is missing evidence for k1: no comparison, no promotion
    compared = [c for c in decision.comparisons if (c.arm, c.metric) == ("k1", "decode_tps")]
    assert compared == []  # the design's one cell, refused
    assert decision.decision != "promote"
    control = next(c for c in decision.controls if c.name == "missingness")
    assert control.status == "warn" and "k1 at chat c=4" in control.detail


def test_streams_set_aside_evenly_refuse_nothing() -> None:
    campaign, records = _campaign()
    for arm in ("off_A", "k1", "off_B"):
        records = _burst_the_slow_half(records, arm)
    decision = decide(results_from_records(campaign, records, label="even"), load_policy("default"))
    assert decision.refused == ()
    control = next(c for c in decision.controls if c.name == "missingness")
    assert control.status == "pass" and "36 of 72 completed streams set aside" in control.detail


def test_the_servers_timing_keeps_every_stream() -> None:
    campaign, records = _campaign()
    biased = _burst_the_slow_half(records, "k1")
    for rec in biased:
        if rec["kind"] == "request":
            rec["server_generation_ms"] = (rec["t_end"] - rec["t_first"]) * 1000.0
            rec["server_ttft_ms"] = (rec["t_first"] - rec["t_start"]) * 1000.0
            rec["server_queue_ms"] = 0.0
    decision = decide(results_from_records(campaign, biased, label="server"), load_policy("default"))
    assert decision.refused == ()
    assert {(m.kept, m.burst, m.timing) for m in decision.missingness} == {(8, 0, "server")}
    (control,) = [c for c in decision.controls if c.name == "missingness"]
    # the client's clock agrees with the server's on the 90 of 108 streams not read in a burst (cold runs too)
    assert "decode windows 1.000x the server's, median over the 90 of 108 streams" in control.detail


def test_one_stream_without_server_timing_falls_back_to_the_client_for_all() -> None:
    base = {"arm": "k1", "boot": 1, "workload": "w", "concurrency": 1, "warmup": False, "status": "ok"}
    reqs = pd.DataFrame(
        [
            {**base, "rep": 1, "stream": 0, "t_start": 0.0, "t_first": 0.1, "t_end": 1.1},
            {**base, "rep": 2, "stream": 0, "t_start": 2.0, "t_first": 2.1, "t_end": 3.1},
        ]
    ).assign(completion_tokens=101, server_generation_ms=[500.0, math.nan], server_ttft_ms=[50.0, math.nan])
    runs = run_table(reqs)
    assert list(runs["timing"]) == ["client", "client"]
    assert list(runs["decode_tps"]) == pytest.approx([100.0, 100.0])  # the client's window, not 500 ms
    reqs["server_generation_ms"] = [500.0, 250.0]
    reqs["server_ttft_ms"] = [50.0, 20.0]
    runs = run_table(reqs)
    assert list(runs["decode_tps"]) == pytest.approx([200.0, 400.0])
    assert list(runs["ttft_ms"]) == pytest.approx([50.0, 20.0])


def _row(arm: str, streams: int, kept: int, boot: int = 1) -> MissingRow:
    return MissingRow(arm, boot, "w", 1, streams, kept, streams - kept, "client")


def test_controls_that_differ_refuse_the_cell_for_every_arm() -> None:
    rows = [_row("off_A", 18, 16), _row("off_B", 18, 0), _row("k1", 18, 17)]
    found = refusals(rows, CONTROLS, 0.10, 0.05)
    assert {r.arm for r in found} == {"off_A", "off_B", "k1"}
    assert all("the controls set aside different shares" in r.reason for r in found)


def test_a_gap_within_the_bound_is_compared() -> None:
    rows = [_row("off_A", 20, 19), _row("off_B", 20, 20), _row("k1", 10, 9), _row("k1", 10, 10, boot=2)]
    assert refusals(rows, CONTROLS, 0.10, 0.05) == ()  # k1 5% against the controls' pooled 2.5%
    rows[2] = _row("k1", 10, 6)  # now 20% against 2.5%
    (found,) = refusals(rows, CONTROLS, 0.10, 0.05)
    assert found.arm == "k1"
    assert (found.share, found.versus) == pytest.approx((0.2, 0.025))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(0, 60).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)
def test_fishers_exact_test_agrees_with_scipys(one: tuple[int, int], other: tuple[int, int]) -> None:
    from scipy.stats import fisher_exact as scipy_fisher

    expected = (
        1.0
        if 0 in (one[1], other[1])
        else scipy_fisher([[one[0], one[1] - one[0]], [other[0], other[1] - other[0]]]).pvalue
    )
    assert fisher_exact(*one, *other) == pytest.approx(float(expected), rel=1e-9, abs=1e-12)


def test_shares_a_test_cannot_tell_apart_are_compared() -> None:
    # a loaded client read the controls' single-token streams in bursts: 7 of 36 and 12 of 36 set aside,
    # 14 points apart (beyond the 10% gap) but well within chance (Fisher p = 0.28): the cell is compared
    rows = [_row("off_A", 36, 29), _row("off_B", 36, 24), _row("k1", 36, 30)]
    assert refusals(rows, CONTROLS, 0.10, 0.05) == ()
    # a candidate that set aside nothing of 43 against the controls' 19 of 72 is told apart (p < 0.001)
    rows[2] = _row("k1", 43, 43)
    (found,) = refusals(rows, CONTROLS, 0.10, 0.05)
    assert found.arm == "k1" and found.p_value < 0.001
    assert "0 of 43 (0%) streams, the controls 19 of 72 (26%)" in found.reason


def test_the_drift_control_is_reported_when_the_controls_are_refused() -> None:
    campaign, records = _campaign()
    biased = _burst_the_slow_half(records, "off_B")  # the controls differ: no arm is compared anywhere
    decision = decide(results_from_records(campaign, biased, label="refused"), load_policy("default"))
    assert {r.arm for r in decision.refused} == {"off_A", "k1", "off_B"}
    (drift,) = [c for c in decision.controls if c.name == "drift"]
    assert drift.status != "untestable" and "control boots" in drift.detail
    assert decision.next_step is not None


def _interrupt_first_boot(records: list[dict[str, Any]], arm: str) -> list[dict[str, Any]]:
    for rec in records:
        if rec["kind"] == "boot" and rec["arm"] == arm and rec["boot"] == 1:
            rec["status"] = "interrupted"
    return records


def _policy_with(runs: str) -> Any:
    text = (ROOT / "rules" / "default.toml").read_text()
    return parse_rules(
        text.replace("[runs]", f"[runs]\n{runs}", 1) if "[runs]" in text else f"{text}\n[runs]\n{runs}\n",
        "p.toml",
    )


def test_an_interrupted_boots_runs_count_only_when_the_policy_says_so() -> None:
    campaign, records = _campaign()
    results = results_from_records(campaign, _interrupt_first_boot(records, "k1"), label="partial")
    boots = {(c.arm, c.metric): c.n_boots for c in decide(results, load_policy("default")).cells}
    assert boots[("k1", "decode_tps")] == 2 and boots[("off_A", "decode_tps")] == 3  # excluded by default
    excluded = decide(results, load_policy("default"))
    (control,) = [c for c in excluded.controls if c.name == "partial_boots"]
    assert control.status == "pass" and "k1 boot 1 (interrupted, 12 requests)" in control.detail
    assert control.detail in excluded.reasons
    included = decide(results, _policy_with('partial_boots = "include"'))
    assert {(c.arm, c.metric): c.n_boots for c in included.cells}[("k1", "decode_tps")] == 3
    (control,) = [c for c in included.controls if c.name == "partial_boots"]
    assert control.status == "warn" and "boots per cell may differ" in control.detail


def test_the_policy_may_compare_on_the_streams_kept_and_states_the_difference() -> None:
    campaign, records = _campaign()
    results = results_from_records(campaign, _burst_the_slow_half(records, "k1"), label="kept")
    decision = decide(results, _policy_with('set_aside = "compare_kept"'))
    assert decision.refused == ()
    assert any(c.arm == "k1" and c.metric == "decode_tps" for c in decision.comparisons)
    (control,) = [c for c in decision.controls if c.name == "missingness"]
    assert control.status == "warn" and "k1 at chat c=4: 50% set aside against 0%" in control.detail
    assert control.detail in decision.reasons
