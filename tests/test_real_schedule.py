"""A schedule derived and then confirmed on a real vLLM CPU server, through the command line.

Phase 1 collects collectors/vllm-cpu/schedule-campaign.toml (off, n-gram k=1 and k=3, and an arm
running a hand-written per-batch-size schedule) and decides it with collectors/vllm-cpu/
schedule-policy.toml, which derives a schedule from the fixed depths (while no depth is resolved better
than off anywhere, one more boot per arm, as the decision's next step says, up to four).
`mtpverdict schedule-arm` writes
the campaign again with an arm serving the derived --speculative-config; phase 2 collects that campaign
and decides it: the derived schedule is promoted only if the arm that ran it confirms it.

Needs MTPVERDICT_VLLM_PYTHON and MTPVERDICT_MODELS (collectors/vllm-cpu/ci.sh provides both); skipped
without them unless MTPVERDICT_REQUIRE_REAL_SERVER is set. MTPVERDICT_SCHEDULE_BOOTS collects that many
boots per arm instead of the campaign's three. MTPVERDICT_SCHEDULE_WORK names a directory holding both
phases' results from an earlier run (schedule-results, schedule-confirm-results), to decide again
without booting thirty servers (about 14 minutes on two cores). MTPVERDICT_SCHEDULE_PHASE1 names phase
1's results from an earlier run of the same campaign on this server (tests/data/real/schedule-phase1,
recorded here): phase 1 is decided from them and only phase 2 boots servers. CI does that at one boot
per arm (five boots instead of thirty): the derived schedule is still served, counted and decided on a
live server, and the derivation is still decided from what a real server measured.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from mtpverdict.collect.campaign import load_campaign_file
from mtpverdict.formats.decision import Decision, load_decision
from mtpverdict.formats.results_io import Results, load_results
from mtpverdict.serveconfig import ServeSpec, extract_spec

from .conftest import ROOT, VLLM_ENV, real_server, run_collect, run_process

pytestmark = pytest.mark.real_server
HERE = ROOT / "collectors" / "vllm-cpu"
CAMPAIGN = HERE / "schedule-campaign.toml"
POLICY = HERE / "schedule-policy.toml"
PORT = "8220"
HAND_WRITTEN = "ngram_sched"
# a step drafts fewer tokens only when fewer remain before max_tokens: a few steps in each request's 256
ENDS = 0.05
MAX_BOOTS = 4  # phase 1 adds boots up to this many per arm while nothing is resolved against off
DERIVED = "ngram_schedule"


@dataclass(frozen=True)
class Phases:
    """Both phases: what was collected and what was decided."""

    derive: Results
    derived: Decision
    campaign: Path
    confirm: Results
    confirmed: Decision


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """A command that launches no server (decide, schedule-arm), which must succeed."""
    done = run_process([sys.executable, "-m", "mtpverdict", *args], timeout=3600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@dataclass(frozen=True)
class Server:
    """Where collect finds vLLM, the models and its cache."""

    python: str
    models: str
    work: Path

    def collect(self, campaign: Path, out: Path, *, resume: bool = False) -> None:
        argv = ["collect", str(campaign), "--out", str(out), *(["--resume"] if resume else [])]
        cache = self.work / "vllm-cache"
        for var in (f"python={self.python}", f"models={self.models}", f"cache={cache}", f"port={PORT}"):
            argv += ["--var", var]
        run_collect([sys.executable, "-m", "mtpverdict", *argv], out, expect=0, timeout=3600)


def _with_boots(campaign: Path, work: Path, boots: int) -> Path:
    """The campaign with `boots` boots per arm."""
    text, found = re.subn(r"(?m)^boots = \d+$", f"boots = {boots}", campaign.read_text())
    assert found == 1, "the campaign's boots line moved"
    path = work / f"{campaign.stem}-{boots}-boots.toml"
    path.write_text(text)
    return path


def _boots() -> int:
    """Boots per arm: MTPVERDICT_SCHEDULE_BOOTS, else the campaign's."""
    found = re.search(r"(?m)^boots = (\d+)$", CAMPAIGN.read_text())
    assert found is not None
    return int(os.environ.get("MTPVERDICT_SCHEDULE_BOOTS") or found.group(1))


def _derive(server: Server, out: Path, decision: Path) -> Decision:
    """Phase 1: collect and decide. While no range speculates (nothing resolved against off), take the
    decision's own next step, one more boot per arm with collect --resume, up to MAX_BOOTS."""
    if out.exists():  # a machine that keeps ci-work holds the last run's
        shutil.rmtree(out)
    boots = _boots()
    while True:
        server.collect(_with_boots(CAMPAIGN, server.work, boots), out, resume=out.exists())
        derived = _decide(out, decision)
        if boots >= MAX_BOOTS or (derived.schedule and derived.schedule.speculative_config):
            return derived
        boots += 1


def _decide(results: Path, out: Path) -> Decision:
    _cli("decide", str(results), "--rules", str(POLICY), "--out", str(out))
    return load_decision(out)


def _recorded_phase_one(first: Path) -> bool:
    """Phase 1 from a recorded run (MTPVERDICT_SCHEDULE_PHASE1, a results directory), copied to `first`."""
    recorded = os.environ.get("MTPVERDICT_SCHEDULE_PHASE1")
    if not recorded:
        return False
    if first.exists():
        shutil.rmtree(first)
    shutil.copytree(recorded, first)
    return True


