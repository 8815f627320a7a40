"""Per-request acceptance (vLLM's per-request spec-decode metrics, llama.cpp's draft_n) as the primary
acceptance surface, clustered by request, beside the /metrics windows, never counted twice."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mtpverdict.decide import decide
from mtpverdict.evidence.gather import gather
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.report.data import DecisionIndex, ReportData
from mtpverdict.report.tables import acceptance_table
from mtpverdict.report.terminal import render_summary
from mtpverdict.rules import load_policy
from mtpverdict.sim import Scenario, SimArm, simulate_campaign


def _campaign() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    scenario = Scenario(
        name="per-request",
        arms=(SimArm("off_A"), SimArm("k2", 2, 0.1), SimArm("off_B")),
        boots_per_arm=2,
        reps=2,
        concurrency=(1, 2),
        completion_tokens=32,
    )
    return simulate_campaign(scenario, np.random.default_rng(5))


def _with_request_acceptance(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, rec in enumerate(r for r in records if r["kind"] == "request" and r["arm"] == "k2"):
        steps = 10
        first, second = 8, 4 + i % 3  # accepted at draft positions 0 and 1
        rec.update(
            spec_steps=steps,
            spec_draft_tokens=2 * steps,
            spec_accepted_tokens=first + second,
            spec_accepted_per_position=[first, second],
        )
    return records


def test_request_fields_are_the_primary_surface_clustered_by_request() -> None:
    campaign, records = _campaign()
    records = _with_request_acceptance(records)
    evidence = gather(results_from_records(campaign, records, label="pr"), load_policy("default"))
    runs = evidence.tables.runs
    cold = {
        (r.boot, r.workload, r.concurrency, r.rep)
        for r in runs[runs["cold"] & (runs["arm"] == "k2")].itertuples()
    }  # the default policy leaves each boot's cold run out, its acceptance too
    requests = [
        r
        for r in records
        if r["kind"] == "request"
        and r["arm"] == "k2"
        and not r["warmup"]
        and (r["boot"], r["workload"], r["concurrency"], r["rep"]) not in cold
    ]
    assert cold and requests
    acc = evidence.acceptance["k2"]
    assert acc.primary is not None and acc.primary.source == "response"
    assert acc.primary.unit == "request" and acc.primary.windows == len(requests)
    assert acc.primary.draft_tokens == sum(r["spec_draft_tokens"] for r in requests)
    assert acc.primary.accepted_tokens == sum(r["spec_accepted_tokens"] for r in requests)
    assert acc.primary.per_position_rate is not None and acc.primary.per_position_rate[0] == 0.8
    assert "metrics" in {s.source for s in acc.surfaces}  # the /metrics windows kept beside it
    # per cell: the requests of that (workload, concurrency)
    at_two = acc.cell("chat", 2)
    assert at_two is not None and at_two.windows == sum(r["concurrency"] == 2 for r in requests)


def test_imported_response_windows_are_not_counted_twice() -> None:
    campaign, records = _campaign()
    records = _with_request_acceptance(records)
    records.append(
        {
            "kind": "acceptance",
            "arm": "k2",
            "boot": 1,
            "workload": "chat",
            "concurrency": 2,
            "rep": 2,
            "source": "response",
            "scoped": "run",
            "drafts": 5,
            "draft_tokens": 10,
            "accepted_tokens": 9,
            "status": "ok",
        }
    )
    evidence = gather(results_from_records(campaign, records, label="pr"), load_policy("default"))
    primary = evidence.acceptance["k2"].primary
    assert primary is not None and (primary.windows, primary.draft_tokens) == (1, 10)


def test_acceptance_is_shown_per_workload_in_the_summary_and_the_report() -> None:
    scenario = Scenario(
        name="two-workloads",
        arms=(SimArm("off_A"), SimArm("k2", 2, 0.1), SimArm("off_B")),
        boots_per_arm=2,
        reps=2,
        concurrency=(1, 2),
        completion_tokens=32,
        workloads=("repetitive", "novel"),
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(6))
    for rec in records:
        if rec["kind"] == "request" and rec["arm"] == "k2":
            first, second = (9, 8) if rec["workload"] == "repetitive" else (2, 0)
            rec.update(
                spec_steps=10,
                spec_draft_tokens=20,
                spec_accepted_tokens=first + second,
                spec_accepted_per_position=[first, second],
            )
    results = results_from_records(campaign, records, label="two")
    decision = decide(results, load_policy("default"))
    k2 = decision.arm("k2")
    assert k2.acceptance is not None
    by_workload = {(w.workload, w.concurrency): w.surface.acceptance_rate for w in k2.acceptance.workloads}
    assert by_workload[("repetitive", 0)] == 0.85 and by_workload[("novel", 0)] == 0.1
    text = render_summary(decision, "decode_tps", [w["id"] for w in campaign["workloads"]], width=200)
    assert "(repetitive 85%, novel 10%)" in text
    empty = pd.DataFrame()
    workloads = [w.id for w in results.campaign.workloads]
    data = ReportData(results, decision, "computed", empty, empty, DecisionIndex.of(decision, workloads))
    table = acceptance_table(data)
    assert table is not None
    scopes = {(row[0], row[3]): row[5] for row in table.rows}
    assert scopes[("k2", "novel")] == "10.0%" and scopes[("k2", "repetitive c=2")] == "85.0%"
