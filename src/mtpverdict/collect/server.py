"""Serving processes for `collect`: launch an arm's server as an argv list, capture its log, stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

from mtpverdict.collect.ownership import ProcessMark, launch_env, mark_launched, new_token
from mtpverdict.collect.redact import RedactingPipe, Redactor

LOG_TAIL_BYTES = 4000


class LaunchedServer:
    """One server process in its own process group, its output appended to a log file.

    The argv is executed directly, never through a shell (a campaign's shell mode arrives here as
    [/bin/sh, -c, LINE], its values already quoted). The server and its children carry a fresh
    per-boot token and the path of the boot's start file (`owner`) in their environment, so that
    `mark` proves later which processes are this server's (mtpverdict.collect.ownership). Stopping
    sends SIGTERM to the whole group, waits the grace period, then SIGKILLs what is left, so no child
    (e.g. an engine core process) outlives it. With secrets to keep (collect/redact.py), the output
    reaches the log through a pipe that redacts it as it streams; without, it is appended directly.
    """

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        owner: Path,
        redactor: Redactor | None = None,
    ) -> None:
        self.argv = argv
        self.log_path = log_path
        self.owner = owner
        self._redactor = redactor
        self._pipe: RedactingPipe | None = None
        self._log: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._token = new_token()
        self._env = {**os.environ, **env, **launch_env(self._token, owner)}
        self.started_at = 0.0
        self.mark: ProcessMark | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        output: IO[bytes] | int = log
        if self._redactor:
            self._pipe = RedactingPipe(log, self._redactor)  # the pipe's thread owns the log from here
            output = self._pipe.write_fd
        else:
            self._log = log
        self.started_at = time.monotonic()
        try:
            self._proc = subprocess.Popen(  # noqa: S603 - an argv list from the campaign file, no shell
                self.argv,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env,
                start_new_session=True,  # its own session and process group: pgid == pid
            )
        except BaseException:
            if self._pipe is not None:  # nothing will print into it: drain, close the log
                self._pipe.finish()
                self._pipe = None
            raise
        if self._pipe is not None:
            self._pipe.close_child_end()  # the child holds its copy; EOF once every holder exits
        self.mark = mark_launched(self._proc.pid, self._token, self.owner)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def returncode(self) -> int | None:
        """None while running; the exit status once it has exited."""
        return None if self._proc is None else self._proc.poll()

    def stop(self, grace_seconds: float) -> int | None:
        """SIGTERM the process group, wait up to `grace_seconds`, then SIGKILL; return the exit status."""
        proc = self._proc
        if proc is None:
            return None
        try:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=grace_seconds)
                except subprocess.TimeoutExpired:
                    _signal_group(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
            # children of the group that ignored SIGTERM must not outlive the boot
            _signal_group(proc.pid, signal.SIGKILL)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
            if self._pipe is not None:
                self._pipe.finish()
                self._pipe = None
        return proc.returncode

    def log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - LOG_TAIL_BYTES))
                return fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