@pytest.fixture(scope="module")
def phases(tmp_path_factory: pytest.TempPathFactory) -> Phases:
    given = os.environ.get("MTPVERDICT_SCHEDULE_WORK")
    work = Path(given or os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("schedule"))
    first, second = work / "schedule-results", work / "schedule-confirm-results"
    server = None if given else Server(*real_server(VLLM_ENV), work)
    if server is None or _recorded_phase_one(first):
        derived = _decide(first, work / "schedule-derived.json")
    else:
        derived = _derive(server, first, work / "schedule-derived.json")
    assert derived.schedule is not None and derived.schedule.speculative_config, derived.reasons
    campaign = work / "schedule-confirm.toml"
    campaign.unlink(missing_ok=True)
    _cli("schedule-arm", str(CAMPAIGN), str(work / "schedule-derived.json"), "--out", str(campaign))
    if server is not None:
        if second.exists():
            shutil.rmtree(second)
        server.collect(_with_boots(campaign, work, _boots()), second)
    confirmed = _decide(second, work / "schedule-confirmed.json")
    return Phases(load_results(first), derived, campaign, load_results(second), confirmed)


def _drafted_per_step(requests: pd.DataFrame, arm: str, concurrency: int) -> float:
    rows = requests[
        (requests["arm"] == arm)
        & (requests["concurrency"] == concurrency)
        & ~requests["warmup"].astype(bool)
        & requests["spec_steps"].notna()
    ]
    steps = rows["spec_steps"].sum()
    return float(rows["spec_draft_tokens"].sum() / steps) if steps else 0.0


def test_the_hand_written_schedule_arm_boots_at_its_largest_depth_and_drafts_by_batch_size(
    phases: Phases,
) -> None:
    boots = phases.derive.boots
    sched = boots[boots["arm"] == HAND_WRITTEN]
    assert len(sched) >= 1 and len(sched) == (boots["arm"] == "off_A").sum()  # every boot it was given
    assert set(sched["status"]) == {"ready"}
    assert set(sched["observed_k"]) == {3}  # the per-position counters show the largest depth
    req = phases.derive.requests
    assert _drafted_per_step(req, HAND_WRITTEN, 1) == pytest.approx(3.0, abs=ENDS)
    assert _drafted_per_step(req, HAND_WRITTEN, 4) < 1.5  # [[2,64,1]]: one token once a batch forms
    assert _drafted_per_step(req, "ngram_k3", 4) == pytest.approx(3.0, abs=ENDS)


def test_phase_one_derives_a_schedule_from_the_fixed_depths(phases: Phases) -> None:
    schedule = phases.derived.schedule
    assert schedule is not None and schedule.speculative_config is not None, phases.derived.reasons
    assert schedule.baseline is None  # off where nothing is resolved: the policy names no reference
    assert {r.arm for r in schedule.ranges} <= {"ngram_k1", "ngram_k3", None}  # fixed depths only
    assert schedule.confirmation[0].startswith(f"confirmation arm {HAND_WRITTEN} ")
    config = json.loads(schedule.speculative_config)
    assert config["num_speculative_tokens_per_batch_size"] == [[r.start, r.end, r.k] for r in schedule.ranges]


def test_the_confirmation_campaign_serves_exactly_the_derived_schedule(phases: Phases) -> None:
    assert phases.derived.schedule is not None
    plan = load_campaign_file(phases.campaign)
    assert [a.name for a in plan.arms] == ["off_A", "ngram_k1", "ngram_k3", DERIVED, "off_B"]
    arm = plan.arms[3]
    assert arm.serve_args[:2] == ("--speculative-config", phases.derived.schedule.speculative_config)
    spec = extract_spec(arm.serve_args)
    assert isinstance(spec, ServeSpec) and spec.schedule


def test_the_derived_schedule_runs_on_the_server_as_derived(phases: Phases) -> None:
    schedule = phases.derived.schedule
    assert schedule is not None
    boots = phases.confirm.boots
    mine = boots[boots["arm"] == DERIVED]
    assert set(mine["status"]) == {"ready"} and len(mine) == (boots["arm"] == "off_A").sum()
    assert set(mine["observed_k"]) <= {max(r.k for r in schedule.ranges)}
    req = phases.confirm.requests
    assert _drafted_per_step(req, DERIVED, 1) == pytest.approx(schedule.depth_at(1), abs=ENDS)  # batch 1
    # at c=4 the batch is 4 only while all four streams overlap: on a loaded machine the client starts
    # them late and they finish apart (a run here never had four in one step), so the steps draft at
    # the depths of batch sizes 1 to 4, never outside them
    depths = [schedule.depth_at(b) for b in range(1, 5)]
    assert min(depths) - ENDS <= _drafted_per_step(req, DERIVED, 4) <= max(depths) + ENDS


def test_phase_two_decides_on_the_schedule_arm_as_its_confirmation(phases: Phases) -> None:
    d = phases.confirmed
    depths = {e.arm: e.k for c in d.regime for e in c.depths}
    assert depths[DERIVED] is None and depths["ngram_k3"] == 3  # never a depth of the schedule
    if d.schedule is None:  # a control refused every comparison first (a loaded machine): no schedule
        assert str(d.decision) == "inconclusive" and d.reasons, d.reasons
        return
    assert all(r.arm != DERIVED for r in d.schedule.ranges)
    assert d.schedule.confirmation and d.schedule.confirmation[0].startswith(f"confirmation arm {DERIVED} ")
    promoted = str(d.decision) == "promote"
    assert promoted <= bool(d.schedule.confirmed)  # confirm = true: no promotion without it
    if not d.schedule.confirmed and str(d.decision) != "keep_reference":  # the reasons say why not
        unconfirmed = f"confirmation arm {DERIVED} does not confirm the schedule"
        assert any("([selection] confirm)" in r or r.startswith(unconfirmed) for r in d.reasons), d.reasons
