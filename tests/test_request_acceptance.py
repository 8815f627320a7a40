"""Per-request acceptance (vLLM's per-request spec-decode metrics, llama.cpp's draft_n) as the primary
acceptance surface, clustered by request, beside the /metrics windows, never counted twice."""

from __future__ import annotations

from typing import Any

import numpy as np

from mtpverdict.evidence.gather import gather
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules import load_policy
from mtpverdict.simulate import Scenario, SimArm, simulate_campaign


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
