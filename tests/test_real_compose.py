"""End to end against a real vLLM server on the CPU, its arms derived from the seat's compose service.

collectors/vllm-cpu/compose.yaml is filled with this machine's paths (as a deployment fills its own)
and compose-campaign.toml collected from it, launched natively, with `sync` before every boot and
the memory check, both recorded per boot with the host's state. The gate then accepts the evidence
for that compose file (the same service but for speculation, said by hash) and refuses it for the
file with one non-speculative flag changed. Needs what tests/test_real_server.py needs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mtpverdict.formats.results_io import load_results
from mtpverdict.gate.run import gate

from .conftest import ROOT, VLLM_ENV, real_server

pytestmark = pytest.mark.real_server
HERE = ROOT / "collectors" / "vllm-cpu"


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
    shutil.copyfile(HERE / "compose-campaign.toml", work / "deploy" / "campaign.toml")
    out = work / "results"
    argv = [sys.executable, "-m", "mtpverdict", "collect", str(work / "deploy" / "campaign.toml")]
    done = subprocess.run(
        [*argv, "--out", str(out), "--var", f"models={models}"],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    sys.stdout.write(done.stdout[-3000:])
    assert done.returncode == 0, done.stderr[-3000:]
    return out, compose


def test_the_arms_came_from_the_compose_service_with_the_discipline_recorded(
    collected: tuple[Path, Path],
) -> None:
    out, compose = collected
    python, _ = real_server(VLLM_ENV)
    results = load_results(out)
    deployment = results.campaign.deployment
    assert deployment is not None and deployment.service == "seat" and deployment.launch == "native"
    assert deployment.compose_files == (str(compose),) and deployment.compose_version
    boots = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    boots = [b for b in boots if b["kind"] == "boot"]
    assert [b["arm"] for b in boots] == ["off_A", "draft_random_k2", "off_B"]
    for boot in boots:
        assert boot["status"] == "ready", boot["error"]
        assert boot["argv"][:3] == [python, "-m", "vllm.entrypoints.openai.api_server"]
        assert [s["argv"] for s in boot["before_boot"]] == [["sync"]]
        assert boot["before_boot"][0]["exit_code"] == 0
        assert boot["memory_check"]["passed"] and boot["memory_check"]["required_gib"] == 0.5
        assert boot["host_state"]["mem_available_gib"] >= 0.5 and boot["host_state"]["load_1m"] is not None
    assert "--speculative-config" in boots[1]["argv"] and "--speculative-config" not in boots[0]["argv"]


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
