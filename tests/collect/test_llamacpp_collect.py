"""The collector against a llama.cpp-shaped server (tests/fakellama.py): what collect reads of llama-server.

Readiness that also asks /slots whether the arm speculates, the slots a concurrency needs, the depth in
force once a draft was verified, per-request log lines matched to their runs (the cumulative statistics
lines left out), the KV pool from the log, the server's own per-request timing, no reused connections,
and what llama.cpp does not show said once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.formats.results_io import load_results

from ..conftest import wait_for_request
from .conftest import collect_running, free_port, run_collect

FAKE = Path(__file__).resolve().parent.parent / "fakellama.py"
CLI = [sys.executable, "-m", "mtpverdict"]
Arms = tuple[tuple[str, int | None, list[str]], ...]  # (name, k, serve_args)
DRAFT_K2 = ["--spec-type", "draft-simple", "--spec-draft-model", "copy.gguf", "--spec-draft-n-max", "2"]
RANDOM_K2 = ["--spec-type", "draft-simple", "--spec-draft-model", "random.gguf", "--spec-draft-n-max", "2"]
EXIT_BOOTS_FAILED = 5  # README: collect ran to the end, but a boot failed or was refused


@pytest.fixture
def port() -> int:
    return free_port()


def llama_campaign(
    port: int,
    arms: Arms = (
        ("off_A", None, []),
        ("draft_k2", 2, DRAFT_K2),
        ("off_B", None, []),
    ),
    *,
    shared: tuple[str, ...] = ("-c", "4096", "--parallel", "4", "--metrics", "-lv", "4"),
    concurrency: str = "[1, 4]",
    reps: int = 2,
) -> str:
    """A campaign on the fake llama-server: (name, k, serve_args) arms sharing the `shared` flags."""
    blocks = []
    for name, k, serve in arms:
        role = f'role = "candidate"\nmethod = "draft_model"\nk = {k}' if k else 'role = "control"'
        blocks.append(f'[[arms]]\nname = "{name}"\n{role}\nserve_args = {json.dumps(serve)}')
    command = [sys.executable, str(FAKE), "-m", "target.gguf", "--port", "{port}", *shared, "{spec}"]
    return f"""
campaign_version = 1
id = "fake-llama"
title = "collector test against the llama.cpp-shaped fake server"
concurrency = {concurrency}
reps = {reps}
warmup_runs = 1

[server]
mode = "launch"
command = {json.dumps(command)}
port = {port}
boot_timeout = 30
grace_seconds = 5
stall_seconds = 5
engine = "llamacpp"

{chr(10).join(blocks)}

[[workloads]]
id = "short"
prompt = "Write about rivers."
max_tokens = 16
expect_identical = true
ignore_eos = true

