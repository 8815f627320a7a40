"""Campaign files that drive tests/fakeserver.py through the real collector."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

FAKE = Path(__file__).resolve().parent.parent / "fakeserver.py"
ARMS = {  # name -> (role, method, k, fake acceptance)
    "off_A": ("control", None, None, None),
    "ngram_k2": ("candidate", "ngram", 2, 0.9),
    "draft_random_k2": ("candidate", "draft_model", 2, 0.0),
    "off_B": ("control", None, None, None),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def campaign_text(
    port: int,
    *,
    faults: dict[str, str] | None = None,
    reps: int = 2,
    concurrency: str = "[1, 4]",
    boots: int = 1,
    tps: int = 400,
    stall: int = 3,
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
    command = json.dumps([sys.executable, str(FAKE), "--port", "{port}", "--tps", str(tps), "{spec}"])
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
