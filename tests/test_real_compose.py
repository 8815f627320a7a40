"""End to end against a real vLLM server on the CPU, its arms derived from the seat's compose service,
over a mixed prompt set decided per category.

collectors/vllm-cpu/compose.yaml is filled with this machine's paths (as a deployment fills its own)
and compose-campaign.toml collected from it, launched natively, with `sync` before every boot and
the memory check, both recorded per boot with the host's state. The gate then accepts the evidence
for that compose file (the same service but for speculation, said by hash) and refuses it for the
file with one non-speculative flag changed. The campaign's workload is collectors/datasets/mixed.jsonl
(chat turns, code, math, long-context; two prompts drawn per category) with a draft model that copies
the target (acceptance ~100%): every arm must send the same prompts in the same order, each request
must name its prompt and category, and the decision must compare the arms per category and report
each category's acceptance with its interval and the latency percentiles. One campaign for both, so
the stage boots three servers, not six. Needs what tests/test_real_server.py needs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from mtpverdict.decide import decide_directory
from mtpverdict.formats.results_io import load_results
from mtpverdict.gate.run import gate

from .conftest import ROOT, VLLM_ENV, real_server, run_collect

pytestmark = pytest.mark.real_server
HERE = ROOT / "collectors" / "vllm-cpu"
ARMS = {"off_A", "draft_copy_k2", "off_B"}
CATEGORIES = {"chat", "code", "math", "long-context"}


def _deploy(where: Path, python: str, models: str, cache: Path, edit: tuple[str, str] | None = None) -> Path:
    text = (HERE / "compose.yaml").read_text()
    text = text.replace("{python}", python).replace("{models}", models).replace("{cache}", str(cache))
    if edit is not None:
        assert edit[0] in text
        text = text.replace(*edit)
    where.mkdir(parents=True, exist_ok=True)
    (where / "compose.yaml").write_text(text)
    return where / "compose.yaml"


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The campaign collected from the filled compose file: (results, the compose file)."""
    python, models = real_server(VLLM_ENV)
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("compose")) / "compose"
    if work.exists():
        shutil.rmtree(work)
    compose = _deploy(work / "deploy", python, models, work / "vllm-cache")
    doc: Any = tomlkit.parse((HERE / "compose-campaign.toml").read_text())
    doc["workloads"][0]["dataset"] = str(HERE / doc["workloads"][0]["dataset"])  # the copy moves
    (work / "deploy" / "campaign.toml").write_text(tomlkit.dumps(doc))
    out = work / "results"
    argv = [sys.executable, "-m", "mtpverdict", "collect", str(work / "deploy" / "campaign.toml")]
    done = run_collect([*argv, "--out", str(out), "--var", f"models={models}"], out, expect=0, timeout=1500)
    sys.stdout.write(done.stdout[-3000:])
    return out, compose


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def test_the_arms_came_from_the_compose_service_with_the_discipline_recorded(
    collected: tuple[Path, Path],
) -> None:
    out, compose = collected
    python, _ = real_server(VLLM_ENV)
    results = load_results(out)
    deployment = results.campaign.deployment
    assert deployment is not None and deployment.service == "seat" and deployment.launch == "native"
    assert deployment.compose_files == (str(compose),) and deployment.compose_version
    boots = sorted((r for r in _records(out) if r["kind"] == "boot"), key=lambda b: b["order"])
    assert {b["arm"] for b in boots} == ARMS and [b["order"] for b in boots] == [1, 2, 3]  # drawn order
    for boot in boots:
        assert boot["status"] == "ready", boot["error"]
        assert boot["argv"][:3] == [python, "-m", "vllm.entrypoints.openai.api_server"]
        assert [s["argv"] for s in boot["before_boot"]] == [["sync"]]
        assert boot["before_boot"][0]["exit_code"] == 0
        assert boot["memory_check"]["passed"] and boot["memory_check"]["required_gib"] == 0.5
        assert boot["host_state"]["mem_available_gib"] >= 0.5 and boot["host_state"]["load_1m"] is not None
    speculative = {b["arm"]: "--speculative-config" in b["argv"] for b in boots}
    assert speculative == {"off_A": False, "draft_copy_k2": True, "off_B": False}


