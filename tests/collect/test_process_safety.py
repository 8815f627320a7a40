"""`collect --resume` signals only a server it can prove it started; two collects never share a directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mtpverdict._jsonio import canonical
from mtpverdict.collect import load_campaign_file

from ..conftest import stop_servers
from .conftest import FAKE, collect_running, interruptible, run_collect, small_campaign, wait_for_server

CLI = [sys.executable, "-m", "mtpverdict"]
TOKEN_ENV = "MTPVERDICT_BOOT_TOKEN"  # what a launched server carries in its environment
FILE_ENV = "MTPVERDICT_BOOT_FILE"


def _collect(campaign: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_collect([*CLI, "collect", str(campaign), "--out", str(out), *extra], out, timeout=180)


def _start_ticks(pid: int) -> int:
    """Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[19])


@pytest.fixture
def start_victim() -> Iterator[Callable[[dict[str, str]], subprocess.Popen[bytes]]]:
    """Start unrelated `setsid python3` process groups, as a user might have running beside collect."""
    started: list[subprocess.Popen[bytes]] = []

    def start(env: dict[str, str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(300)"],
            start_new_session=True,
            env={**os.environ, **env},
        )
        started.append(proc)
        time.sleep(0.3)  # it has exec'd python: its command line and environment are in place
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _results_with_a_started_file(tmp: Path, port: int) -> tuple[Path, Path, Path]:
    """A campaign, its results directory (campaign.json only) and the path of off_A boot 1's start file."""
    campaign = tmp / "campaign.toml"
    campaign.write_text(small_campaign(port))
    out = tmp / "results"
    (out / "raw" / "boots").mkdir(parents=True)
    plan = load_campaign_file(campaign)
    (out / "campaign.json").write_text(canonical(plan.results_campaign({}, str(out))))
    return campaign, out, out / "raw" / "boots" / "off_A-boot1.json"


def _boot_record() -> dict[str, Any]:
    return {
        "kind": "boot",
        "arm": "off_A",
        "boot": 1,
        "order": 1,
        "status": "ready",
        "ready_seconds": None,
        "kv_cache_tokens": None,
        "block_size": None,
        "num_blocks": None,
        "max_model_len": None,
        "engine_version": None,
        "argv": None,
        "error": None,
        "observed_k": None,
        "log": None,
    }


Forgery = Callable[[int, int], dict[str, Any]]
# name -> (the victim's environment given the start file's path, what the forger adds given pid and ticks)
FORGERIES: dict[str, tuple[Callable[[Path], dict[str, str]], Forgery]] = {
    # the file's word alone: the program name of the process it points at
    "file-word-only": (lambda path: {}, lambda pid, ticks: {}),
    # a guessed token for a process that carries none
    "guessed-token": (
        lambda path: {},
        lambda pid, ticks: {"pgid": pid, "start_ticks": ticks, "token": "0" * 32},
    ),
    # a real token and start time, but the process was started for another results directory
    "another-directory": (
        lambda path: {TOKEN_ENV: "1" * 32, FILE_ENV: "/elsewhere/results/raw/boots/off_A-boot1.json"},
        lambda pid, ticks: {"pgid": pid, "start_ticks": ticks, "token": "1" * 32},
    ),
    # token and file match, the start time does not: the pid was recycled
    "recycled-pid": (
        lambda path: {TOKEN_ENV: "2" * 32, FILE_ENV: str(path.resolve())},
        lambda pid, ticks: {"pgid": pid, "start_ticks": ticks - 1, "token": "2" * 32},
    ),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
@pytest.mark.slow
def test_resume_never_signals_a_process_named_by_a_forged_boot_file(
    tmp_path: Path,
    port: int,
    forgery: str,
    start_victim: Callable[[dict[str, str]], subprocess.Popen[bytes]],
) -> None:
    victim_env, forge = FORGERIES[forgery]
    campaign, out, started = _results_with_a_started_file(tmp_path, port)
    victim = start_victim(victim_env(started))
    forged = {
        "arm": "off_A",
        "boot": 1,
        "order": 1,
        "record": _boot_record(),
        "pid": victim.pid,
        "argv0": sys.executable,
        **forge(victim.pid, _start_ticks(victim.pid)),
    }
    started.write_text(json.dumps(forged))
    done = _collect(campaign, out, "--resume")
    assert victim.poll() is None, "collect --resume signalled a process it did not start"
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert f"pid {victim.pid}" in said and "not signalled" in said, said


@pytest.mark.slow
def test_a_second_collect_on_a_running_directory_is_refused(tmp_path: Path, port: int) -> None:
    # the first collect's server listens only once `release` exists: the first holds the directory for
    # as long as the checks take, however slowly the second collects start on a busy machine
    release = tmp_path / "release"
    command = json.dumps(
        [sys.executable, str(FAKE), "--port", "{port}", "--hold-until", str(release), "{spec}"]
    )
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port, command=command, boot_timeout=600))
    out = tmp_path / "results"
    popen = subprocess.Popen(
        [*CLI, "collect", str(campaign), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    with collect_running(popen, out) as first:  # killed, and its server stopped, if it outlives a failure
        try:
            wait_for_server(out, proc=first)
            second = _collect(campaign, out, "--resume")
            assert second.returncode == 2, second.stderr
            assert f"another collect (pid {first.pid})" in second.stderr and "Traceback" not in second.stderr
            dry = _collect(campaign, out, "--resume", "--dry-run")
            assert dry.returncode == 0 and f"another collect (pid {first.pid}) is running" in dry.stdout
            release.touch()
            _, err = first.communicate(timeout=120)
            assert first.returncode == 0, err  # the running collect and its server were left alone
        finally:
            release.touch()
    boots = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if '"boot"' in x]
    assert [(b["arm"], b["status"]) for b in boots if b["kind"] == "boot"] == [("off_A", "ready")]


def _gone(pid: int, within: float) -> bool:
    """Whether a process has ended (and been reaped) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_a_collect_that_times_out_leaves_no_server(tmp_path: Path, port: int) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port, tps=1, reps=50))  # minutes of decoding at 1 tok/s
    out = tmp_path / "results"
    argv = [*CLI, "collect", str(campaign), "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    with collect_running(proc, out):
        pid = wait_for_server(out, proc=proc)  # up, however loaded the host (before: a 20 s margin)
        proc.kill()  # what subprocess.run's timeout does to the collect
        proc.wait()
        stop_servers(out)  # what run_collect does after a timeout, and collect --resume first
        assert _gone(pid, within=30), "the server the timed-out collect launched is still running"
