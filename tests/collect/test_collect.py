"""The collector end to end against the fake server: records, controls, faults, resume, nothing lost."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mtpverdict.collect import Collector, Event, load_campaign_file, measure
from mtpverdict.collect import client as cl
from mtpverdict.collect.measure import Measurement
from mtpverdict.collect.redact import Redactor
from mtpverdict.collect.started import started_path, started_sent
from mtpverdict.decide import decide_directory
from mtpverdict.errors import CollectError
from mtpverdict.formats.looks import read_looks
from mtpverdict.formats.results_io import ResultsWriter, load_results
from mtpverdict.formats.results_io.write import encoded
from mtpverdict.stats.layout import round_order

from ..conftest import wait_for_request
from .conftest import campaign_text, collect_running, interruptible, run_collect

CLI = [sys.executable, "-m", "mtpverdict"]
EXIT_BOOTS_FAILED = 5  # README: collect ran to the end, but a boot failed or was refused


def _write(tmp: Path, text: str) -> Path:
    path = tmp / "campaign.toml"
    path.write_text(text)
    return path


def _collect(
    campaign: Path, out: Path, *extra: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return run_collect([*CLI, "collect", str(campaign), "--out", str(out), *extra], out, timeout=timeout)


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def _port_free(port: int) -> bool:
    """Nothing listens on the port any more: no server outlived its boot."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _start_collect(campaign: Path, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CLI, "collect", str(campaign), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.slow
def test_a_full_campaign_records_every_surface_and_decides(tmp_path: Path, port: int) -> None:
    out = tmp_path / "results"
    # the fake model emits EOS after 3 tokens unless told to ignore it: the identity probe must ignore it
    done = _collect(_write(tmp_path, campaign_text(port, eos_after=3)), out)
    assert done.returncode == 0, done.stderr
    assert "draft_random_k2 boot 1: ready" in done.stdout and "acceptance 0/" in done.stdout
    results = load_results(out)
    recs = _records(out)
    boots = [r for r in recs if r["kind"] == "boot"]
    plan = load_campaign_file(tmp_path / "campaign.toml")
    drawn = round_order([a.name for a in plan.arms], seed=plan.order_seed, device=0, round_=1)
    assert [(b["arm"], b["order"], b["status"]) for b in boots] == [
        (arm, i, "ready") for i, arm in enumerate(drawn, 1)
    ]
    assert {b["observed_k"] for b in boots} == {0, 2}
    assert all(b["kv_cache_tokens"] == 100_000 and b["max_model_len"] == 1024 for b in boots)
    assert all(b["engine_version"] == "0.0.0-fake" for b in boots)
    requests = [r for r in recs if r["kind"] == "request"]
    assert len(requests) == 4 * (1 + 2 * (1 + 4))  # warm-up + 2 reps at c=1 and c=4
    timed = [r for r in requests if not r["warmup"]]
    assert all(
        r["nonce"] and r["completion_tokens"] == 24 and r["t_start"] <= r["t_first"] <= r["t_end"]
        for r in timed
    )
    acc = [r for r in recs if r["kind"] == "acceptance"]
    metrics = [r for r in acc if r["source"] == "metrics"]
    assert {r["arm"] for r in metrics} == {"ngram_k2", "draft_random_k2"}
    assert all(r["scoped"] == "run" and r["raw"].startswith("raw/metrics/") for r in metrics)
    assert sum(r["accepted_tokens"] for r in metrics if r["arm"] == "draft_random_k2") == 0
    assert any(r["source"] == "log" and r["raw"].startswith("raw/logs/") for r in acc)
    identity = {
        r["arm"]: r["output_sha256"]
        for r in recs
        if r["kind"] == "coherence" and r["case"] == "identity-chat"
    }
    assert len(identity) == 4 and len(set(identity.values())) == 1
    probes = [r["output"] for r in recs if r["kind"] == "coherence" and r["case"] == "identity-chat"]
    assert all(len(text.split()) == 24 for text in probes)  # max_tokens compared, not 3
    assert all(r["mean_nll"] > 0 for r in recs if r["kind"] == "likelihood")
    assert results.counts()["request"]["off_A"] == 11
    decision = json.loads(decide_directory(out).json_text)
    verdicts = {a["name"]: a["verdict"] for a in decision["arms"]}
    assert verdicts["draft_random_k2"] == "void"
    blind = next(c for c in decision["controls"] if c["name"] == "blind")
    assert blind["status"] == "pass"  # aggregate throughput rises with concurrency
    ngram = next(c for c in decision["comparisons"] if c["arm"] == "ngram_k2" and c["metric"] == "decode_tps")
    assert ngram["ratio"] > 1.5
    assert _port_free(port)


