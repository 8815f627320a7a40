"""End to end against a real llama-server on the CPU: collect the llama.cpp campaign, then decide on it.

`python -m mtpverdict collect collectors/llamacpp-cpu/campaign.toml` with two faults on the way, as the
vLLM stage does (tests/test_real_server.py), then checks that the three acceptance surfaces agree run by
run (/metrics deltas, the responses' timings, the log's per-request lines), the random draft is void,
the identity probe agrees across arms, the depth and KV pool are what the server shows, and decides.
Needs MTPVERDICT_LLAMA_SERVER (the binary) and MTPVERDICT_GGUF (convert_models.py output);
collectors/llamacpp-cpu/ci.sh provides both. Skipped without them, unless MTPVERDICT_REQUIRE_REAL_SERVER
is set (CI), where a missing server is a failure. The port is MTPVERDICT_LLAMACPP_PORT (default: the
campaign's).
"""

from __future__ import annotations

import json
import os
import re
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

from .conftest import LLAMACPP_ENV, ROOT, collect_running, real_server, run_collect, wait_for_request

pytestmark = pytest.mark.real_server
CAMPAIGN = ROOT / "collectors" / "llamacpp-cpu" / "campaign.toml"
KILLED_AT = "llamacpp-records-at-kill.jsonl"  # beside the results: records.jsonl as collect was killed
ARMS = ["off_A", "draft_copy_k2", "draft_copy_k4", "draft_random_k2", "ngram_mod_k2", "off_B"]
DEPTH = {
    "off_A": 0,
    "draft_copy_k2": 2,
    "draft_copy_k4": 4,
    "draft_random_k2": 2,
    "ngram_mod_k2": 2,
    "off_B": 0,
}
SPECULATING = ["draft_copy_k2", "draft_copy_k4", "draft_random_k2", "ngram_mod_k2"]
RUN = ["boot", "workload", "concurrency", "rep"]
KV_POOL = 4096  # -c 4096: four slots (--parallel 4) of 1024 cells, one stream each
WINDOW = 1024  # the context one slot may use: /props default_generation_settings.n_ctx
MAX_TOKENS = 48  # the campaign's workload, EOS ignored


def _campaign(work: Path) -> Path:
    port = os.environ.get("MTPVERDICT_LLAMACPP_PORT")
    if not port:
        return CAMPAIGN
    moved = work / "llamacpp-campaign.toml"
    moved.write_text(re.sub(r"(?m)^port = \d+$", f"port = {int(port)}", CAMPAIGN.read_text()))
    return moved


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The campaign, with two faults on the way: draft_copy_k4's server is SIGKILLed mid-run (collect
    records a failed boot and goes on), then collect itself is SIGKILLed in ngram_mod_k2 (its server is
    left running). `--resume --retry-failed` must stop the orphan, record the interrupted boot, boot
    both arms again and finish, without touching a byte already written."""
    binary, gguf = real_server(LLAMACPP_ENV)
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("llamacpp-e2e"))
    out = work / "llamacpp-e2e-results"
    if out.exists():
        shutil.rmtree(out)
    campaign = _campaign(work)
    drawn = _drawn()  # the faults need ngram_mod_k2 to boot right after draft_copy_k4
    assert drawn.index("ngram_mod_k2") == drawn.index("draft_copy_k4") + 1, drawn
    argv = [sys.executable, "-m", "mtpverdict", "collect", str(campaign), "--out", str(out)]
    argv += ["--var", f"llama_server={binary}", "--var", f"models={gguf}"]
    with (work / "llamacpp-collect-interrupted.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        with collect_running(proc, out, keep_servers=True):  # the orphan is the resume's to stop
            wait_for_request(out, "draft_copy_k4", timed=True, proc=proc, timeout=300)
            server = json.loads((out / "raw" / "boots" / "draft_copy_k4-boot1.json").read_text())
            os.kill(server["pid"], signal.SIGKILL)
            wait_for_request(out, "ngram_mod_k2", timed=True, proc=proc, timeout=300)
            proc.kill()
            proc.wait()
    shutil.copyfile(out / "records.jsonl", work / KILLED_AT)  # what must survive the resume
    done = run_collect([*argv, "--resume", "--retry-failed"], out, expect=0, timeout=900)
    sys.stdout.write(done.stdout[-3000:])
    return out


def _drawn() -> list[str]:
    """The campaign's one round in the order drawn for it (one device draws its order too; the seed
    comes from the campaign's id, which a moved port leaves alone)."""
    plan = load_campaign_file(CAMPAIGN)
    return round_order([a.name for a in plan.arms], seed=plan.order_seed, device=0, round_=1)


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
    killed = rows[("draft_copy_k4", 1)]
    assert killed.status == "failed" and "exited" in str(killed.error), killed.error
    interrupted = rows[("ngram_mod_k2", 1)]
    assert "interrupted" in str(interrupted.note)
    assert rows[("draft_copy_k4", 2)].status == "ready" and rows[("ngram_mod_k2", 2)].status == "ready"
    assert len(set(results.boots["order"])) == len(results.boots) == 8
    decision = _decision(collected)
    copy = next(a for a in decision["arms"] if a["name"] == "draft_copy_k4")
    boot_ok = next(r for r in copy["rules"] if r["kind"] == "boot_ok")
    assert boot_ok["passed"] is False and "1 of 2 boots failed" in boot_ok["detail"]


