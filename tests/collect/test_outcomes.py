"""What `collect` says happened: its exit code, interrupted boots, dry-run checks, and its error texts."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mtpverdict._jsonio import canonical
from mtpverdict.collect import load_campaign_file

from ..conftest import run_cli
from .conftest import FAKE, collect_running, interruptible, run_collect, small_campaign, wait_for_server

CLI = [sys.executable, "-m", "mtpverdict"]
SPEC = '["--speculative-config", "{\\"num_speculative_tokens\\": 2, \\"fake_accept\\": 0.9}"]'
EXIT_BOOTS_FAILED = 5  # README: collect ran, but a boot failed or was refused


def _collect(campaign: Path, out: Path, *extra: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    timeout = kw.pop("timeout", 180)
    return run_collect(
        [*CLI, "collect", str(campaign), "--out", str(out), *extra], out, timeout=timeout, **kw
    )


def _boots(out: Path) -> list[dict[str, Any]]:
    lines = (out / "records.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "boot"]


def _write(tmp: Path, text: str) -> Path:
    path = tmp / "campaign.toml"
    path.write_text(text)
    return path


def _slow_boot_command(delay: float) -> str:
    return json.dumps([sys.executable, str(FAKE), "--port", "{port}", "--boot-delay", str(delay), "{spec}"])


# --- item 3 of the boot-safety issue: a torn start file ------------------------------------------


BAD_START_FILES = {
    "torn": ('{"arm": "off_A", "boot": 1, "ord', "unreadable"),
    "not-an-object": ("[1, 2]", "unreadable"),
    # whole JSON, but the record it holds is not a boot record of this arm
    "invalid-record": (
        json.dumps({"arm": "off_A", "boot": 1, "order": 1, "record": {"kind": "request", "arm": "x"}}),
        "invalid record",
    ),
}


@pytest.mark.parametrize("bad", list(BAD_START_FILES))
@pytest.mark.slow
def test_a_truncated_or_invalid_start_file_is_an_interrupted_boot(
    tmp_path: Path, port: int, bad: str
) -> None:
    text, said = BAD_START_FILES[bad]
    campaign = _write(tmp_path, small_campaign(port))
    out = tmp_path / "results"
    (out / "raw" / "boots").mkdir(parents=True)
    plan = load_campaign_file(campaign)
    (out / "campaign.json").write_text(canonical(plan.results_campaign({}, str(out))))
    (out / "raw" / "boots" / "off_A-boot1.json").write_text(text)
    done = _collect(campaign, out, "--resume")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    boots = {b["boot"]: b for b in _boots(out)}
    assert boots[1]["status"] == "interrupted" and said in boots[1]["note"]
    assert boots[2]["status"] == "ready" and boots[2]["order"] > boots[1]["order"]


# --- an interrupted boot is recorded as interrupted, not ready -----------------------------------


def test_ctrl_c_before_the_server_is_ready_records_an_interrupted_boot(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, small_campaign(port, command=_slow_boot_command(30)))
    out = tmp_path / "results"
    argv = [*CLI, "collect", str(campaign), "--out", str(out)]
    popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=interruptible)
    with collect_running(popen, out) as proc:
        wait_for_server(out, proc=proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    [boot] = _boots(out)
    assert boot["status"] == "interrupted" and boot["ready_seconds"] is None
    assert "interrupted" in boot["note"]


@pytest.mark.slow
def test_a_killed_collect_leaves_a_boot_that_resume_records_as_interrupted(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, small_campaign(port, command=_slow_boot_command(2)))
    out = tmp_path / "results"
    argv = [*CLI, "collect", str(campaign), "--out", str(out)]
    popen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with collect_running(popen, out) as proc:  # a failed assertion leaves no server behind
        server = wait_for_server(out, proc=proc)
        proc.kill()
        proc.wait()
        assert Path(f"/proc/{server}").exists()  # the server outlived its collect
        done = _collect(campaign, out, "--resume")
        assert done.returncode == 0, done.stderr
        assert "stopped the server" in done.stdout, done.stdout
        assert not Path(f"/proc/{server}").exists() or _is_zombie(server)
    boots = {b["boot"]: b for b in _boots(out)}
    assert boots[1]["status"] == "interrupted" and boots[1]["ready_seconds"] is None
    assert boots[2]["status"] == "ready"


def test_a_collect_a_test_leaves_is_killed_and_its_server_stopped(tmp_path: Path, port: int) -> None:
    """collect_running: a test that fails while its collect's server runs leaves neither behind."""
    campaign = _write(tmp_path, small_campaign(port, command=_slow_boot_command(60)))
    out = tmp_path / "results"
    argv = [*CLI, "collect", str(campaign), "--out", str(out)]
    popen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with pytest.raises(AssertionError, match="a failed check"), collect_running(popen, out):
        server = wait_for_server(out, proc=popen)
        raise AssertionError("a failed check")
    assert popen.returncode is not None
    assert not Path(f"/proc/{server}").exists() or _is_zombie(server)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# --- the exit code says whether every boot became ready ------------------------------------------


def test_a_failed_or_refused_boot_has_its_own_exit_code(tmp_path: Path, port: int) -> None:
    arms = (("off_A", "[]"), ("off_B", '["--fault", "boot-fail"]'))
    campaign = _write(tmp_path, small_campaign(port, arms=arms))
    out = tmp_path / "results"
    done = _collect(campaign, out, "--allow-argv-mismatch")
    assert done.returncode == EXIT_BOOTS_FAILED, done.stderr
    assert "1 failed" in done.stdout and "off_B" in done.stderr
    assert [b["status"] for b in _boots(out)] == ["ready", "failed"]
    again = _collect(campaign, out, "--resume", "--allow-argv-mismatch")
    assert again.returncode == 0 and "0 boots" in again.stdout  # this run booted nothing, failed nothing


