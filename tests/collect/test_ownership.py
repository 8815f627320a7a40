"""The proof of ownership itself: what a launched server carries, and what stop_marked signals."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mtpverdict.collect.ownership import (
    BOOT_FILE_ENV,
    BOOT_TOKEN_ENV,
    ProcessMark,
    StopStatus,
    read_stat,
    stop_marked,
)
from mtpverdict.collect.server import LaunchedServer

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]
# the leader starts a child in its own process group, prints its pid, and exits at once
ABANDONS_A_CHILD = [
    sys.executable,
    "-c",
    "import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', 'import time; "
    "time.sleep(300)']); print(child.pid, flush=True)",
]


def _alive(pid: int) -> bool:
    found = read_stat(pid)
    return found is not None and found.state != "Z"


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[list[LaunchedServer]]:
    servers: list[LaunchedServer] = []
    yield servers
    for server in servers:
        server.stop(1.0)


def _launch(tmp_path: Path, launched: list[LaunchedServer], argv: list[str]) -> LaunchedServer:
    owner = tmp_path / "raw" / "boots" / "off_A-boot1.json"
    owner.parent.mkdir(parents=True, exist_ok=True)
    server = LaunchedServer(argv, {}, tmp_path / "server.log", owner)
    server.start()
    launched.append(server)
    return server


def _environ(pid: int) -> list[bytes]:
    """The process's environment; empty while its exec is still replacing its memory (a loaded machine
    can show that just after Popen returns), so it is read again until it is there."""
    for _ in range(200):
        found = Path(f"/proc/{pid}/environ").read_bytes()
        if found:
            return found.split(b"\0")
        time.sleep(0.05)
    return []


def test_a_launched_server_carries_its_token_and_start_file(
    tmp_path: Path, launched: list[LaunchedServer]
) -> None:
    server = _launch(tmp_path, launched, SLEEPER)
    mark = server.mark
    assert mark is not None and mark.pid == mark.pgid == server.pid
    environ = _environ(mark.pid)
    assert f"{BOOT_TOKEN_ENV}={mark.token}".encode() in environ
    assert f"{BOOT_FILE_ENV}={mark.owner}".encode() in environ
    again = ProcessMark.from_json(mark.as_json(), Path(mark.owner))
    assert again == mark


def test_a_proven_server_is_stopped(tmp_path: Path, launched: list[LaunchedServer]) -> None:
    server = _launch(tmp_path, launched, SLEEPER)
    assert server.mark is not None
    outcome = stop_marked(server.mark)
    assert outcome.status == StopStatus.STOPPED and not _alive(server.mark.pid)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"start_ticks": 1}, "start time differs"),
        ({"token": "f" * 32}, "does not carry this boot's token"),
        ({"owner": "/elsewhere/raw/boots/off_A-boot1.json"}, "another start file"),
    ],
)
def test_any_mismatch_is_refused_and_nothing_is_signalled(
    tmp_path: Path, launched: list[LaunchedServer], change: dict[str, object], why: str
) -> None:
    server = _launch(tmp_path, launched, SLEEPER)
    assert server.mark is not None
    outcome = stop_marked(dataclasses.replace(server.mark, **change))  # type: ignore[arg-type]
    assert outcome.status == StopStatus.REFUSED and why in outcome.detail
    assert f"pid {server.mark.pid} was not signalled" in outcome.detail
    assert _alive(server.mark.pid)


def test_children_left_by_a_dead_leader_are_stopped_when_they_carry_the_token(
    tmp_path: Path, launched: list[LaunchedServer]
) -> None:
    server = _launch(tmp_path, launched, ABANDONS_A_CHILD)
    assert server.mark is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (tmp_path / "server.log").read_text().strip():
        time.sleep(0.05)
    child = int((tmp_path / "server.log").read_text().split()[0])
    while time.monotonic() < deadline and _alive(server.mark.pid):
        time.sleep(0.05)
    assert not _alive(server.mark.pid) and _alive(child)
    foreign = stop_marked(dataclasses.replace(server.mark, token="e" * 32))
    assert foreign.status == StopStatus.REFUSED and _alive(child)
    outcome = stop_marked(server.mark)
    assert outcome.status == StopStatus.STOPPED and str(child) in outcome.detail
    assert not _alive(child)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"pid": 10, "argv0": "/usr/bin/python3"},
        {"pid": 10, "pgid": 10, "start_ticks": 5, "token": "not hex"},
        {"pid": True, "pgid": 10, "start_ticks": 5, "token": "a" * 32},
        {"pid": 10, "pgid": 10, "start_ticks": "5", "token": "a" * 32},
    ],
)
def test_a_start_file_without_a_whole_mark_gives_none(tmp_path: Path, data: dict[str, object]) -> None:
    assert ProcessMark.from_json(data, tmp_path / "x.json") is None
