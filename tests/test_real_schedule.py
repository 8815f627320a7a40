"""A schedule on a real vLLM CPU server: fixed n-gram depths, an arm running vLLM's per-batch-size
schedule, and a decision in schedule mode with that arm as the confirmation.

Needs MTPVERDICT_VLLM_PYTHON and MTPVERDICT_MODELS (collectors/vllm-cpu/ci.sh provides both); skipped
without them unless MTPVERDICT_REQUIRE_REAL_SERVER is set. MTPVERDICT_SCHEDULE_RESULTS names a results
directory of collectors/vllm-cpu/schedule-campaign.toml already collected, to decide on it again
without booting ten servers (about 20 minutes on two cores). MTPVERDICT_SCHEDULE_BOOTS collects that
many boots per arm instead of the campaign's two (CI collects one: five servers).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mtpverdict.decide import decide
from mtpverdict.formats.results_io import Results, load_results
from mtpverdict.rules.registry import parse_rules

from .conftest import ROOT

pytestmark = pytest.mark.real_server
CAMPAIGN = ROOT / "collectors" / "vllm-cpu" / "schedule-campaign.toml"
PORT = "8220"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    given = os.environ.get("MTPVERDICT_SCHEDULE_RESULTS")
    if given:
        return load_results(given)
    python = os.environ.get("MTPVERDICT_VLLM_PYTHON")
    models = os.environ.get("MTPVERDICT_MODELS")
    if not python or not models:
        if os.environ.get("MTPVERDICT_REQUIRE_REAL_SERVER"):
            pytest.fail(
                "MTPVERDICT_VLLM_PYTHON and MTPVERDICT_MODELS must be set (collectors/vllm-cpu/ci.sh)"
            )
        pytest.skip("no real vLLM server here: set MTPVERDICT_VLLM_PYTHON and MTPVERDICT_MODELS")
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("schedule"))
    out = work / "schedule-results"
    if out.exists():  # a machine that keeps ci-work holds the last run's
        shutil.rmtree(out)
    argv = [sys.executable, "-m", "mtpverdict", "collect", str(_campaign(work)), "--out", str(out)]
    for var in (f"python={python}", f"models={models}", f"cache={work / 'vllm-cache'}", f"port={PORT}"):
        argv += ["--var", var]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return load_results(out)


def _campaign(work: Path) -> Path:
    """The schedule campaign, with MTPVERDICT_SCHEDULE_BOOTS boots per arm when that is set."""
    boots = os.environ.get("MTPVERDICT_SCHEDULE_BOOTS")
    if not boots:
        return CAMPAIGN
    text = CAMPAIGN.read_text()
    assert text.count("\nboots = 2\n") == 1, "the campaign's boots line moved"
    path = work / "schedule-campaign.toml"
    path.write_text(text.replace("\nboots = 2\n", f"\nboots = {int(boots)}\n"))
    return path


def _drafted_per_step(requests: pd.DataFrame, arm: str, concurrency: int) -> float:
    rows = requests[
        (requests["arm"] == arm)
        & (requests["concurrency"] == concurrency)
        & ~requests["warmup"].astype(bool)
        & requests["spec_steps"].notna()
    ]
    return float(rows["spec_draft_tokens"].sum() / rows["spec_steps"].sum())


def test_the_schedule_arm_boots_at_its_largest_depth_and_drafts_by_batch_size(results: Results) -> None:
    boots = results.boots
    sched = boots[boots["arm"] == "ngram_sched"]
    assert len(sched) >= 1 and len(sched) == (boots["arm"] == "off_A").sum()  # every boot it was given
    assert set(sched["status"]) == {"ready"}
    assert set(sched["observed_k"]) == {3}  # the per-position counters show the largest depth
    req = results.requests
    assert _drafted_per_step(req, "ngram_sched", 1) == pytest.approx(3.0)
    assert _drafted_per_step(req, "ngram_sched", 4) < 1.5  # [[2,64,1]]: one token once a batch forms
    assert _drafted_per_step(req, "ngram_k3", 4) == pytest.approx(3.0)


def test_schedule_mode_decides_with_the_schedule_arm_as_its_confirmation(results: Results) -> None:
    text = (ROOT / "rules" / "default.toml").read_text().replace('mode = "fastest"', 'mode = "schedule"')
    d = decide(results, parse_rules(text, "default-schedule.toml"))
    assert d.schedule is not None or str(d.decision) == "inconclusive"
    depths = {e.arm: e.k for c in d.regime for e in c.depths}
    assert depths["ngram_sched"] is None and depths["ngram_k3"] == 3  # never a depth of the schedule
    if d.schedule is not None:
        assert d.schedule.confirmed is not None
        assert d.schedule.confirmation[0].startswith("confirmation arm ngram_sched ")
        assert all(r.arm != "ngram_sched" for r in d.schedule.ranges)