@pytest.mark.slow
def test_sigkill_of_collect_resumes_without_duplicates(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, campaign_text(port, reps=2, tps=150))
    out = tmp_path / "results"
    with collect_running(_start_collect(campaign, out), out) as proc:  # no server outlives a failure
        wait_for_request(out, "ngram_k2", proc=proc)  # kill it in the middle of the second arm's boot
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert load_results(out)  # valid even right after the kill
        resumed = _collect(campaign, out, "--resume")
        assert resumed.returncode == 0, resumed.stderr
    results = load_results(out)  # loads: no duplicate record, every line whole
    boots = {(b["arm"], b["boot"]): b for b in results.boots.to_dict("records")}
    assert ("ngram_k2", 1) in boots and "interrupted" in str(boots[("ngram_k2", 1)]["note"])
    interrupted = boots[("ngram_k2", 1)]  # keeps what was known once its server was ready
    assert interrupted["ready_seconds"] > 0 and interrupted["kv_cache_tokens"] == 100_000
    assert interrupted["observed_k"] == 2
    assert ("ngram_k2", 2) in boots and boots[("ngram_k2", 2)]["status"] == "ready"
    assert sorted(a for a, _ in boots) == sorted(
        ["off_A", "ngram_k2", "ngram_k2", "draft_random_k2", "off_B"]
    )
    assert len(set(results.boots["order"])) == len(results.boots)
    again = _collect(campaign, out, "--resume")
    assert again.returncode == 0 and "0 boots" in again.stdout
    assert _port_free(port)


@pytest.mark.slow
def test_a_server_killed_mid_run_is_a_failed_boot_and_retry_failed_boots_it_again(
    tmp_path: Path, port: int
) -> None:
    campaign = _write(tmp_path, campaign_text(port, reps=2, tps=150))
    out = tmp_path / "results"
    with collect_running(_start_collect(campaign, out), out) as proc:  # no server outlives a failure
        wait_for_request(out, "ngram_k2", proc=proc)
        started = json.loads((out / "raw" / "boots" / "ngram_k2-boot1.json").read_text())
        os.kill(started["pid"], signal.SIGKILL)  # the server dies; collect goes on with the next arm
        assert proc.wait(timeout=180) == EXIT_BOOTS_FAILED
        before = (out / "records.jsonl").read_bytes()
        results = load_results(out)
        boots = results.boots.set_index("arm")
        assert boots.loc["ngram_k2", "status"] == "failed" and boots.loc["off_B", "status"] == "ready"
        assert (results.requests["arm"] == "ngram_k2").any()  # what ran before the kill is kept
        plain = _collect(campaign, out, "--resume")
        assert plain.returncode == 0 and "0 boots" in plain.stdout  # a failed boot is a settled boot
        retried = _collect(campaign, out, "--resume", "--retry-failed")
        assert retried.returncode == 0, retried.stderr
    after = (out / "records.jsonl").read_bytes()
    assert after.startswith(before)  # nothing collected before was rewritten or lost
    final = load_results(out)
    rows = {(b.arm, b.boot): b.status for b in final.boots.itertuples()}
    assert rows[("ngram_k2", 1)] == "failed" and rows[("ngram_k2", 2)] == "ready"
    assert len(rows) == 5 and len(set(final.boots["order"])) == 5
    decision = json.loads(decide_directory(out).json_text)
    ngram = next(a for a in decision["arms"] if a["name"] == "ngram_k2")
    boot_ok = next(r for r in ngram["rules"] if r["kind"] == "boot_ok")
    assert boot_ok["passed"] is False and "1 of 2 boots failed" in boot_ok["detail"]
    assert _port_free(port)