def test_a_refused_boot_has_the_same_exit_code(tmp_path: Path, port: int) -> None:
    arms = (("off_A", "[]"), ("ngram_k2", SPEC))
    text = small_campaign(port, arms=arms).replace("k = 2", "k = 3")
    out = tmp_path / "results"
    done = _collect(_write(tmp_path, text), out)
    assert done.returncode == EXIT_BOOTS_FAILED, done.stderr
    assert "does not match the arm" in done.stdout


# --- --dry-run runs every check a real run does ---------------------------------------------------


def test_dry_run_refuses_what_a_real_run_refuses(tmp_path: Path, port: int) -> None:
    arms = (("off_A", '["--max-num-seqs", "4"]'), ("ngram_k2", SPEC))
    campaign = _write(tmp_path, small_campaign(port, arms=arms))
    real = _collect(campaign, tmp_path / "real")
    dry = _collect(campaign, tmp_path / "dry", "--dry-run")
    assert real.returncode == dry.returncode == 2
    assert "not a speculative flag" in dry.stderr and "Traceback" not in dry.stderr
    allowed = _collect(campaign, tmp_path / "dry", "--dry-run", "--allow-argv-mismatch")
    assert allowed.returncode == 0 and "harness parity not held" in allowed.stdout.lower()
    assert not (tmp_path / "dry").exists()


def test_dry_run_refuses_an_unset_api_key_variable(tmp_path: Path, port: int) -> None:
    text = small_campaign(port, server_extra='api_key_env = "MTPVERDICT_TEST_UNSET_KEY"')
    env = {k: v for k, v in os.environ.items() if k != "MTPVERDICT_TEST_UNSET_KEY"}
    dry = _collect(_write(tmp_path, text), tmp_path / "r", "--dry-run", env=env)
    assert dry.returncode == 2 and "MTPVERDICT_TEST_UNSET_KEY is not set" in dry.stderr


@pytest.mark.slow
def test_dry_run_on_an_existing_results_directory(tmp_path: Path, port: int) -> None:
    campaign = _write(tmp_path, small_campaign(port))
    out = tmp_path / "results"
    assert _collect(campaign, out).returncode == 0
    before = sorted(p.name for p in out.rglob("*"))
    refused = _collect(campaign, out, "--dry-run")
    assert refused.returncode == 2 and "already holds a campaign" in refused.stderr
    resumed = _collect(campaign, out, "--dry-run", "--resume")
    assert resumed.returncode == 0
    assert "warning:" in resumed.stdout and str(out) in resumed.stdout
    assert "1 boot record" in resumed.stdout
    other = _write(tmp_path, small_campaign(port).replace('title = "a short', 'title = "another'))
    changed = _collect(other, out, "--dry-run", "--resume")
    assert changed.returncode == 2 and "differs from the campaign" in changed.stderr
    assert sorted(p.name for p in out.rglob("*")) == before  # a dry run writes nothing
    (tmp_path / "empty").mkdir()
    empty = _collect(campaign, tmp_path / "empty", "--dry-run")
    assert empty.returncode == 0 and "warning:" in empty.stdout


# --- errors name the exception type and say something ---------------------------------------------


def test_an_os_error_without_a_message_still_says_what_failed(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:

    def no_message(self: object, owed: object) -> None:
        raise OSError()

    # inside run(), as a real failure would be: run's own cleanup closes the lock and records files
    monkeypatch.setattr("mtpverdict.collect.runner.Collector._run_rounds", no_message)
    campaign = _write(tmp_path, small_campaign(port))
    result = run_cli("collect", campaign, "--out", tmp_path / "r")
    assert result.returncode == 4
    line = result.output.strip().splitlines()[-1]
    assert "OSError" in line and ": ;" not in line, line


# --- campaign files that are not regular files ------------------------------------------------------


def _limit_memory() -> None:  # an unbounded read fails fast here instead of filling the machine
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "oversized"])
def test_a_campaign_that_is_not_a_bounded_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "campaign.toml"
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        with path.open("wb") as fh:
            fh.truncate(64 << 20)
    done = subprocess.run(
        [*CLI, "collect", str(path), "--out", str(tmp_path / "r"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(f"Error: {path}: ") and "Traceback" not in done.stderr
    expected = "bytes" if kind == "oversized" else "not a regular file"
    assert expected in done.stderr, done.stderr


def test_a_transport_error_fails_the_boot_with_its_type_and_a_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    from mtpverdict.collect import Collector

    async def read_error(*args: object) -> None:
        raise httpx.ReadError("")  # httpx raises its network errors with an empty message

    monkeypatch.setattr("mtpverdict.collect.boot.BootSession._serve", read_error)
    text = small_campaign(8000).replace('mode = "launch"', 'mode = "external"')
    text = text.replace('name = "off_A"', 'name = "off_A"\nbase_url = "http://127.0.0.1:9"')
    plan = load_campaign_file(_write(tmp_path, text))
    out = tmp_path / "results"
    summary = Collector(
        plan, out, variables={}, resume=False, allow_argv_mismatch=False, on_event=lambda e: None
    ).run()
    assert summary.outcome == "boots_failed" and summary.failed_boots == 1
    [boot] = _boots(out)
    assert boot["status"] == "failed"
    assert boot["error"].startswith("ReadError: ") and len(boot["error"]) > len("ReadError: ") + 10
    assert summary.failed == [f"off_A boot 1: {boot['error']}"]
