"""Campaign files that drive tests/fakeserver.py through the real collector."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# the shared collect runners, where the collect tests have always found them
from ..conftest import collect_running as collect_running
from ..conftest import run_collect as run_collect
from ..conftest import stop_servers as stop_servers

FAKE = Path(__file__).resolve().parent.parent / "fakeserver.py"
ARMS = {  # name -> (role, method, k, fake acceptance)
    "off_A": ("control", None, None, None),
    "ngram_k2": ("candidate", "ngram", 2, 0.9),
    "draft_random_k2": ("candidate", "draft_model", 2, 0.0),
    "off_B": ("control", None, None, None),
}


# "LOW-HIGH": draw the fake servers' ports from this range instead of the kernel's ephemeral ports, on
# a host where other work owns the rest
TEST_PORTS_ENV = "MTPVERDICT_TEST_PORTS"


def free_port() -> int:
    """A port nothing listens on now: from $MTPVERDICT_TEST_PORTS when set, else one the kernel picks."""
    span = os.environ.get(TEST_PORTS_ENV, "")
    if not span:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    low, _, high = span.partition("-")
    ports = list(range(int(low), int(high or low) + 1))
    random.shuffle(ports)  # consecutive tests rarely draw a port whose last server is still closing
    for candidate in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is free
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return candidate
    raise RuntimeError(f"{TEST_PORTS_ENV}={span}: every port in the range is in use")


def campaign_text(
    port: int,
    *,
    faults: dict[str, str] | None = None,
    reps: int = 2,
    concurrency: str = "[1, 4]",
    boots: int = 1,
    tps: int = 400,
    stall: int = 3,
    eos_after: int = 0,
) -> str:
    """off_A, ngram k2 (acceptance 0.9), a random draft k2 (acceptance 0), off_B, on the fake server.

    A fault for an arm ("die:3", "5xx:2", "stall:1", ...) is added to that arm's serve_args, so fault
    campaigns need --allow-argv-mismatch, as any campaign whose arms differ in more than speculation.
    """
    faults = faults or {}
    arms = []
    for name, (role, method, k, accept) in ARMS.items():
        serve: list[str] = []
        if k:
            serve += [
                "--speculative-config",
                json.dumps({"num_speculative_tokens": k, "fake_accept": accept}),
            ]
        if name in faults:
            serve += ["--fault", faults[name]]
        lines = [f'name = "{name}"', f'role = "{role}"']
        if method:
            lines += [f'method = "{method}"', f"k = {k}"]
        lines.append(f"serve_args = {json.dumps(serve)}")
        arms.append("[[arms]]\n" + "\n".join(lines))
    eos = ["--eos-after", str(eos_after)] if eos_after else []
    command = json.dumps([sys.executable, str(FAKE), "--port", "{port}", "--tps", str(tps), *eos, "{spec}"])
    return f"""
campaign_version = 1
id = "fake"
title = "collector test against the fake server"
window_tokens = 1024
concurrency = {concurrency}
reps = {reps}
warmup_runs = 1
boots = {boots}

[scope]
device = "test"
engine = "vllm"
model = "fake-model"

[server]
mode = "launch"
command = {command}
port = {port}
boot_timeout = 30
grace_seconds = 5
stall_seconds = {stall}

{chr(10).join(arms)}

[[workloads]]
id = "chat"
prompt = "Write about rivers."
max_tokens = 24
expect_identical = true
ignore_eos = true

[[coherence]]
id = "words"
prompt = "Say a word."
expected = " "

[likelihood]
text = "The capital of France is Paris."
"""


@pytest.fixture
def port() -> int:
    return free_port()


def small_campaign(
    port: int,
    *,
    arms: tuple[tuple[str, str], ...] = (("off_A", "[]"),),
    command: str | None = None,
    shell: bool = False,
    tps: int = 400,
    reps: int = 1,
    server_extra: str = "",
    top_extra: str = "",
    boot_timeout: int = 30,
) -> str:
    """A short campaign on the fake server: the given (name, serve_args TOML) arms, one workload at c=1.

    An arm whose serve_args hold a speculative config is a candidate (ngram, its k); the others are
    controls. `command` replaces the serve command (TOML list text); `shell` sets shell = true.
    """
    blocks = []
    for name, serve in arms:
        k = json.loads(json.loads(serve)[1])["num_speculative_tokens"] if "speculative" in serve else None
        role = f'role = "candidate"\nmethod = "ngram"\nk = {k}' if k else 'role = "control"'
        blocks.append(f'[[arms]]\nname = "{name}"\n{role}\nserve_args = {serve}')
    if command is None:
        command = json.dumps([sys.executable, str(FAKE), "--port", "{port}", "--tps", str(tps), "{spec}"])
    return f"""
campaign_version = 1
id = "small"
title = "a short campaign on the fake server"
concurrency = [1]
reps = {reps}
warmup_runs = 1
{top_extra}

[server]
mode = "launch"
command = {command}
shell = {"true" if shell else "false"}
port = {port}
boot_timeout = {boot_timeout}
grace_seconds = 5
stall_seconds = 5
{server_extra}

{chr(10).join(blocks)}

[[workloads]]
id = "short"
prompt = "Write about rivers."
max_tokens = 24
ignore_eos = true
"""


def devices_campaign_text(ports: list[int], *, order_seed: int = 11, **kwargs: Any) -> str:
    """campaign_text laid out over one device per port (d0, d1, ... on nodes n0, n1, ...)."""
    text = campaign_text(ports[0], **kwargs)
    text = text.replace('title = "collector', f'order_seed = {order_seed}\ntitle = "collector', 1)
    blocks = [
        f'[[devices]]\nname = "d{i}"\nnode = "n{i}"\nport = {p}\nenv = {{ FAKE_DEVICE = "d{i}" }}'
        for i, p in enumerate(ports)
    ]
    return text + "\n" + "\n\n".join(blocks) + "\n"


def interruptible() -> None:
    """preexec_fn of a collect a test will SIGINT: Ctrl-C's default action, whatever the test runner
    inherited (a shell's background job ignores SIGINT, and an ignored signal survives exec)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for_server(
    out: Path,
    name: str = "off_A-boot1.json",
    *,
    proc: subprocess.Popen[Any] | None = None,
    timeout: float = 120,
) -> int:
    """The pid of the server a collect launched, once its start file under out/raw/boots names one; fail
    when `proc` (the collect) ends first or the time runs out."""
    path = out / "raw" / "boots" / name
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = json.loads(path.read_text()).get("pid")
        except (OSError, ValueError):
            pid = None
        if isinstance(pid, int):
            return pid
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"collect ended (exit {proc.returncode}) before it launched a server")
        time.sleep(0.05)
    pytest.fail(f"no server pid in {path} within {timeout} s")