def test_the_gate_accepts_the_evidence_for_its_compose_file_by_hash(collected: tuple[Path, Path]) -> None:
    """Fresh by its argv and by hash. Whether `off` is then supported is the decision's to say (only
    keep_mtp_disabled supports it; a tiny campaign on a loaded 2-core machine often drifts)."""
    out, compose = collected
    result = gate(out, None, None, serve_config=str(compose), service="seat")
    stale = [r for r in result.reasons if r.startswith(("stale evidence", "cannot tell"))]
    assert not stale, result.reasons
    assert any(r.startswith("evidence is fresh: ") for r in result.reasons), result.reasons
    assert any("has the same sha256 without its speculative flags" in r for r in result.reasons)
    assert result.supported is (result.decision == "keep_mtp_disabled"), result.reasons


def test_the_gate_refuses_it_for_a_changed_non_speculative_flag(
    collected: tuple[Path, Path], tmp_path: Path
) -> None:
    out, compose = collected
    python, models = real_server(VLLM_ENV)
    changed = _deploy(
        tmp_path,
        python,
        models,
        compose.parent.parent / "vllm-cache",
        ('"--max-model-len", "1024"', '"--max-model-len", "512"'),
    )
    result = gate(out, None, None, serve_config=str(changed), service="seat")
    assert not result.supported
    assert any(
        r.startswith("stale evidence, --max-model-len: evidence 1024 vs proposed 512") for r in result.reasons
    )
    assert any("they differ in command only" in r for r in result.reasons), result.reasons


def test_every_arm_sends_the_same_prompts_in_the_same_order(collected: tuple[Path, Path]) -> None:
    out, _ = collected
    timed = [r for r in _records(out) if r["kind"] == "request" and not r["warmup"]]
    assert {r["category"] for r in timed} == CATEGORIES
    assert all(r["status"] == "ok" and r["workload"] == f"mixed.{r['category']}" for r in timed)
    orders: dict[str, list[tuple[Any, ...]]] = {}
    for r in timed:
        key = (r["workload"], r["concurrency"], r["rep"], r["stream"], r["prompt_index"])
        orders.setdefault(r["arm"], []).append(key)
    assert set(orders) == ARMS
    first = sorted(orders["off_A"])
    assert all(sorted(o) == first for o in orders.values())
    chat = [r for r in timed if r["category"] == "chat"]
    assert all(r["prompt_tokens"] and r["completion_tokens"] == 32 for r in chat)  # chat turns served
    campaign = json.loads((out / "campaign.json").read_text())
    assert {w["category"] for w in campaign["workloads"]} == CATEGORIES
    assert len({w["dataset_sha256"] for w in campaign["workloads"]}) == 1


def test_the_decision_compares_and_reports_each_category(collected: tuple[Path, Path]) -> None:
    out, _ = collected
    decision = json.loads(decide_directory(out).json_text)
    cells = {c["workload"] for c in decision["comparisons"] if c["arm"] == "draft_copy_k2"}
    assert cells == {f"mixed.{c}" for c in CATEGORIES}
    found = {c["category"]: c for c in decision["categories"]}
    assert set(found) == CATEGORIES
    for c in found.values():  # a copy of the target drafts right: high acceptance in every category
        assert c["arm"] == "draft_copy_k2" and c["draft_tokens"]
        assert c["ci_low"] <= c["acceptance_rate"] <= c["ci_high"] and c["ci_low"] > 0.5
        assert c["outcome"] in {"better", "worse", "equivalent", "below_min_effect", "inconclusive"}
    latency = {(x["arm"], x["workload"], x["concurrency"], x["metric"]): x for x in decision["latency"]}
    for arm in ARMS:
        for metric in ("ttft_ms", "itl_ms", "e2e_ms"):
            every = latency[(arm, None, None, metric)]
            assert 0 < every["p50"] <= every["p90"] <= every["p99"]
            assert all((arm, f"mixed.{c}", 2, metric) in latency for c in CATEGORIES)