[[coherence]]
id = "words"
prompt = "Say a word."
expected = " "
"""


def _collect(tmp: Path, text: str, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    campaign = tmp / "campaign.toml"
    campaign.write_text(text)
    out = tmp / "results"
    done = run_collect([*CLI, "collect", str(campaign), "--out", str(out), *extra], out, timeout=240)
    return done, out


def _records(out: Path, kind: str) -> list[dict[str, Any]]:
    lines = (out / "records.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def _boots(out: Path) -> dict[str, dict[str, Any]]:
    return {b["arm"]: b for b in _records(out, "boot")}


@pytest.mark.slow
def test_a_llamacpp_campaign_records_depth_kv_timing_and_acceptance_on_every_surface(
    tmp_path: Path, port: int
) -> None:
    done, out = _collect(tmp_path, llama_campaign(port))
    assert done.returncode == 0, done.stderr + done.stdout
    boots = _boots(out)
    assert {a: b["status"] for a, b in boots.items()} == dict.fromkeys(
        ("off_A", "draft_k2", "off_B"), "ready"
    )
    # depth in force: 0 where /slots says no slot speculates, the per-position series once drafted
    assert {a: b["observed_k"] for a, b in boots.items()} == {"off_A": 0, "draft_k2": 2, "off_B": 0}
    # the pool from the log's llama_kv_cache line (cells x streams); the window from /props
    assert all(b["kv_cache_tokens"] == 4096 and b["max_model_len"] == 1024 for b in boots.values())
    assert all(b["slots"] == 4 for b in boots.values())  # /props total_slots: --parallel 4
    assert all(b["engine_version"] == "1 (0c1e570)" for b in boots.values())
    requests = [r for r in _records(out, "request") if not r["warmup"]]
    assert len(requests) == 3 * 2 * (1 + 4) and all(r["status"] == "ok" for r in requests)
    # llama.cpp's timings.prompt_ms / predicted_ms are the server's own TTFT and decode time
    assert all(r["server_ttft_ms"] >= 0 and r["server_generation_ms"] > 0 for r in requests)
    assert all("server_queue_ms" not in r for r in requests)  # llama.cpp does not report it
    drafted = [r for r in requests if r["arm"] == "draft_k2"]
    assert all(r["spec_draft_tokens"] > 0 for r in drafted)
    acceptance = _records(out, "acceptance")
    log = [r for r in acceptance if r["source"] == "log"]
    metrics = [r for r in acceptance if r["source"] == "metrics" and r["arm"] == "draft_k2"]
    assert {r["arm"] for r in log} == {"draft_k2"}
    # one log record per measured run, scoped to it: warm-up and check requests set aside, the
    # cumulative `statistics` lines left out
    assert all(r["scoped"] == "run" for r in log) and len(log) == len(metrics) == 2 * 2
    for surface in (log, metrics):
        per_run = {(r["concurrency"], r["rep"]): (r["draft_tokens"], r["accepted_tokens"]) for r in surface}
        sums: Counter[tuple[int, int, str]] = Counter()
        for r in drafted:
            sums[(r["concurrency"], r["rep"], "d")] += r["spec_draft_tokens"]
            sums[(r["concurrency"], r["rep"], "a")] += r["spec_accepted_tokens"]
        assert per_run == {(c, rep): (sums[(c, rep, "d")], sums[(c, rep, "a")]) for c, rep in per_run}
    single = next(r for r in log if r["concurrency"] == 1)
    assert single["mean_acceptance_length"] >= 1 and len(single["per_position_rate"]) == 2
    together = next(r for r in log if r["concurrency"] == 4)
    assert together["per_position_rate"] is None and "4 requests" in together["note"]
    load_results(out)  # the directory loads


def test_a_candidate_whose_server_does_not_speculate_is_refused(tmp_path: Path, port: int) -> None:
    """llama-server serves without speculation when it cannot build the speculative context (here: a
    draft type without a draft model): /health is ok, /slots says no slot speculates."""
    arms: Arms = (
        ("off_A", None, []),
        ("no_draft_k2", 2, ["--spec-type", "draft-simple", "--spec-draft-n-max", "2"]),
    )
    done, out = _collect(tmp_path, llama_campaign(port, arms, reps=1, concurrency="[1]"))
    assert done.returncode == EXIT_BOOTS_FAILED, done.stderr + done.stdout
    boots = _boots(out)
    assert boots["off_A"]["status"] == "ready"
    refused = boots["no_draft_k2"]
    assert refused["status"] == "failed" and "/slots" in refused["error"], refused["error"]
    assert not [r for r in _records(out, "request") if r["arm"] == "no_draft_k2"]


def test_a_control_whose_server_speculates_is_refused(tmp_path: Path, port: int) -> None:
    shared = ("--parallel", "4", "--metrics", "-lv", "4", *DRAFT_K2)  # speculation in the shared command
    done, out = _collect(
        tmp_path,
        llama_campaign(port, (("off_A", None, []),), shared=shared, reps=1, concurrency="[1]"),
        "--allow-argv-mismatch",
    )
    assert done.returncode == EXIT_BOOTS_FAILED, done.stderr + done.stdout
    boot = _boots(out)["off_A"]
    assert boot["status"] == "failed" and "speculates" in boot["error"], boot["error"]


def test_fewer_slots_than_the_concurrency_is_refused(tmp_path: Path, port: int) -> None:
    shared = ("-c", "2048", "--parallel", "2", "--metrics", "-lv", "4")
    done, out = _collect(tmp_path, llama_campaign(port, (("off_A", None, []),), shared=shared, reps=1))
    assert done.returncode == EXIT_BOOTS_FAILED, done.stderr + done.stdout
    boot = _boots(out)["off_A"]
    assert boot["status"] == "failed" and "--parallel" in boot["error"] and "2 slots" in boot["error"]


def test_a_depth_other_than_the_arms_is_refused_once_a_draft_shows_it(tmp_path: Path, port: int) -> None:
    arms: Arms = (
        ("off_A", None, []),
        ("draft_k3", 2, [*DRAFT_K2[:-1], "{depth}"]),
    )  # the arm says 2, the server drafts 3: a value only known at run time, so no check before the boot
    done, out = _collect(
        tmp_path, llama_campaign(port, arms, reps=1), "--allow-argv-mismatch", "--var", "depth=3"
    )
    assert done.returncode == EXIT_BOOTS_FAILED, done.stderr + done.stdout
    boot = _boots(out)["draft_k3"]
    assert boot["status"] == "failed" and boot["observed_k"] == 3, boot
    assert "does not match the arm (k=2)" in boot["error"]
    assert not [r for r in _records(out, "request") if r["arm"] == "draft_k3" and not r["warmup"]]


def test_no_connection_is_reused(tmp_path: Path, port: int) -> None:
    """A server may close a kept-alive connection as the client reuses it (llama-server closes idle ones
    after 5 s, and after 100 requests): every request opens its own."""
    shared = ("--parallel", "4", "--metrics", "-lv", "4", "--fake-fault", "drop-reused")
    done, out = _collect(tmp_path, llama_campaign(port, shared=shared, reps=1))
    assert done.returncode == 0, done.stderr + done.stdout
    assert {b["status"] for b in _boots(out).values()} == {"ready"}
    assert all(r["status"] == "ok" for r in _records(out, "request"))
    metrics = [r for r in _records(out, "acceptance") if r["source"] == "metrics" and r["arm"] == "draft_k2"]
    assert len(metrics) == 2 and all(r.get("status", "ok") == "ok" for r in metrics)


def test_what_llamacpp_does_not_show_is_said_once_and_fails_nothing(tmp_path: Path, port: int) -> None:
    """At the default verbosity (3) the KV pool line is not printed; without /slots the arm's
    speculation cannot be confirmed before a draft. Missing evidence, said once, every boot ready."""
    shared = ("--parallel", "4", "--metrics", "--no-slots")
    done, out = _collect(tmp_path, llama_campaign(port, shared=shared, reps=1))
    assert done.returncode == 0, done.stderr + done.stdout
    boots = _boots(out)
    assert {b["status"] for b in boots.values()} == {"ready"}
    assert all(b["kv_cache_tokens"] is None for b in boots.values())
    assert boots["draft_k2"]["observed_k"] == 2  # still seen on /metrics once drafted
    assert done.stdout.count("KV pool") == 1, done.stdout
    assert done.stdout.count("/slots") == 1, done.stdout
    log = [r for r in _records(out, "acceptance") if r["source"] == "log"]
    assert log and all(r["scoped"] == "run" for r in log)  # per-request lines print at level 3


@pytest.mark.slow
def test_a_killed_collect_resumes_with_the_interrupted_boots_lines_in_their_runs(
    tmp_path: Path, port: int
) -> None:
    """The start file keeps the request groups sent so far, so the resume places the interrupted boot's
    per-request lines in their runs as the boot itself would have (the run in flight stays a window)."""
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(llama_campaign(port, reps=4))
    out = tmp_path / "results"
    argv = [*CLI, "collect", str(campaign), "--out", str(out)]
    popen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with collect_running(popen, out) as proc:  # a failed assertion leaves no server behind
        wait_for_request(out, "draft_k2", timed=True, proc=proc)
        deadline = time.monotonic() + 60
        while len([r for r in _records(out, "acceptance") if r["arm"] == "draft_k2"]) < 3:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        proc.kill()
        proc.wait()
        done = run_collect([*argv, "--resume"], out, timeout=240)
    assert done.returncode == 0, done.stderr + done.stdout
    boots = {(b["arm"], b["boot"]): b for b in _records(out, "boot")}
    assert boots[("draft_k2", 1)]["status"] == "interrupted" and boots[("draft_k2", 2)]["status"] == "ready"
    acceptance = [r for r in _records(out, "acceptance") if r["arm"] == "draft_k2" and r["boot"] == 1]
    metrics = {(r["concurrency"], r["rep"]): r for r in acceptance if r["source"] == "metrics"}
    log = {
        (r["concurrency"], r["rep"]): r for r in acceptance if r["source"] == "log" and r["scoped"] == "run"
    }
    assert len(metrics) >= 3 and set(log) == set(metrics), (sorted(log), sorted(metrics))
    for run, found in log.items():
        assert (found["draft_tokens"], found["accepted_tokens"]) == (
            metrics[run]["draft_tokens"],
            metrics[run]["accepted_tokens"],
        )
    assert boots[("draft_k2", 1)]["observed_k"] == 2  # learned after the warm-up, kept in the start file
