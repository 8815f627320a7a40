"""An inconclusive decision always names what to run next: one case per reason a decision is inconclusive."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtpverdict.decide import decide, decide_directory
from mtpverdict.formats.decision import Decision
from mtpverdict.formats.results_io import results_from_records
from mtpverdict.rules import load_policy, parse_rules
from mtpverdict.sim import Scenario, SimArm, simulate_campaign

from .conftest import FIXTURES, ROOT

Edit = Callable[[dict[str, Any], list[dict[str, Any]]], None]


def _simulated(
    arms: tuple[SimArm, ...], *, boots: int = 3, edit: Edit | None = None, policy: Any = None
) -> Decision:
    scenario = Scenario(
        name="next-step",
        arms=arms,
        boots_per_arm=boots,
        reps=3,
        concurrency=(1, 8),
        completion_tokens=64,
    )
    campaign, records = simulate_campaign(scenario, np.random.default_rng(5))
    if edit is not None:
        edit(campaign, records)
    return decide(
        results_from_records(campaign, records, label="next-step"), policy or load_policy("default")
    )


def _fixture(name: str) -> Decision:
    return decide_directory(FIXTURES / name, rules="default").decision


def _no_evidence(tmp: Path) -> Decision:
    out = tmp / "empty"
    out.mkdir()
    shutil.copy(FIXTURES / "synthetic-null" / "campaign.json", out / "campaign.json")
    (out / "records.jsonl").write_text("")
    return decide_directory(out, rules="default").decision


def _bursts(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """The candidate's slower half of every run read in a burst (the client's clock): refused cells."""
    runs: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for rec in records:
        if rec["kind"] == "request":
            rec.update(chunks=60, bunched_chunks=2)
            if rec["arm"] == "k1":
                runs.setdefault((rec["boot"], rec["workload"], rec["concurrency"], rec["rep"]), []).append(
                    rec
                )
    for members in runs.values():
        for rec in sorted(members, key=lambda r: r["t_end"] - r["t_first"], reverse=True)[
            : len(members) // 2
        ]:
            rec["bunched_chunks"] = 58


def _schedule_argv(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """The `sched` arm served a per-batch-size schedule: it confirms a schedule, it is no single depth."""
    config = {
        "method": "mtp",
        "num_speculative_tokens": 2,
        "num_speculative_tokens_per_batch_size": [[1, 1, 2]],
    }
    argv = ["--model", "synthetic", "--speculative-config", json.dumps(config)]
    for arm in campaign["arms"]:
        if arm["name"] == "sched":
            arm["serve_argv"] = argv
    for rec in records:
        if rec["kind"] == "boot" and rec["arm"] == "sched":
            rec["argv"] = argv


def _two_families(campaign: dict[str, Any], records: list[dict[str, Any]]) -> None:
    for arm in campaign["arms"]:
        if arm["name"] in ("off_C", "k9"):
            arm["family"] = "other"


SCHEDULE_POLICY = (
    (ROOT / "rules" / "default.toml").read_text().replace('mode = "fastest"', 'mode = "schedule"')
)
OFF = (SimArm("off_A"), SimArm("off_B"))

CASES: dict[str, tuple[Callable[[Path], Decision], str]] = {
    "no measured evidence": (_no_evidence, "collect the campaign's measurements: mtpverdict collect"),
    "the controls drifted": (lambda _: _fixture("synthetic-drift"), "the controls drifted"),
    "a blind harness": (lambda _: _fixture("synthetic-blind"), "the harness cannot see batching"),
    "no candidate": (lambda _: _simulated(OFF), "add a candidate arm"),
    "boots would settle it": (lambda _: _fixture("synthetic-null"), "set boots = "),
    "no boot variance (one boot per arm)": (
        lambda _: _simulated((OFF[0], SimArm("k1", 1, 0.02), OFF[1]), boots=1),
        "set boots = 2 in CAMPAIGN.toml",
    ),
    "streams set aside by arm": (
        lambda _: _simulated((OFF[0], SimArm("k1", 1, 0.0), OFF[1]), edit=_bursts),
        "streams were set aside by arm",
    ),
    "a schedule's confirmation arm": (
        lambda _: _simulated((OFF[0], SimArm("sched", 2, 0.2), OFF[1]), edit=_schedule_argv),
        "read the schedule its confirmation arm confirms (a what-if",
    ),
    "every candidate void": (
        lambda _: _simulated((OFF[0], SimArm("k1", 1, 0.0, first_position_rate=0.0), OFF[1])),
        "every candidate is void",
    ),
    "schedule mode over two families": (
        lambda _: _simulated(
            (*OFF, SimArm("k1", 1, 0.1), SimArm("off_C"), SimArm("k9", 1, 0.1)),
            edit=_two_families,
            policy=parse_rules(SCHEDULE_POLICY, "schedule.toml"),
        ),
        "mtpverdict ",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_inconclusive_reason_names_a_runnable_next_step(case: str, tmp_path: Path) -> None:
    build, expected = CASES[case]
    decision = build(tmp_path)
    assert str(decision.decision) == "inconclusive", decision.reasons[0]
    assert decision.next_step is not None, decision.reasons[0]
    assert expected in decision.next_step
    assert "mtpverdict collect" in decision.next_step or "mtpverdict decide" in decision.next_step
    assert decision.reasons[-1] == f"next: {decision.next_step}"


def test_a_decision_that_is_not_inconclusive_names_no_next_step() -> None:
    decision = _fixture("synthetic-clean-win")
    assert str(decision.decision) == "promote" and decision.next_step is None
