"""A real vLLM server measured from a loaded client, with a SIGTERM on the way: the server's clock decides.

One small campaign from collectors/vllm-cpu/campaign.toml (off_A and n-gram k2, one boot each, no
quality suites), its serve command without --enable-per-request-metrics, so collect must turn the
server's clock on itself (vLLM 0.32). A process burning a core runs beside collect from start to end,
as on the loaded 2-core machine where the controls' single-token streams were read in bursts and every
comparison was refused. Collect is sent SIGTERM while the n-gram arm's server starts (a CI job
cancelled): it must stop that server, record the boot interrupted and exit 143; `--resume` must finish
without touching a byte already written, and the decision must compare the arms on the server's clock
with nothing refused for missingness. Needs MTPVERDICT_VLLM_PYTHON and MTPVERDICT_MODELS
(collectors/vllm-cpu/ci.sh); skipped without them unless MTPVERDICT_REQUIRE_REAL_SERVER is set.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from mtpverdict.decide import decide_directory
from mtpverdict.formats.results_io import load_results

from .collect.conftest import free_port
from .conftest import ROOT, VLLM_ENV, collect_running, real_server, run_collect

pytestmark = pytest.mark.real_server
CAMPAIGN = ROOT / "collectors" / "vllm-cpu" / "campaign.toml"
EXIT_TERMINATED = 143  # README, Exit codes
FLAG = "--enable-per-request-metrics"


def _campaign(path: Path) -> Path:
    doc: Any = tomlkit.parse(CAMPAIGN.read_text())
    doc["id"] = "vllm-cpu-load"
    doc["title"] = "Tiny Llama on vLLM 0.32 CPU, a loaded client: off_A and ngram k2"
    doc["concurrency"] = [1, 2]
    doc["reps"] = 2
    doc["server"]["command"] = [a for a in doc["server"]["command"] if a != FLAG]
    doc["server"]["settle_seconds"] = 0
    doc["server"]["port"] = free_port()  # another real-server stage may hold the campaign's own port
    doc["arms"] = [a for a in doc["arms"] if a["name"] in ("off_A", "ngram_k2")]
    for key in ("coherence", "likelihood"):
        doc.pop(key, None)
    path.write_text(tomlkit.dumps(doc))
    return path


@pytest.fixture(scope="module")
def burner() -> Iterator[None]:
    """A process burning a core beside collect, for the whole module."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def _wait_for_launch(out: Path, arm: str, proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The pid of the arm's server once collect has launched it (from its start file)."""
    path = out / "raw" / "boots" / f"{arm}-boot1.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"collect ended (exit {proc.returncode}) before {arm}'s server started")
        try:
            pid = json.loads(path.read_text()).get("pid")
        except (OSError, ValueError):
            pid = None
        if isinstance(pid, int):
            return pid
        time.sleep(0.2)
    pytest.fail(f"{arm}'s server did not start within {timeout} s")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory, burner: None) -> tuple[Path, dict[str, Any]]:
    python, models = real_server(VLLM_ENV)
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("load"))
    out = work / "load-results"
    if out.exists():
        shutil.rmtree(out)
    campaign = _campaign(tmp_path_factory.mktemp("campaign") / "load-campaign.toml")
    argv = [sys.executable, "-m", "mtpverdict", "collect", str(campaign), "--out", str(out)]
    argv += [
        "--var",
        f"python={python}",
        "--var",
        f"models={models}",
        "--var",
        f"cache={work / 'vllm-cache'}",
    ]
    seen: dict[str, Any] = {}
    with (work / "collect-terminated.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        with collect_running(proc, out, keep_servers=True):  # whether SIGTERM stopped it is the question
            seen["server"] = _wait_for_launch(out, "ngram_k2", proc, timeout=1200)
            time.sleep(5)  # mid-boot: the server is loading the model
            proc.send_signal(signal.SIGTERM)
            seen["returncode"] = proc.wait(timeout=120)
    seen["server_gone"] = _gone(seen["server"])
    seen["log"] = (work / "collect-terminated.log").read_text(errors="replace")
    seen["records"] = (out / "records.jsonl").read_bytes()
    done = run_collect([*argv, "--resume"], out, expect=0, timeout=1800)
    sys.stdout.write(done.stdout[-3000:])
    seen["resume"] = done.stdout
    return out, seen


def test_sigterm_mid_boot_stops_the_server_and_resume_loses_nothing(
    collected: tuple[Path, dict[str, Any]],
) -> None:
    out, seen = collected
    assert seen["returncode"] == EXIT_TERMINATED, seen["log"][-2000:]
    assert "terminated (SIGTERM)" in seen["log"] and "Traceback" not in seen["log"]
    assert seen["server_gone"], "the server outlived the SIGTERM"
    assert (out / "records.jsonl").read_bytes().startswith(seen["records"])
    results = load_results(out)  # a duplicate record or a torn line would not load
    boots = {(b.arm, b.boot): b.status for b in results.boots.itertuples()}
    assert boots == {("off_A", 1): "ready", ("ngram_k2", 1): "interrupted", ("ngram_k2", 2): "ready"}


def test_a_loaded_client_is_not_refused_on_the_servers_clock(collected: tuple[Path, dict[str, Any]]) -> None:
    out, seen = collected
    assert "collect added --enable-per-request-metrics to every arm alike" in seen["log"]
    recorded = json.loads((out / "campaign.json").read_text())
    assert all(FLAG in arm["serve_argv"] for arm in recorded["arms"])
    run = decide_directory(out)
    (out / "decision.json").write_text(run.json_text)
    decision = run.decision
    assert {m.timing for m in decision.missingness} == {"server"}
    assert decision.refused == ()
    compared = {(c.arm, c.metric) for c in decision.comparisons}
    assert ("ngram_k2", "decode_tps") in compared
    (control,) = [c for c in decision.controls if c.name == "missingness"]
    sys.stdout.write(f"\n{control.detail}\n")  # how many streams the loaded client read in a burst
    assert "the client's clock beside it" in control.detail
    if str(decision.decision) == "inconclusive":
        assert decision.next_step is not None
