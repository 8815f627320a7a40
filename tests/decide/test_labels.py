"""Labels that say what they compare: the floor's control pair names its two boots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mtpverdict.decide import decide
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.report.data import DecisionIndex, ReportData
from mtpverdict.report.tables import floor_table
from mtpverdict.rules import load_policy
from mtpverdict.sim import Scenario, SimArm, simulate_campaign


def test_the_control_pair_names_its_boots_when_off_b_lacks_the_cell() -> None:
    scenario = Scenario(
        name="pair",
        arms=(SimArm("off_A"), SimArm("k1", 1, 0.1), SimArm("off_B")),
        boots_per_arm=1,
        reps=3,
        concurrency=(1, 4),
        workloads=("w1", "w2"),
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(2))
    # off_A booted twice at w2 (a second boot's records), off_B never measured w2
    extra = [
        {
            **r,
            "boot": 2,
            "t_start": r["t_start"] + 1e4,
            "t_first": r["t_first"] + 1e4,
            "t_end": r["t_end"] + 1e4,
        }
        for r in records
        if r["kind"] == "request" and r["arm"] == "off_A" and r["workload"] == "w2"
    ]
    boot = next(r for r in records if r["kind"] == "boot" and r["arm"] == "off_A")
    records = [r for r in records if not (r.get("arm") == "off_B" and r.get("workload") == "w2")]
    records += extra + [{**boot, "boot": 2, "order": 99}]
    results = results_from_records(campaign, records, label="pair")
    decision = decide(results, load_policy("default"))
    pairs = {(f.workload, f.concurrency): f.pair for f in decision.floors if f.metric == "decode_tps"}
    assert pairs[("w1", 1)] == "off_B boot 1 vs off_A boot 1"
    assert pairs[("w2", 1)] == "off_A boot 2 vs off_A boot 1"  # not "off_B vs off_A"
    empty = pd.DataFrame()
    workloads = [w.id for w in results.campaign.workloads]
    data = ReportData(results, decision, "computed", empty, empty, DecisionIndex.of(decision, workloads))
    table = floor_table(data)
    assert table is not None and "control pair" in table.headers
    assert any("(off_A boot 2 vs off_A boot 1)" in cell for row in table.rows for cell in row)
