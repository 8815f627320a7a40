"""Campaigns of many arms: lookups stay indexed (linear work), plots of too many arms are skipped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mtpverdict._jsonio import atomic_write, canonical, record_line
from mtpverdict.formats.results_io import load_results
from mtpverdict.report import load_report_data
from mtpverdict.report.data import DecisionIndex
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

from .conftest import FIXTURES, run_cli

MANY = 70  # arms: past the report's MAX_PLOTTED_ARMS (64)


def _campaign(directory: Path, arms: int) -> Path:
    depths = [SimArm(f"d{i:03d}", 1 + (i - 1) % 4, 0.02) for i in range(1, arms - 1)]
    scenario = Scenario(
        name=f"many-{arms}",
        arms=(SimArm("off_A"), *depths, SimArm("off_B")),
        boots_per_arm=2,
        reps=2,  # a warm run per boot: cold runs' acceptance windows do not count under the default policy
        concurrency=(1,),
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(3))
    (directory / "raw").mkdir(parents=True)
    atomic_write(directory / "records.jsonl", "".join(record_line(r) for r in records))
    atomic_write(directory / "campaign.json", canonical(campaign))
    return directory


@pytest.mark.parametrize(
    ("fixture", "rules"),
    [("thor-qwen36-35b-a3b", "thor-c21"), ("arc-b70-qwen36", "arc-b70"), ("synthetic-drift", None)],
)
def test_the_decision_index_answers_as_the_decision_does(fixture: str, rules: str | None) -> None:
    data = load_report_data(FIXTURES / fixture, rules=rules)
    doc, index = data.decision, data.index
    assert index == DecisionIndex.of(doc, [w.id for w in data.results.campaign.workloads])
    for arm in doc.arms:
        assert index.arms[arm.name] is doc.find_arm(arm.name)
        for metric in ("decode_tps", "aggregate_tps", "ttft_ms"):
            assert index.arm_cells.get((arm.name, metric), ()) == doc.arm_cells(arm.name, metric)
    for c in doc.cells:
        assert index.cells[(c.arm, c.workload, c.concurrency, c.metric)] is doc.cell(
            c.arm, c.workload, c.concurrency, c.metric
        )
    for comp in doc.comparisons:
        key = (comp.arm, comp.workload, comp.concurrency, comp.metric)
        assert index.comparisons[key] is doc.comparison(*key)
    for f in doc.floors:
        key = (f.family, f.workload, f.concurrency, f.metric)
        assert index.floors[key] is doc.floor(*key)


def test_campaign_lookups_by_family_keep_boot_order() -> None:
    campaign = load_results(FIXTURES / "arc-b70-qwen36").campaign
    for family in campaign.families:
        assert campaign.controls(family) == tuple(
            a for a in campaign.arms if a.family == family and a.is_control
        )
        assert campaign.candidates(family) == tuple(
            a for a in campaign.arms if a.family == family and not a.is_control
        )
    assert campaign.candidates() == tuple(a for a in campaign.arms if not a.is_control)
    assert campaign.controls("no-such-family") == ()
    for arm in campaign.arms:
        assert campaign.arm(arm.name) is arm
    with pytest.raises(KeyError):
        campaign.arm("no-such-arm")


@pytest.mark.slow
def test_a_report_of_many_arms_skips_the_per_arm_plots_and_tables_every_arm(tmp_path: Path) -> None:
    results = _campaign(tmp_path / "results", MANY)
    out = tmp_path / "report"
    done = run_cli("report", results, "--out", out)
    assert done.returncode == 0, done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith("not plotted:")]
    for title in ("Throughput by depth", "Acceptance per draft position", "KV pool and concurrency ceiling"):
        assert any(title in line and "more than 64 cannot be told apart" in line for line in skipped), skipped
    assert not (out / "plots" / "kv.png").exists()
    md = (out / "report.md").read_text()
    campaign = json.loads((results / "campaign.json").read_text())
    for arm in campaign["arms"]:
        assert f"| {arm['name']} " in md