@pytest.mark.slow
def test_sigint_leaves_a_valid_directory_and_exit_130(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, campaign_text(port, tps=150))
    out = tmp_path / "results"
    popen = subprocess.Popen(
        [*CLI, "collect", str(campaign), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    with collect_running(popen, out) as proc:  # reaped, and no server left, whatever happens
        wait_for_request(out, "off_A", proc=proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err
    load_results(out)
    assert _collect(campaign, out, "--resume").returncode == 0
    results = load_results(out)
    assert set(results.boots[results.boots["status"] == "ready"]["arm"]) == {
        "off_A",
        "ngram_k2",
        "draft_random_k2",
        "off_B",
    }
    assert _port_free(port)


@pytest.mark.parametrize(
    ("fault", "expect"),
    [
        ("die:4", "the server exited"),
        ("5xx:3", "HTTP 500"),
        ("stall:3", "stalled"),
        ("malformed:3", "malformed SSE"),
    ],
)
@pytest.mark.slow
def test_server_faults_are_recorded_and_the_campaign_goes_on(
    tmp_path: Path, port: int, fault: str, expect: str
) -> None:
    campaign = _write(tmp_path, campaign_text(port, faults={"ngram_k2": fault}, reps=1, concurrency="[1, 2]"))
    out = tmp_path / "results"
    done = _collect(campaign, out, "--allow-argv-mismatch")
    assert done.returncode == (EXIT_BOOTS_FAILED if fault.startswith("die") else 0), done.stderr
    results = load_results(out)
    req = results.requests
    errors = req[(req["arm"] == "ngram_k2") & (req["status"] == "error")]
    boots = results.boots.set_index("arm")
    found = " ".join(str(e) for e in errors["error"]) + " " + str(boots.loc["ngram_k2", "error"])
    assert expect in found
    if fault.startswith("die"):
        assert boots.loc["ngram_k2", "status"] == "failed"
    assert boots.loc["off_B", "status"] == "ready"  # the campaign went on with the next arms
    assert "Harness parity not held" in (out / "campaign.json").read_text()
    assert _port_free(port)


def test_a_counter_reset_voids_its_window(tmp_path: Path, port: int) -> None:
    campaign = _write(
        tmp_path, campaign_text(port, faults={"ngram_k2": "reset:3"}, reps=2, concurrency="[1]")
    )
    out = tmp_path / "results"
    assert _collect(campaign, out, "--allow-argv-mismatch").returncode == 0
    acc = load_results(out).acceptance
    void = acc[(acc["arm"] == "ngram_k2") & (acc["status"] == "void")]
    assert len(void) == 1 and "went down" in void["error"].iloc[0]


def test_missing_metrics_and_a_failed_boot(tmp_path: Path, port: int) -> None:
    campaign = _write(
        tmp_path,
        campaign_text(
            port,
            faults={"ngram_k2": "no-metrics:0", "draft_random_k2": "boot-fail"},
            reps=1,
            concurrency="[1]",
        ),
    )
    out = tmp_path / "results"
    assert _collect(campaign, out, "--allow-argv-mismatch").returncode == EXIT_BOOTS_FAILED
    results = load_results(out)
    boots = results.boots.set_index("arm")
    assert boots.loc["ngram_k2", "status"] == "ready" and boots.loc["ngram_k2", "observed_k"] != 2
    metrics_acc = results.acceptance[
        (results.acceptance["arm"] == "ngram_k2") & (results.acceptance["source"] == "metrics")
    ]
    assert metrics_acc.empty
    assert boots.loc["draft_random_k2", "status"] == "failed"
    assert "injected boot failure" in str(boots.loc["draft_random_k2", "error"])


@pytest.mark.slow
def test_a_busy_port_fails_the_boot_instead_of_measuring_another_server(tmp_path: Path, port: int) -> None:
    text = campaign_text(port, reps=1, concurrency="[1]").replace("grace_seconds = 5", "grace_seconds = 1")
    out = tmp_path / "results"
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen(16)
        done = _collect(_write(tmp_path, text), out)
    assert done.returncode == EXIT_BOOTS_FAILED, done.stderr
    results = load_results(out)
    assert (results.boots["status"] == "failed").all() and len(results.boots) == 4
    assert all("already in use" in str(e) for e in results.boots["error"])
    assert results.requests.empty


@pytest.mark.slow
def test_harness_parity_and_k_mismatch_are_refused(tmp_path: Path, port: int) -> None:
    text = campaign_text(port, faults={"ngram_k2": "5xx:1000"}, reps=1, concurrency="[1]")
    campaign = _write(tmp_path, text)
    refused = _collect(campaign, tmp_path / "r1")
    assert refused.returncode == 2 and "not a speculative flag" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "r1").exists()
    wrong_k = text.replace('method = "ngram"\nk = 2', 'method = "ngram"\nk = 3')
    out = tmp_path / "r2"
    assert _collect(_write(tmp_path, wrong_k), out, "--allow-argv-mismatch").returncode == EXIT_BOOTS_FAILED
    boot = load_results(out).boots.set_index("arm").loc["ngram_k2"]
    assert boot["status"] == "failed" and "does not match the arm (k=3)" in boot["error"]


@pytest.mark.slow
def test_a_full_disk_stops_cleanly_and_resume_completes(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = load_campaign_file(_write(tmp_path, campaign_text(port, reps=1, concurrency="[1]")))
    out = tmp_path / "results"
    real_write = os.write
    calls = {"n": 0}

    def full_disk(fd: int, data: bytes) -> int:
        if data.startswith(b'{"') and data.endswith(b"\n"):
            calls["n"] += 1
            if calls["n"] > 9:
                raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr("mtpverdict.formats.results_io.write.os.write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        Collector(
            campaign, out, variables={}, resume=False, allow_argv_mismatch=False, on_event=lambda e: None
        ).run()
    kept = load_results(out)
    tables = (kept.requests, kept.boots, kept.acceptance, kept.coherence, kept.likelihood, kept.summaries)
    assert sum(len(t) for t in tables) == 9  # every record written before the disk filled, none torn
    monkeypatch.setattr("mtpverdict.formats.results_io.write.os.write", real_write)
    events: list[Event] = []
    Collector(
        campaign, out, variables={}, resume=True, allow_argv_mismatch=False, on_event=events.append
    ).run()
    final = load_results(out)
    assert set(final.boots[final.boots["status"] == "ready"]["arm"]) == {
        "off_A",
        "ngram_k2",
        "draft_random_k2",
        "off_B",
    }
    assert _port_free(port)


def test_the_api_key_is_never_written(tmp_path: Path, port: int) -> None:
    secret = "sk-test-0123456789abcdef"
    text = campaign_text(port, reps=1, concurrency="[1]").replace(
        "stall_seconds = 3", 'stall_seconds = 3\napi_key_env = "MTPVERDICT_TEST_KEY"'
    )
    out = tmp_path / "results"
    env = {**os.environ, "MTPVERDICT_TEST_KEY": secret}
    done = run_collect(
        [*CLI, "collect", str(_write(tmp_path, text)), "--out", str(out)], out, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr
    for path in out.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in done.stdout + done.stderr


@pytest.mark.slow
def test_dry_run_and_bad_campaigns(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, campaign_text(port))
    dry = subprocess.run(
        [*CLI, "collect", str(campaign), "--out", str(tmp_path / "x"), "--dry-run"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert dry.returncode == 0 and "4 arms x 1 boot(s)" in dry.stdout and not (tmp_path / "x").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text(campaign_text(port).replace("reps = 2", "reps = 0"))
    refused = _collect(bad, tmp_path / "y")
    assert refused.returncode == 2 and refused.stderr.startswith(f"Error: {bad}: reps: must be >= 1")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "campaign.json").write_text("{}")
    exists = _collect(campaign, tmp_path / "taken")
    assert exists.returncode == 2 and "--resume" in exists.stderr


def test_collect_refuses_an_undefined_placeholder(tmp_path: Path, port: int) -> None:
    text = campaign_text(port).replace('"--port", "{port}"', '"--port", "{port}", "--model-dir", "{models}"')
    plan = load_campaign_file(_write(tmp_path, text))
    with pytest.raises(CollectError, match="needs a value for models"):
        Collector(
            plan,
            tmp_path / "r",
            variables={},
            resume=False,
            allow_argv_mismatch=False,
            on_event=lambda e: None,
        )
    argv = plan.serve_argv(plan.arms[1], {"models": "/m"}, 1, "r")
    assert argv[argv.index("--model-dir") + 1] == "/m" and str(port) in argv
    assert argv[-2] == "--speculative-config"  # {spec} spliced the arm's speculative arguments


@pytest.mark.slow
def test_until_resolved_stops_booting_settled_arms(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, campaign_text(port, boots=3, reps=2, concurrency="[1, 4]"))
    out = tmp_path / "results"
    done = _collect(campaign, out, "--until-resolved", "--rules", "default")
    assert done.returncode == 0, done.stderr
    assert "adaptive:" in done.stdout
    assert json.loads((out / "campaign.json").read_text())["sequential_looks"] == 3
    boots = load_results(out).boots
    per_arm = boots.groupby("arm").size().to_dict()
    assert per_arm["draft_random_k2"] == 1  # void after the first round: never booted again
    assert per_arm["off_A"] >= 2 and sum(per_arm.values()) < 12
    looks = read_looks(out).looks  # collect recorded each look it took, with the alpha it spent
    assert looks and all(x.planned == 3 and x.alpha == pytest.approx(0.05 / 3) for x in looks)
    decision = json.loads(decide_directory(out).json_text)
    assert any(
        f"look {len(looks)} of 3 planned" in r or f"look {len(looks) + 1} of 3 planned" in r
        for r in decision["reasons"]
    )
    assert _port_free(port)


@pytest.mark.slow
def test_raising_boots_and_resuming_continues_the_campaign(tmp_path: Path, port: int) -> None:
    """What an inconclusive decision's next step says: set a larger `boots`, then collect --resume. The
    edited file has another hash (campaign.json's `source`), and under --until-resolved another number
    of looks; both follow the file, and every record already written stays as it was."""
    campaign = _write(tmp_path, campaign_text(port, boots=1, reps=1, concurrency="[1]"))
    out = tmp_path / "results"
    assert _collect(campaign, out).returncode == 0
    before = (out / "records.jsonl").read_bytes()
    campaign.write_text(campaign_text(port, boots=2, reps=1, concurrency="[1]"))
    done = _collect(campaign, out, "--resume")
    assert done.returncode == 0, done.stderr
    assert (out / "records.jsonl").read_bytes().startswith(before)
    source = json.loads((out / "campaign.json").read_text())["source"]
    assert hashlib.sha256(campaign.read_bytes()).hexdigest()[:16] in source
    assert set(load_results(out).boots.groupby("arm").size()) == {2}
    changed = campaign_text(port, boots=3, reps=1, concurrency="[1, 4]")  # another design
    campaign.write_text(changed)
    other = _collect(campaign, out, "--resume")
    assert other.returncode == 2 and "differs from the campaign being written" in other.stderr


@pytest.mark.slow
def test_an_adaptive_campaign_resumes_with_more_looks_never_fewer(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, campaign_text(port, boots=2, reps=1, concurrency="[1]"))
    out = tmp_path / "results"
    assert _collect(campaign, out, "--until-resolved", "--rules", "default").returncode == 0
    campaign.write_text(campaign_text(port, boots=3, reps=1, concurrency="[1]"))
    more = _collect(campaign, out, "--resume", "--until-resolved", "--rules", "default")
    assert more.returncode == 0, more.stderr
    assert json.loads((out / "campaign.json").read_text())["sequential_looks"] == 3
    campaign.write_text(campaign_text(port, boots=2, reps=1, concurrency="[1]"))
    fewer = _collect(campaign, out, "--resume", "--until-resolved", "--rules", "default")
    assert fewer.returncode == 2 and "fewer looks (2) than the 3 it was planned with" in fewer.stderr
    fixed = _collect(campaign, out, "--resume")
    assert fixed.returncode == 2 and "resume it with --until-resolved" in fixed.stderr


def test_a_runs_request_records_reach_the_disk_in_one_write_and_one_fsync(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write and an fsync per streamed request cost collect ~220 us of CPU a record at c=64."""
    campaign = load_campaign_file(_write(tmp_path, campaign_text(port, reps=1, concurrency="[4]")))
    out = tmp_path / "results"
    real_write, real_fsync = os.write, os.fsync
    writes: list[list[dict[str, Any]]] = []
    synced: list[int] = []

    def recorded(fd: int, data: bytes) -> int:
        if data.startswith(b'{"') and data.endswith(b"\n"):
            writes.append([json.loads(line) for line in data.decode().splitlines()])
        return real_write(fd, data)

    def counted(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith("records.jsonl"):
            synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "write", recorded)
    monkeypatch.setattr(os, "fsync", counted)
    Collector(
        campaign, out, variables={}, resume=False, allow_argv_mismatch=False, on_event=lambda e: None
    ).run()
    request_writes = [w for w in writes if any(r["kind"] == "request" for r in w)]
    runs = {(r["arm"], r["boot"], r["rep"], r["warmup"]) for w in request_writes for r in w}
    assert len(runs) == 8  # four arms, a warm-up run and a measured run each
    assert len(request_writes) == len(runs)  # one write per run ...
    assert all(len(w) == 4 and all(r["kind"] == "request" for r in w) for w in request_writes)  # ... of c=4
    assert len(synced) == len(writes)  # one fsync per write: every record durable when its write returns
    on_disk = _records(out)
    assert [r for w in writes for r in w] == on_disk  # nothing written outside these writes, in order


def _collect_in_process(tmp_path: Path, port: int) -> tuple[Collector, Path, list[Event]]:
    campaign = load_campaign_file(_write(tmp_path, campaign_text(port, reps=1, concurrency="[4]")))
    out = tmp_path / "results"
    events: list[Event] = []
    collector = Collector(
        campaign, out, variables={}, resume=False, allow_argv_mismatch=False, on_event=events.append
    )
    return collector, out, events


def _main_thread_only() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set only in the main thread")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_a_run_is_recorded_waits_for_its_records(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """A finished run's streams are on disk and counted before a signal that came meanwhile stops collect."""
    _main_thread_only()
    collector, out, events = _collect_in_process(tmp_path, port)
    real = ResultsWriter.append_many
    signalled: list[list[dict[str, Any]]] = []

    def append_after_signal(writer: ResultsWriter, records: Any) -> int:
        if not signalled and any(r["kind"] == "request" and not r["warmup"] for r in records):
            signalled.append(list(records))
            os.kill(os.getpid(), signum)  # arrives while the run's records are being written
            for _ in range(1000):  # the handler runs at the next bytecode boundary: let it
                pass
        return real(writer, records)

    monkeypatch.setattr(ResultsWriter, "append_many", append_after_signal)
    summary = collector.run()
    assert summary.interrupted and summary.signal == signum
    (run,) = signalled
    on_disk = _records(out)
    assert [r for r in on_disk if r in run] == run  # the run that was being written is on disk, whole
    (boot,) = [r for r in on_disk if r["kind"] == "boot"]
    assert boot["status"] == "interrupted"
    assert summary.requests == len(run)  # and counted, once
    assert summary.records == len(on_disk)
    assert _port_free(port)


def test_a_signal_during_the_scrape_after_a_run_keeps_the_runs_records(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's records were written after its closing /metrics scrape: a SIGTERM in that round trip
    dropped every finished stream of the run."""
    _main_thread_only()
    collector, out, events = _collect_in_process(tmp_path, port)
    real = Measurement._scrape

    async def scrape(self: Measurement, rel: str) -> Any:
        if rel.endswith("-after.prom"):
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(0)
        return await real(self, rel)

    monkeypatch.setattr(Measurement, "_scrape", scrape)
    summary = collector.run()
    assert summary.interrupted
    measured = [r for r in _records(out) if r["kind"] == "request" and not r["warmup"]]
    assert [r["stream"] for r in measured] == [0, 1, 2, 3]
    assert summary.requests == 4
    # and its group is in the boot's start file, so the engine log's lines still find their run
    run = measured[0]
    groups = started_sent(started_path(out, run["arm"], run["boot"]))
    assert groups is not None
    assert [g.run for g in groups if g.run is not None] == [(run["workload"], 4, 1)]


def test_a_stream_whose_server_fields_are_refused_is_kept_without_them(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's per-request field the results format refuses (a negative time) raised ValueError out
    of collect, exit 70, and every resume did it again: the stream is kept on the client's clock."""
    collector, out, events = _collect_in_process(tmp_path, port)
    real = measure._served_fields

    def hostile(r: Any) -> dict[str, Any]:
        return {**real(r), "server_ttft_ms": -1.0} if r.stream == 1 else real(r)

    monkeypatch.setattr(measure, "_served_fields", hostile)
    summary = collector.run()
    assert not summary.interrupted
    requests = [r for r in _records(out) if r["kind"] == "request"]
    assert requests and all(r["status"] == "ok" for r in requests)
    assert [("server_ttft_ms" in r) for r in requests if r["stream"] == 1] == [False] * len(
        [r for r in requests if r["stream"] == 1]
    )
    notes = [e.detail for e in events if e.kind == "note"]
    assert any("stream 1: the server's per-request fields dropped: " in n for n in notes)


def _measurement(notes: list[str], secrets: tuple[str, ...] = ()) -> Measurement:
    m = object.__new__(Measurement)
    m.arm, m.number = "off_A", 1
    m.ctx = SimpleNamespace(  # type: ignore[assignment]
        note=lambda arm, boot, detail: notes.append(detail), redactor=Redactor(secrets)
    )
    return m


def _request(**changed: Any) -> dict[str, Any]:
    """A request record of off_A's first boot, chat at c=4, as collect builds it."""
    return {
        "kind": "request",
        "arm": "off_A",
        "boot": 1,
        "workload": "chat",
        "concurrency": 4,
        "rep": 1,
        "stream": 0,
        "warmup": False,
        "t_start": 1.0,
        "t_first": 1.5,
        "t_end": 2.0,
        "prompt_tokens": 8,
        "completion_tokens": 8,
        "status": "ok",
        "error": None,
        **changed,
    }


def test_a_request_record_refused_whole_is_recorded_as_an_error_saying_why() -> None:
    notes: list[str] = []
    m = _measurement(notes)
    # t_end before t_first: refused, and not the server's fields
    record = _request(stream=2, t_first=2.0, t_end=0.5, error="bad \ud800 text")
    written = m._writable(record)
    assert written["status"] == "error" and written["t_first"] is None and written["stream"] == 2
    assert written["error"].startswith("the results format refused this stream's record: ")
    assert not isinstance(encoded(written), str)
    why = written["error"].removeprefix("the results format refused this stream's record: ")
    assert notes == [f"chat c=4 rep 1 stream 2: recorded as an error: {why}"]


def test_a_completion_with_a_lone_surrogate_is_recorded(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's JSON can escape a lone surrogate into the text: hashing it raised UnicodeEncodeError
    out of collect, on every resume again."""
    collector, out, _ = _collect_in_process(tmp_path, port)
    real = Measurement._streams

    async def hostile(self: Measurement, *args: Any) -> cl.RunResult:
        results = await real(self, *args)
        streams = [
            dataclasses.replace(r, text="x\ud800y") if r.status == "ok" else r for r in results.streams
        ]
        return dataclasses.replace(results, streams=tuple(streams))

    monkeypatch.setattr(Measurement, "_streams", hostile)
    summary = collector.run()
    assert not summary.interrupted and summary.requests > 0
    requests = [r for r in _records(out) if r["kind"] == "request"]
    assert requests and all(r["status"] == "ok" and r["output_sha256"] for r in requests)


def test_collects_error_count_is_the_records_written(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream the format refused whole is written as an error: collect's summary counts it so."""
    collector, out, _ = _collect_in_process(tmp_path, port)
    real = Measurement._request_records

    def refused(self: Measurement, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        records = real(self, *args, **kwargs)
        return [{**r, "completion_tokens": -1} if r["stream"] == 1 else r for r in records]

    monkeypatch.setattr(Measurement, "_request_records", refused)
    summary = collector.run()
    measured = [r for r in _records(out) if r["kind"] == "request" and not r["warmup"]]
    errors = [r for r in measured if r["status"] != "ok"]
    assert errors and all(r["stream"] == 1 for r in errors)
    assert summary.requests == len(measured) and summary.request_errors == len(errors)


def test_a_record_is_judged_as_it_will_be_written_redacted() -> None:
    """A dataset category that a secret's redaction cuts passed as it was, then the redacted record
    was refused by the writer and collect stopped: it is judged redacted, and the fallback taken."""
    notes: list[str] = []
    m = _measurement(notes, secrets=("production-key-123",))
    record = _request(category="production")
    assert not isinstance(encoded(record), str)  # valid as it is ...
    assert isinstance(encoded(m.ctx.redactor.value(record)), str)  # ... refused as it is written
    written = m._writable(record)
    assert not isinstance(encoded(m.ctx.redactor.value(written)), str)
    assert written["status"] == "error" and len(notes) == 1


def test_a_stream_no_form_of_which_can_be_written_is_said_and_the_run_goes_on() -> None:
    """Every form of the record refused: the second append raised out of the run, which then was
    neither noted for the engine log nor counted."""
    notes: list[str] = []
    m = _measurement(notes)

    def refuse(records: list[dict[str, Any]]) -> None:
        raise ValueError("invalid request record: refused by the writer")

    m.ctx = SimpleNamespace(  # type: ignore[assignment]
        note=m.ctx.note, redactor=m.ctx.redactor, writer=SimpleNamespace(keys=set()), append_many=refuse
    )
    assert m._append_requests([_request()]) == []
    assert (
        notes[-1] == "a stream's record could not be written: invalid request record: refused by the writer"
    )
