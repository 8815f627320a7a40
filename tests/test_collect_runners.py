"""The shared runners of a collect (tests/conftest.py): what they stop, and when, and who must use them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import conftest as shared
from .conftest import ROOT, collect_running, run_collect, run_process

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def stopped(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories whose left-over servers the runners stopped, in order."""
    calls: list[Path] = []
    monkeypatch.setattr(shared, "stop_servers", calls.append)
    return calls


def _exits(code: int, said: str = "") -> list[str]:
    return [sys.executable, "-c", f"import sys; print({said!r}); sys.exit({code})"]


def test_run_process_captures_text_and_leaves_the_exit_to_the_caller() -> None:
    done = run_process(_exits(3, "said"))
    assert (done.returncode, done.stdout) == (3, "said\n")


def test_run_collect_returns_an_expected_exit_and_stops_nothing(tmp_path: Path, stopped: list[Path]) -> None:
    assert run_collect(_exits(2), tmp_path, expect=2).returncode == 2
    assert run_collect(_exits(4), tmp_path).returncode == 4  # no expectation: the caller judges
    assert stopped == []


def test_run_collect_stops_the_servers_of_an_unexpected_exit(tmp_path: Path, stopped: list[Path]) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"collect exited 3, not 0:\nbooted off_A"):
        run_collect(_exits(3, "booted off_A"), tmp_path, expect=0)
    assert stopped == [tmp_path]


def test_run_collect_stops_the_servers_of_a_collect_that_times_out(
    tmp_path: Path, stopped: list[Path]
) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        run_collect(SLEEPER, tmp_path, expect=0, timeout=0.5)
    assert stopped == [tmp_path]


def test_collect_running_kills_the_collect_and_stops_its_servers(tmp_path: Path, stopped: list[Path]) -> None:
    with collect_running(subprocess.Popen(SLEEPER), tmp_path) as proc:
        assert proc.poll() is None
    assert proc.returncode is not None  # killed and reaped
    assert stopped == [tmp_path]


def test_collect_running_can_leave_the_servers_to_the_test(tmp_path: Path, stopped: list[Path]) -> None:
    with collect_running(subprocess.Popen(SLEEPER), tmp_path, keep_servers=True) as proc:
        pass
    assert proc.returncode is not None and stopped == []


def test_collect_running_stops_the_servers_of_a_failed_block_all_the_same(
    tmp_path: Path, stopped: list[Path]
) -> None:
    with (
        pytest.raises(AssertionError, match="the block failed"),
        collect_running(subprocess.Popen(SLEEPER), tmp_path, keep_servers=True) as proc,
    ):
        raise AssertionError("the block failed")
    assert proc.returncode is not None and stopped == [tmp_path]


def test_real_server_tests_run_their_commands_through_the_shared_runners() -> None:
    """A collect's servers outlive a timeout of subprocess.run, and a failed assertion after it."""
    direct = [
        f"{path.name}:{n}"
        for path in sorted((ROOT / "tests").rglob("test_real_*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bsubprocess\.run\(", line)
    ]
    assert direct == [], "use run_collect (a collect) or run_process (a command that launches no server)"
