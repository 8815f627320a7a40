"""Proof that a process is a server this collect launched, checked through /proc before any signal.

A launched server carries a random per-boot token and the path of its start file in its environment;
the start file records the token, the server's pid, the process group collect created for it and the
kernel's start time of that process. A later `collect --resume` signals a left-over server only when
all of them still match what /proc shows: a start file's word alone (a copied or forged file, a pid
reused since) never leads to a signal.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

BOOT_TOKEN_ENV = "MTPVERDICT_BOOT_TOKEN"
BOOT_FILE_ENV = "MTPVERDICT_BOOT_FILE"
TOKEN_BYTES = 16  # 128 random bits: no process carries a matching token by chance
TOKEN_PATTERN = re.compile(r"^[0-9a-f]{32}$")
STAT_START_FIELD = 19  # starttime is field 22 of /proc/PID/stat, the 20th after the ")" (proc(5))
EXIT_WAIT_SECONDS = 30.0  # a killed server's port must be free before the next boot starts


@dataclass(frozen=True, slots=True)
class ProcStat:
    """What /proc/PID/stat says of a process: state, process group, session, start time (ticks)."""

    state: str
    pgrp: int
    session: int
    start_ticks: int


def read_stat(pid: int) -> ProcStat | None:
    """The process's /proc/PID/stat fields, or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the command name in parentheses may hold spaces
    try:
        return ProcStat(fields[0], int(fields[2]), int(fields[3]), int(fields[STAT_START_FIELD]))
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class ProcessMark:
    """What identifies one launched server: pid, its own process group, start time, token, start file."""

    pid: int
    pgid: int
    start_ticks: int
    token: str
    owner: str  # the resolved path of the start file the server was launched for

    def as_json(self) -> dict[str, Any]:
        """The fields a start file keeps (its own path is the owner)."""
        return {"pid": self.pid, "pgid": self.pgid, "start_ticks": self.start_ticks, "token": self.token}

    @classmethod
    def from_json(cls, data: dict[str, Any], owner: Path) -> ProcessMark | None:
        """The mark a start file records, or None when it records none (or a malformed one)."""
        pid, pgid, ticks, token = (data.get(k) for k in ("pid", "pgid", "start_ticks", "token"))
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (pid, pgid, ticks)):
            return None
        if not isinstance(token, str) or not TOKEN_PATTERN.match(token):
            return None
        assert isinstance(pid, int) and isinstance(pgid, int) and isinstance(ticks, int)
        return cls(pid, pgid, ticks, token, str(owner.resolve()))


def new_token() -> str:
    return secrets.token_hex(TOKEN_BYTES)


def launch_env(token: str, owner: Path) -> dict[str, str]:
    """The environment entries that let a later resume recognise this server and its children."""
    return {BOOT_TOKEN_ENV: token, BOOT_FILE_ENV: str(owner.resolve())}


def mark_launched(pid: int, token: str, owner: Path) -> ProcessMark | None:
    """The mark of a server just started as the leader of its own session; None if it already exited."""
    found = read_stat(pid)
    if found is None or found.pgrp != pid:
        return None
    return ProcessMark(pid, pid, found.start_ticks, token, str(owner.resolve()))


class StopStatus(StrEnum):
    STOPPED = "stopped"  # proven ours and killed
    GONE = "gone"  # nothing of it is left
    REFUSED = "refused"  # something is there that cannot be proven ours: not signalled


@dataclass(frozen=True, slots=True)
class StopOutcome:
    status: StopStatus
    detail: str


def _carries(pid: int, mark: ProcessMark) -> str | None:
    """None when the process's environment holds the mark's token and start file; else why not."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError as exc:
        return f"its environment cannot be read ({exc.strerror or type(exc).__name__})"
    if f"{BOOT_TOKEN_ENV}={mark.token}".encode() not in environ:
        return "it does not carry this boot's token"
    if f"{BOOT_FILE_ENV}={mark.owner}".encode() not in environ:
        return "it was launched for another start file (a copied results directory?)"
    return None


def _leader_mismatch(found: ProcStat, mark: ProcessMark) -> str | None:
    if found.start_ticks != mark.start_ticks:
        return "its start time differs from the one recorded at launch (the pid was reused)"
    if found.pgrp != mark.pgid or mark.pgid != mark.pid:
        return "it does not lead the process group collect created for the server"
    return _carries(mark.pid, mark)


def _group_members(mark: ProcessMark) -> list[int]:
    """Live processes of the mark's process group (the leader excluded), by a scan of /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != mark.pid:
            found = read_stat(int(entry.name))
            if found is not None and found.pgrp == mark.pgid and found.state != "Z":
                members.append(int(entry.name))
    return members


def stop_marked(mark: ProcessMark) -> StopOutcome:
    """SIGKILL what is left of a marked server's process group, if and only if it is proven ours."""
    leader = read_stat(mark.pid)
    if leader is not None and leader.state != "Z":
        why = _leader_mismatch(leader, mark)
        if why is not None:
            return StopOutcome(StopStatus.REFUSED, f"pid {mark.pid} was not signalled: {why}")
        try:
            os.killpg(mark.pgid, signal.SIGKILL)
        except ProcessLookupError:
            return StopOutcome(StopStatus.GONE, f"the server (pid {mark.pid}) had exited")
        except PermissionError:
            return StopOutcome(StopStatus.REFUSED, f"pid {mark.pid} was not signalled: permission denied")
        _wait_gone([mark.pid, *_group_members(mark)], EXIT_WAIT_SECONDS)
        return StopOutcome(StopStatus.STOPPED, f"stopped the server left running (pid {mark.pid})")
    return _stop_members(mark)


def _stop_members(mark: ProcessMark) -> StopOutcome:
    """The leader is gone: kill each member of its group that carries the token, leave the rest."""
    killed, refused = [], []
    for pid in _group_members(mark):
        try:
            handle = os.pidfd_open(pid)  # from here on the signal reaches this process or none
        except OSError:
            continue
        try:
            found = read_stat(pid)
            why = (
                "it started before the server"
                if found is None or found.start_ticks < mark.start_ticks
                else _carries(pid, mark)
            )
            if why is None:
                signal.pidfd_send_signal(handle, signal.SIGKILL)
                killed.append(pid)
            else:
                refused.append(f"pid {pid} was not signalled: {why}")
        except OSError:
            continue
        finally:
            os.close(handle)
    _wait_gone(killed, EXIT_WAIT_SECONDS)
    parts = [f"stopped {len(killed)} process(es) its server left running (pids {killed})"] if killed else []
    if refused:
        return StopOutcome(StopStatus.REFUSED, "; ".join([*parts, *refused]))
    return StopOutcome(StopStatus.STOPPED if killed else StopStatus.GONE, "; ".join(parts))


def _wait_gone(pids: list[int], seconds: float) -> None:
    """Wait, up to `seconds`, until each process has exited (gone, or a zombie nobody reaps yet)."""
    deadline = time.monotonic() + seconds
    for pid in pids:
        while time.monotonic() < deadline:
            found = read_stat(pid)
            if found is None or found.state == "Z":
                break
            time.sleep(0.1)
