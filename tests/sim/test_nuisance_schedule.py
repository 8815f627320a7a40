"""The nuisance matrix's schedule rule is the engine's: campaigns decided by `decide` in schedule mode on
records written from the same boots give, campaign by campaign, the depths the vectorised rule gives."""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtpverdict.decide import decide
from mtpverdict.formats.decision import Decision, DecisionKind
from mtpverdict.formats.policy import SCHEDULE_MIN_MARGIN
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules.registry import parse_rules
from mtpverdict.sim import BootBatch, BootScenario, Scenario, SimArm, simulate_boots, simulate_campaign

from ..conftest import ROOT

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import nuisance_calibration as nc  # noqa: E402
import procedure_calibration as pc  # noqa: E402

CONCURRENCY = tuple(c for _, c in nc.SCHEDULE_CELLS)
FASTER = 'kind = "faster_than_off"\nseverity = "veto"\nmetric = "decode_tps"\n'
BOOTS = 3
SKELETON = Scenario(  # the records' layout: boot order, runs, acceptance, quality probes
    name="schedule-rule",
    arms=(SimArm("off_A"), SimArm("k1", 1), SimArm("k2", 2), SimArm("k3", 3), SimArm("off_B")),
    boots_per_arm=BOOTS,
    reps=2,
    concurrency=CONCURRENCY,
    completion_tokens=128,
)


def _gains(at_1: float, at_8: float) -> tuple[float, ...]:
    """True log effects at c = 1, 2, 4, 8, log-linear in doublings from `at_1` to `at_8`."""
    a, b = math.log1p(at_1), math.log1p(at_8)
    return tuple(a + (b - a) * math.log2(c) / 3 for c in CONCURRENCY)


RANKED = {"k1": _gains(0.12, -0.03), "k2": _gains(0.30, -0.15), "k3": _gains(0.25, -0.30)}
FLAT = {"k2": _gains(0.30, 0.30)}
NEAR = {"k1": _gains(0.08, 0.08), "k2": _gains(0.10, 0.10), "k3": _gains(0.12, 0.12)}
# (truth, nuisance, campaigns): crossovers (depths chosen per concurrency, the deeper-than-smallest
# step), depths better everywhere (the fixed default and the depths around it), drift and duplicates
# (the controls blocking), candidates' slow runs lost
CASES: tuple[tuple[dict[str, tuple[float, ...]], str, int], ...] = (
    (RANKED, "none", 8),
    (NEAR, "none", 6),
    (FLAT, "none", 4),
    (RANKED, "linear drift 5%", 5),
    (FLAT, "duplicated off_B", 3),
    (RANKED, "missing not at random", 6),
)


def _policy() -> Any:
    text = (ROOT / "rules" / "default.toml").read_text().replace('mode = "fastest"', 'mode = "schedule"')
    return parse_rules(text, "default-schedule.toml")


def _batch(truth: dict[str, tuple[float, ...]], nuisance: str, campaigns: int, seed: int) -> BootBatch:
    sc = BootScenario("schedule-rule", pc.sweep(truth), cells=nc.SCHEDULE_CELLS, boots=BOOTS)
    settings: dict[str, Any] = dict(nc.NUISANCES.get(nuisance, {}))
    batch = simulate_boots(replace(sc, **settings), np.random.default_rng(seed), campaigns)
    return nc._duplicate(batch, BOOTS) if nuisance == "duplicated off_B" else batch


def _boot_value(batch: BootBatch, i: int, arm: str, boot: int, cell: int) -> float:
    """Campaign i's log statistic of one boot at one cell, as the batch holds it (NaN: not measured)."""
    if arm in batch.candidates:
        return float(batch.arm[i, batch.candidates.index(arm), cell, boot - 1])
    offset = 0 if arm == "off_A" else BOOTS
    return float(batch.control[i, cell, offset + boot - 1])


