"""A mixed-category campaign against a real vLLM server on the CPU: dataset workloads, decided per category.

collectors/vllm-cpu/datasets-campaign.toml: off_A, a draft model that copies the target (acceptance
~100%) and off_B over two drawn prompts from each category of collectors/datasets/mixed.jsonl (chat
turns, code, math, long-context). Every arm must send the same prompts in the same order, each request
must name its prompt and category, and the decision must compare the arms per category and report each
category's acceptance with its interval and the latency percentiles. Needs MTPVERDICT_VLLM_PYTHON and
MTPVERDICT_MODELS (collectors/vllm-cpu/ci.sh); skipped without them unless MTPVERDICT_REQUIRE_REAL_SERVER
is set.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from mtpverdict.decide import decide_directory

from .collect.conftest import free_port
from .conftest import ROOT, VLLM_ENV, real_server

pytestmark = pytest.mark.real_server
CAMPAIGN = ROOT / "collectors" / "vllm-cpu" / "datasets-campaign.toml"
CATEGORIES = {"chat", "code", "math", "long-context"}


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python, models = real_server(VLLM_ENV)
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("datasets"))
    work.mkdir(parents=True, exist_ok=True)
    out = work / "datasets-results"
    if out.exists():
        shutil.rmtree(out)
    doc: Any = tomlkit.parse(CAMPAIGN.read_text())
    doc["server"]["port"] = free_port()  # another real-server stage may hold the campaign's own port
    doc["workloads"][0]["dataset"] = str(CAMPAIGN.parent / doc["workloads"][0]["dataset"])
    campaign = work / "datasets-campaign.toml"
    campaign.write_text(tomlkit.dumps(doc))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtpverdict",
            "collect",
            str(campaign),
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


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def test_every_arm_sends_the_same_prompts_in_the_same_order(collected: Path) -> None:
    timed = [r for r in _records(collected) if r["kind"] == "request" and not r["warmup"]]
    assert {r["category"] for r in timed} == CATEGORIES
    assert all(r["status"] == "ok" and r["workload"] == f"mixed.{r['category']}" for r in timed)
    orders: dict[str, list[tuple[Any, ...]]] = {}
    for r in timed:
        key = (r["workload"], r["concurrency"], r["rep"], r["stream"], r["prompt_index"])
        orders.setdefault(r["arm"], []).append(key)
    assert set(orders) == {"off_A", "draft_copy_k2", "off_B"}
    first = sorted(orders["off_A"])
    assert all(sorted(o) == first for o in orders.values())
    chat = [r for r in timed if r["category"] == "chat"]
    assert all(r["prompt_tokens"] and r["completion_tokens"] == 32 for r in chat)  # chat turns served
    campaign = json.loads((collected / "campaign.json").read_text())
    assert {w["category"] for w in campaign["workloads"]} == CATEGORIES
    assert len({w["dataset_sha256"] for w in campaign["workloads"]}) == 1


def test_the_decision_compares_and_reports_each_category(collected: Path) -> None:
    decision = json.loads(decide_directory(collected).json_text)
    cells = {c["workload"] for c in decision["comparisons"] if c["arm"] == "draft_copy_k2"}
    assert cells == {f"mixed.{c}" for c in CATEGORIES}
    found = {c["category"]: c for c in decision["categories"]}
    assert set(found) == CATEGORIES
    for c in found.values():  # a copy of the target drafts right: high acceptance in every category
        assert c["arm"] == "draft_copy_k2" and c["draft_tokens"]
        assert c["ci_low"] <= c["acceptance_rate"] <= c["ci_high"] and c["ci_low"] > 0.5
        assert c["outcome"] in {"better", "worse", "equivalent", "below_min_effect", "inconclusive"}
    latency = {(x["arm"], x["workload"], x["concurrency"], x["metric"]): x for x in decision["latency"]}
    for arm in ("off_A", "draft_copy_k2", "off_B"):
        for metric in ("ttft_ms", "itl_ms", "e2e_ms"):
            every = latency[(arm, None, None, metric)]
            assert 0 < every["p50"] <= every["p90"] <= every["p99"]
            assert all((arm, f"mixed.{c}", 2, metric) in latency for c in CATEGORIES)