def test_every_arm_ran_at_its_depth_on_the_pool_the_log_names(collected: Path) -> None:
    results = load_results(collected)
    ready = _ready(results).sort_values("order")
    assert list(ready["arm"]) == _drawn()
    boots = ready.set_index("arm")
    # off from /slots ("speculative": false), the others from /metrics' per-position series once drafted
    assert boots["observed_k"].astype(int).to_dict() == DEPTH
    assert set(boots["engine_version"]) == {"1 (0c1e570)"}  # /props build_info b1-0c1e570
    assert set(boots["max_model_len"]) == {WINDOW}
    for boot in results.boots.itertuples():
        parsed = parse_file(collected / str(boot.log), "llamacpp")
        logged = {kv.kv_cache_tokens for kv in parsed.kv_capacity if kv.kv_cache_tokens is not None}
        assert logged == {boot.kv_cache_tokens} == {KV_POOL}, (boot.arm, boot.boot, logged)
    req = results.requests.merge(ready[["arm", "boot"]], on=["arm", "boot"])
    assert len(req) and (req["status"] == "ok").all()
    timed = req[~req["warmup"]]
    assert timed["nonce"].notna().all() and (timed["completion_tokens"] == MAX_TOKENS).all()
    # llama.cpp's timings: prompt_ms and predicted_ms are the server's TTFT and decode time
    assert timed["server_ttft_ms"].notna().all() and (timed["server_generation_ms"] > 0).all()


def test_acceptance_agrees_run_by_run_between_metrics_responses_and_log(collected: Path) -> None:
    results = load_results(collected)
    ready = _ready(results)[["arm", "boot"]]
    acc = results.acceptance.merge(ready, on=["arm", "boot"])
    req = results.requests.merge(ready, on=["arm", "boot"])
    for arm in SPECULATING:
        mine = req[(req["arm"] == arm) & ~req["warmup"] & req["spec_draft_tokens"].notna()]
        responses = mine.groupby(RUN)[["spec_draft_tokens", "spec_accepted_tokens"]].sum()
        surfaces = {}
        for source in ("metrics", "log"):
            rows = acc[(acc["arm"] == arm) & (acc["source"] == source) & (acc["status"] == "ok")]
            assert rows["scoped"].eq("run").all(), (arm, source)  # no engine-wide window, no running total
            rows = rows[rows["draft_tokens"] > 0]
            surfaces[source] = rows.set_index(RUN)[["draft_tokens", "accepted_tokens"]].sort_index()
        expected = responses.rename(
            columns={"spec_draft_tokens": "draft_tokens", "spec_accepted_tokens": "accepted_tokens"}
        ).sort_index()
        # every measured run drafted (an n-gram drafter may find nothing to copy in a run)
        assert len(expected) == 10 or (arm.startswith("ngram") and len(expected)), (arm, len(expected))
        for source, found in surfaces.items():
            assert found.astype(int).equals(expected.astype(int)), (arm, source, found, expected)
    copy = acc[acc["arm"].str.startswith("draft_copy") & (acc["source"] == "metrics")]
    assert copy["accepted_tokens"].sum() >= 0.9 * copy["draft_tokens"].sum()  # batched f16 may differ
    random = acc[(acc["arm"] == "draft_random_k2") & (acc["source"] == "metrics")]
    assert random["accepted_tokens"].sum() <= 0.01 * random["draft_tokens"].sum()


def test_greedy_outputs_are_identical_and_coherent_across_arms(collected: Path) -> None:
    coherence = load_results(collected).coherence
    identity = coherence[coherence["case"] == "identity-corpus"]
    assert set(identity["arm"]) == set(ARMS) and identity["output_sha256"].nunique() == 1
    graded = coherence[~coherence["case"].str.startswith("identity-")]
    assert graded["passed"].all() and len(graded) >= 5 * len(ARMS)


def test_the_decision_voids_the_random_draft_on_the_servers_own_timing(collected: Path) -> None:
    decision = _decision(collected)
    verdicts = {a["name"]: a["verdict"] for a in decision["arms"]}
    assert verdicts["draft_random_k2"] == "void"
    assert all(verdicts[arm] != "void" for arm in ("draft_copy_k2", "draft_copy_k4", "ngram_mod_k2"))
    assert {m["timing"] for m in decision["missingness"]} == {"server"} and not decision["refused"]
    for arm in decision["arms"]:
        rule = next(r for r in arm["rules"] if r["kind"] == "coherence")
        assert rule["passed"] is True, rule["detail"]
    copy = next(a for a in decision["arms"] if a["name"] == "draft_copy_k2")
    assert copy["acceptance"]["primary"]["source"] == "response", copy["acceptance"]["primary"]
    sources = {s["source"] for s in copy["acceptance"]["surfaces"]}
    assert sources == {"response", "metrics", "log"}
