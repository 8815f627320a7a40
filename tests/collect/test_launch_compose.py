"""[server] compose: arms derived from a compose service, launched natively or through a `docker` stand-in,
with the boot discipline (before_boot, the memory check, the host state) recorded per boot.

The container path is exercised through tests/fakedocker.py on PATH: it records every docker call
and runs the container's command on the host (no container runtime runs here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.collect import load_campaign_file
from mtpverdict.errors import CampaignError
from mtpverdict.formats.results_io import load_results

from .conftest import FAKE, run_collect

CLI = [sys.executable, "-m", "mtpverdict"]
FAKEDOCKER = Path(__file__).resolve().parent.parent / "fakedocker.py"
K2 = '{"num_speculative_tokens": 2, "fake_accept": 0.9}'
EXIT_BOOTS_FAILED = 5  # README: collect ran to the end, but a boot failed or was refused


def _compose(where: Path, port: int, extra: str = "") -> None:
    """A service running the fake server, its own speculation k2 (which each arm replaces)."""
    entry = json.dumps([sys.executable, str(FAKE)])
    command = json.dumps(
        ["--port", str(port), "--tps", "400", "--leak-env", "FAKE_SEAT", "--speculative-config", K2]
    )
    (where / "compose.yaml").write_text(
        f"services:\n  seat:\n    image: vllm/vllm-openai:v0.32.0\n    entrypoint: {entry}\n"
        f"    command: {command}\n    environment:\n      FAKE_SEAT: seat-env\n{extra}"
    )


def _campaign(where: Path, port: int, server_extra: str = "") -> Path:
    path = where / "campaign.toml"
    path.write_text(
        f"""
campaign_version = 1
id = "deployed"
title = "arms from the seat's compose service"
concurrency = [1]
reps = 1
warmup_runs = 0

[server]
mode = "launch"
compose = "compose.yaml"
service = "seat"
port = {port}
boot_timeout = 30
grace_seconds = 5
stall_seconds = 5
{server_extra}

[[arms]]
name = "off_A"
role = "control"

[[arms]]
name = "ngram_k2"
role = "candidate"
method = "ngram"
k = 2
serve_args = ["--speculative-config", {json.dumps(K2)}]