def _records(batch: BootBatch, i: int, duplicated: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Campaign i as records: the simulator's layout, every stream of a counted run decoding at
    off's rate there times exp(the boot's statistic), so each boot's statistic is the batch's; a
    run whose boot is not measured there is left out; off_B's requests copied from off_A's when
    duplicated."""
    campaign, records = simulate_campaign(SKELETON, np.random.default_rng([5, i]))
    out: list[dict[str, Any]] = []
    start_at, ended, last = 0.0, 0.0, None
    for rec in records:
        if rec["kind"] not in ("request", "acceptance"):
            out.append(rec)
            continue
        conc = rec["concurrency"]
        value = _boot_value(batch, i, rec["arm"], rec["boot"], CONCURRENCY.index(conc))
        if math.isnan(value):
            continue
        if rec["kind"] == "acceptance":
            out.append(rec)
            continue
        run = (rec["arm"], rec["boot"], conc, rec["rep"])
        if run != last:  # a boot's runs one after another, a second apart, from t = 100 s
            start_at = 100.0 if last is None or last[:2] != run[:2] else ended + 1.0
            ended, last = start_at, run
        rate = SKELETON.base_decode_tps * conc**SKELETON.stream_scaling * math.exp(value)
        start = start_at + 0.0005 * rec["stream"]
        first = start + (rec["t_first"] - rec["t_start"])
        end = first + (rec["completion_tokens"] - 1) / rate
        out.append({**rec, "t_start": start, "t_first": first, "t_end": end})
        ended = max(ended, end)
    if duplicated:
        copied = [{**r, "arm": "off_B"} for r in out if r["kind"] == "request" and r["arm"] == "off_A"]
        out = [r for r in out if not (r["kind"] == "request" and r["arm"] == "off_B")] + copied
    return campaign, out


def _depths(decision: Decision) -> tuple[int, ...]:
    if decision.decision is not DecisionKind.PROMOTE or decision.schedule is None:
        return (0,) * len(CONCURRENCY)
    return tuple(decision.schedule.depth_at(c) for c in CONCURRENCY)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_rule_schedules_what_decide_schedules(case: int) -> None:
    truth, nuisance, campaigns = CASES[case]
    batch = _batch(truth, nuisance, campaigns, seed=40 + case)
    rule = nc.scheduled_depths(batch, BOOTS, None)
    policy = _policy()
    for i in range(campaigns):
        campaign, records = _records(batch, i, nuisance == "duplicated off_B")
        decision = decide(results_from_records(campaign, records, label=f"rule-{i}"), policy)
        assert _depths(decision) == tuple(int(d) for d in rule[i]), (nuisance, i, decision.reasons)
    assert rule.any() == (nuisance != "duplicated off_B")  # each case schedules depths, unless blocked


def test_a_schedule_compares_at_the_margin_whatever_faster_than_offs_min_effect() -> None:
    """Why the matrix's zero rows for schedules are the rule at min_effect 0 and not decide: a
    faster_than_off rule's min_effect leaves the engine's schedule as it is (that rule is exempt in
    schedule mode), so campaigns the rule schedules differently at min_effect 0 get the margin's."""
    text = (ROOT / "rules" / "default.toml").read_text().replace('mode = "fastest"', 'mode = "schedule"')
    zero = parse_rules(text.replace(FASTER, FASTER + "min_effect = 0.0\n"), "zero.toml")
    assert [getattr(r.params, "min_effect", None) for r in zero.rules if r.kind == "faster_than_off"] == [0.0]
    batch = _batch({"k2": _gains(0.04, 0.04)}, "none", 20, seed=47)
    margin, at_zero = nc.scheduled_depths(batch, BOOTS, None), nc.scheduled_depths(batch, BOOTS, 0.0)
    differ = [i for i in range(20) if (margin[i] != at_zero[i]).any()][:2]
    assert differ
    for i in differ:
        campaign, records = _records(batch, i, False)
        decision = decide(results_from_records(campaign, records, label=f"zero-{i}"), zero)
        assert _depths(decision) == tuple(int(d) for d in margin[i])


def test_the_rule_at_the_floor_schedules_what_a_policy_at_the_floor_decides() -> None:
    """The matrix's `floor` rows are the rule with the margin at SCHEDULE_MIN_MARGIN: a policy in
    schedule mode at that margin decides the same depths (null campaigns near the threshold, and
    slow runs lost)."""
    text = (ROOT / "rules" / "default.toml").read_text().replace('mode = "fastest"', 'mode = "schedule"')
    floor = text.replace("equivalence_margin = 0.03 ", f"equivalence_margin = {SCHEDULE_MIN_MARGIN} ", 1)
    policy = parse_rules(floor, "floor.toml")
    assert policy.equivalence_margin == SCHEDULE_MIN_MARGIN
    for nuisance, seed in (("none", 61), ("missing not at random", 62)):
        batch = _batch({"k2": _gains(0.015, 0.015)}, nuisance, 12, seed=seed)
        rule = nc.scheduled_depths(batch, BOOTS, None, SCHEDULE_MIN_MARGIN)
        assert rule.any()  # the rule schedules depths there, so the comparison is not vacuous
        for i in range(12):
            campaign, records = _records(batch, i, False)
            decision = decide(results_from_records(campaign, records, label=f"floor-{i}"), policy)
            assert _depths(decision) == tuple(int(d) for d in rule[i]), (nuisance, i)
