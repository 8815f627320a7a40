"""Shared test fixtures and the --regen-golden and --regen-docs options (regenerated only on purpose)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import settings

# Tests are deterministic: hypothesis draws from a fixed seed sequence unless HYPOTHESIS_PROFILE=explore.
settings.register_profile("default", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
DATA = Path(__file__).resolve().parent / "data"
GOLDEN = Path(__file__).resolve().parent / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.json from the current code instead of comparing",
    )
    parser.addoption(
        "--regen-docs",
        action="store_true",
        default=False,
        help="rewrite the docs' session outputs and docs/cli-reference.md from the current code",
    )


@pytest.fixture
def regen_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--regen-golden"))


def wait_for_request(
    out: Path,
    arm: str,
    *,
    timed: bool = False,
    proc: subprocess.Popen[bytes] | None = None,
    timeout: float = 120.0,
) -> None:
    """Block until `arm` has a request record in out/records.jsonl (a timed one, not a warm-up, when
    `timed`); fail when `proc` (the collect being watched) ends first or the time runs out."""
    needles = (f'"arm":"{arm}"', '"kind":"request"', *(('"warmup":false',) if timed else ()))
    path = out / "records.jsonl"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(all(n in line for n in needles) for line in path.read_text().splitlines()):
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"collect ended (exit {proc.returncode}) before {arm} ran a request")
        time.sleep(0.05)
    pytest.fail(f"no request record for {arm} within {timeout} s")


VLLM_ENV = ("MTPVERDICT_VLLM_PYTHON", "MTPVERDICT_MODELS", "collectors/vllm-cpu/ci.sh")
LLAMACPP_ENV = ("MTPVERDICT_LLAMA_SERVER", "MTPVERDICT_GGUF", "collectors/llamacpp-cpu/ci.sh")


def real_server(names: tuple[str, str, str]) -> tuple[str, str]:
    """The two paths a real-server test needs, from the environment (`names`: the two variables and the
    script that sets them). Without them the test is skipped, or fails where
    MTPVERDICT_REQUIRE_REAL_SERVER says this run must reach a real server (CI)."""
    first, second, script = names
    values = os.environ.get(first), os.environ.get(second)
    if values[0] and values[1]:
        return values[0], values[1]
    if os.environ.get("MTPVERDICT_REQUIRE_REAL_SERVER"):
        pytest.fail(f"{first} and {second} must be set ({script})")
    pytest.skip(f"no real server here: set {first} and {second}")