[[workloads]]
id = "short"
prompt = "Write about rivers."
max_tokens = 16
ignore_eos = true
"""
    )
    return path


def _collect(
    campaign: Path, out: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_collect([*CLI, "collect", str(campaign), "--out", str(out)], out, timeout=240, env=env)


def _boots(out: Path) -> dict[str, dict[str, Any]]:
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return {r["arm"]: r for r in records if r["kind"] == "boot"}


@pytest.mark.slow
def test_arms_come_from_the_service_natively_with_the_discipline_recorded(
    tmp_path: Path, port: int, resolver: object
) -> None:
    _compose(tmp_path, port)
    step = json.dumps([sys.executable, "-c", "print('caches dropped')"])
    campaign = _campaign(tmp_path, port, f"before_boot = [{step}]\nmin_available_memory_gib = 0.001")
    out = tmp_path / "results"
    done = _collect(campaign, out)
    assert done.returncode == 0, done.stdout + done.stderr
    deployment = json.loads((out / "campaign.json").read_text())["deployment"]
    assert deployment["service"] == "seat" and deployment["launch"] == "native"
    assert deployment["resolver"] and deployment["compose_version"]
    assert len(deployment["sha256"]) == 64 and deployment["base_sha256"] != deployment["sha256"]
    boots = _boots(out)
    base = [sys.executable, str(FAKE), "--port", str(port), "--tps", "400", "--leak-env", "FAKE_SEAT"]
    assert boots["off_A"]["argv"] == base  # the service's own speculation removed
    assert boots["ngram_k2"]["argv"] == [*base, "--speculative-config", K2]
    assert boots["ngram_k2"]["observed_k"] == 2 and boots["off_A"]["observed_k"] == 0
    for boot in boots.values():
        assert boot["status"] == "ready"
        (ran,) = boot["before_boot"]
        assert ran["exit_code"] == 0 and ran["output"] == "caches dropped\n"
        assert boot["memory_check"]["passed"] is True and boot["memory_check"]["required_gib"] == 0.001
        assert boot["host_state"]["mem_available_gib"] > 0
    log = (out / "raw" / "logs" / "off_A-boot1.log").read_text()
    assert "'api_key': 'seat-env'" in log  # the service's environment reached the server
    load_results(out)  # the format reads every new key back


@pytest.mark.slow
def test_a_failing_step_or_too_little_memory_fails_the_boot_not_the_campaign(
    tmp_path: Path, port: int, resolver: object
) -> None:
    _compose(tmp_path, port)
    step = json.dumps([sys.executable, "-c", "import sys; print('no'); sys.exit(3)"])  # every boot's fails
    campaign = _campaign(tmp_path, port, f"before_boot = [{step}]")
    out = tmp_path / "results"
    done = _collect(campaign, out)
    assert done.returncode == EXIT_BOOTS_FAILED, done.stdout + done.stderr
    boots = _boots(out)
    assert boots["off_A"]["status"] == "failed" and boots["ngram_k2"]["status"] == "failed"
    assert (
        "before_boot[0]" in boots["off_A"]["error"] and "exited with status 3: no" in boots["off_A"]["error"]
    )
    assert boots["off_A"]["before_boot"][0]["exit_code"] == 3
    assert boots["off_A"]["ready_seconds"] is None  # the server never started

    memory = tmp_path / "memory"
    memory.mkdir()
    _compose(memory, port)
    campaign = _campaign(memory, port, "min_available_memory_gib = 10000000\nmemory_wait_seconds = 0")
    done = _collect(campaign, memory / "results")
    assert done.returncode == EXIT_BOOTS_FAILED, done.stdout + done.stderr
    boot = _boots(memory / "results")["off_A"]
    assert boot["status"] == "failed" and "did not have 1e+07 GiB available within 0 s" in boot["error"]
    assert "MemAvailable" in boot["error"] and boot["memory_check"]["passed"] is False
    assert boot["host_state"]["mem_total_gib"] > 0


def _docker_env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKEDOCKER}" "$@"\n')
    docker.chmod(0o755)
    home = tmp_path / "docker-home"
    home.mkdir()
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_DOCKER_DIR": str(home)}


@pytest.mark.slow
def test_docker_launch_runs_a_container_per_arm_and_boot_and_removes_a_leftover(
    tmp_path: Path, port: int, resolver: object
) -> None:
    _compose(tmp_path, port, "    ipc: host\n    shm_size: 1gb\n    restart: always\n")
    campaign = _campaign(tmp_path, port, 'launch = "docker"')
    env = _docker_env(tmp_path)
    home = Path(env["FAKE_DOCKER_DIR"])
    leftover = subprocess.Popen(["sleep", "120"], start_new_session=True)  # an earlier boot's container
    try:
        (home / "mtpverdict-deployed-off_A-boot1.pid").write_text(str(leftover.pid))
        out = tmp_path / "results"
        done = _collect(campaign, out, env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert leftover.wait(timeout=30) is not None  # removed before the boot
    finally:
        if leftover.poll() is None:
            leftover.kill()
            leftover.wait()
    calls = [json.loads(line) for line in (home / "calls.jsonl").read_text().splitlines()]
    calls = [c for c in calls if c[:1] != ["compose"]]  # the resolver looked for a compose plugin
    off, k2 = "mtpverdict-deployed-off_A-boot1", "mtpverdict-deployed-ngram_k2-boot1"
    assert [c[0] for c in calls] == ["rm", "run", "stop", "rm", "run", "stop"]
    names = [c[-1] for c in calls if c[0] == "rm"]  # the boots run in their drawn order
    assert sorted(names) == sorted([off, k2])
    assert [c[-1] for c in calls if c[0] in ("rm", "stop")] == [names[0], names[0], names[1], names[1]]
    run = calls[1 + 3 * names.index(off)]
    assert run[:4] == ["run", "--rm", f"--name={off}", "--ipc=host"]
    assert "--shm-size=1073741824" in run and "--env=FAKE_SEAT=seat-env" in run
    assert not any(a.startswith("--restart") for a in run)
    tail = [str(FAKE), "--port", str(port), "--tps", "400", "--leak-env", "FAKE_SEAT"]
    assert f"--entrypoint={sys.executable}" in run
    assert run[run.index("vllm/vllm-openai:v0.32.0") + 1 :] == tail
    boots = _boots(out)
    assert boots["off_A"]["container"]["removed_leftover"] is True
    assert boots["ngram_k2"]["container"]["removed_leftover"] is False
    assert boots["ngram_k2"]["container"]["argv"][-2:] == ["--speculative-config", K2]
    assert boots["ngram_k2"]["argv"][-2:] == ["--speculative-config", K2]  # what the engine ran
    assert boots["ngram_k2"]["observed_k"] == 2
    assert not list(home.glob("*.pid"))  # every container stopped


@pytest.mark.parametrize(
    ("server", "key", "says"),
    [
        ('compose = "c.yaml"\ncommand = ["x"]', "server.compose", "not both"),
        ('command = ["x"]\nservice = "seat"', "server.service", "needs server.compose"),
        ('command = ["x"]\nlaunch = "docker"', "server.launch", "needs server.compose"),
        ('compose = "c.yaml"\nshell = true', "server.shell", "runs as it is"),
        ('command = ["x"]\nbefore_boot = [[]]', "server.before_boot[0]", "non-empty argv"),
        (
            'command = ["x y"]\nshell = true\nbefore_boot = [["a", "b"]]',
            "server.before_boot[0]",
            "one string",
        ),
        ('command = ["x"]\nmin_available_memory_gib = 0', "server.min_available_memory_gib", ""),
    ],
)
def test_the_deployment_keys_are_checked(tmp_path: Path, server: str, key: str, says: str) -> None:
    path = tmp_path / "campaign.toml"
    path.write_text(
        'campaign_version = 1\nid = "c"\ntitle = "t"\nconcurrency = [1]\nreps = 1\n'
        f'[server]\nmode = "launch"\n{server}\n[[arms]]\nname = "off"\nrole = "control"\n'
        '[[workloads]]\nid = "w"\nprompt = "p"\nmax_tokens = 4\n'
    )
    with pytest.raises(CampaignError) as caught:
        load_campaign_file(path)
    found = [p for p in caught.value.problems if p.key == key]
    assert found and says in found[0].message, caught.value.problems


def test_the_compose_path_is_the_campaign_files(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    path = tmp_path / "deploy" / "campaign.toml"
    path.write_text(
        'campaign_version = 1\nid = "c"\ntitle = "t"\nconcurrency = [1]\nreps = 1\n'
        '[server]\nmode = "launch"\ncompose = "compose.yaml"\nenv_file = "seat.env"\nprofiles = ["mtp"]\n'
        '[[arms]]\nname = "off"\nrole = "control"\n[[workloads]]\nid = "w"\nprompt = "p"\nmax_tokens = 4\n'
    )
    compose = load_campaign_file(path).server.compose
    assert compose is not None
    assert compose.file == str(tmp_path / "deploy" / "compose.yaml")
    assert compose.env_file == str(tmp_path / "deploy" / "seat.env")
    assert compose.profiles == ("mtp",) and compose.launch == "native"


@pytest.mark.parametrize(
    ("service", "server_extra", "env", "says"),
    [
        (
            "    image: i:1.0\n    command: [--model, '${MODEL}']\n",
            "",
            {},
            "cannot derive the arms: services.seat.command uses",
        ),
        ("    image: i:1.0\n", "", {}, "sets neither entrypoint nor command"),
        (
            "    image: i:1.0\n    command: [m]\n    environment: {A: '1'}\n",
            "[server.env]\nA = '2'",
            {},
            "A: the campaign sets otherwise than",
        ),
        (
            "    image: i:1.0\n    command: [m]\n",
            "",
            {"MTPVERDICT_COMPOSE": "none"},
            "needs a Compose v2 to resolve",
        ),
    ],
)
def test_a_service_collect_cannot_derive_arms_from_is_bad_input(
    tmp_path: Path,
    port: int,
    resolver: object,
    service: str,
    server_extra: str,
    env: dict[str, str],
    says: str,
) -> None:
    (tmp_path / "compose.yaml").write_text(f"services:\n  seat:\n{service}")
    campaign = _campaign(tmp_path, port, server_extra)
    done = subprocess.run(
        [*CLI, "collect", str(campaign), "--out", str(tmp_path / "results"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 2, done.stdout + done.stderr  # README: bad input
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "results").exists()
