"""Boot discipline: what runs and is checked before every launched boot, all of it in the boot record.

In order, as the seeds' sweeps did it by hand: a leftover container of the boot's name is removed
(launch = "docker"); the `before_boot` commands run (argv lists; `[/bin/sh, -c, LINE]` only with
shell = true), each with its exit code and output recorded, the first that fails failing the boot;
`min_available_memory_gib` is checked against MemAvailable and the free memory of every accelerator
the boot's device selects (CUDA_VISIBLE_DEVICES, ROCR_/HIP_VISIBLE_DEVICES in its environment),
waiting up to `memory_wait_seconds` for it and failing the boot with the figures otherwise; then the
host's state is recorded (collect/hoststate.py). A failure here fails the boot, never the campaign.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from mtpverdict.collect.campaign import SHELL, CampaignPlan
from mtpverdict.collect.deployment import BootDiscipline
from mtpverdict.collect.hoststate import read_host_state
from mtpverdict.collect.launch import ContainerServer, remove_container
from mtpverdict.collect.server import LaunchedServer
from mtpverdict.formats.deployment import Accelerator, ContainerRecord, HostState, MemoryCheck, StepRecord

__all__ = ["MEMORY_POLL_SECONDS", "OUTPUT_CHARS", "check_memory", "prepare_boot", "run_steps", "selected"]

OUTPUT_CHARS = 4096  # the end of a step's output is what says why it failed
OUTPUT_BYTES = 4 * OUTPUT_CHARS  # what is kept of it as it streams (a UTF-8 character is at most 4)
READ_BYTES = 1 << 16
POLL_SECONDS = 0.5  # how often a step's deadline is looked at while it prints nothing
MEMORY_POLL_SECONDS = 2.0  # MemAvailable after a container's exit settles within seconds


def _tail(data: bytes) -> str:
    return data.decode("utf-8", "replace")[-OUTPUT_CHARS:]


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the step's whole process group (its own session): a child it started goes too."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _run_bounded(argv: Sequence[str], timeout: float) -> tuple[int | None, bytes]:
    """Run one step in its own process group, keeping only the last OUTPUT_BYTES of what it prints:
    its exit code (None when it did not finish within `timeout`, its group then killed) and the tail."""
    deadline = time.monotonic() + timeout
    process = subprocess.Popen(  # noqa: S603 - an argv list from the campaign file
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env=dict(os.environ),
    )
    tail = bytearray()
    finished = True
    assert process.stdout is not None  # noqa: S101 - stdout=PIPE
    with process.stdout as out:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                finished = False
                break
            ready, _, _ = select.select([out], [], [], min(left, POLL_SECONDS))
            data = os.read(out.fileno(), READ_BYTES) if ready else None
            if data == b"" or (data is None and process.poll() is not None):
                break  # the end of its output, or it exited while a child it left holds the pipe
            if data:
                tail += data
                del tail[:-OUTPUT_BYTES]
        try:
            code: int | None = (
                process.wait(timeout=max(deadline - time.monotonic(), 0.0)) if finished else None
            )
        except subprocess.TimeoutExpired:
            code = None
        _kill_group(process)  # what it left running, or the step itself when it did not finish
        process.wait()
    return code, bytes(tail)


def run_steps(
    steps: Sequence[Sequence[str]], shell: bool, timeout: float, clock: Callable[[], float] = time.monotonic
) -> tuple[list[StepRecord], str | None]:
    """Run the commands in order until one fails: their records, and why the boot fails (or None)."""
    records: list[StepRecord] = []
    for i, step in enumerate(steps):
        argv = [SHELL, "-c", step[0]] if shell else list(step)
        start = clock()
        code: int | None = None
        error: str | None = None
        output = ""
        try:
            code, tail = _run_bounded(argv, timeout)
            output = _tail(tail)
            if code is None:
                error = f"did not finish within {timeout:.0f} s (server.before_boot_timeout)"
        except OSError as exc:
            error = f"cannot be run: {exc.strerror or exc}"
        records.append(StepRecord(tuple(argv), code, round(clock() - start, 3), output, error))
        if error is not None or code != 0:
            why = error or f"exited with status {code}"
            last = output.strip().splitlines()[-1:] if output.strip() else []
            return records, f"before_boot[{i}] {' '.join(argv)[:200]} {why}" + (
                f": {last[0][:200]}" if last else ""
            )
    return records, None


# the variables that select a boot's accelerators, by the tool that numbers them (a device's env)
SELECTION = {
    "nvidia-smi": ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"),
    "rocm-smi": ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"),
}


def selected(accelerators: Sequence[Accelerator], env: Mapping[str, str]) -> list[Accelerator]:
    """The accelerators a boot's environment selects by index (CUDA_VISIBLE_DEVICES=1,2 and the like);
    all of them when it selects none, or names them otherwise (UUIDs, `all`), which is the cautious
    reading."""
    out = []
    for accelerator in accelerators:
        chosen = [env[name] for name in SELECTION[accelerator.source] if name in env]
        if not chosen:
            out.append(accelerator)
            continue
        indices = [part.strip() for part in chosen[0].split(",") if part.strip()]
        if not all(i.isdigit() for i in indices):
            return list(accelerators)
        if str(accelerator.index) in indices:
            out.append(accelerator)
    return out


def _accelerator_free_gib(state: HostState, env: Mapping[str, str]) -> float | None:
    free = [a.memory_free_mib for a in selected(state.accelerators, env) if a.memory_free_mib is not None]
    return round(min(free) / 1024, 3) if free else None


def check_memory(
    required: float,
    wait_seconds: float,
    state: Callable[[], HostState],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    env: Mapping[str, str] = {},  # noqa: B006 - read only
) -> tuple[MemoryCheck, str | None]:
    """Wait until MemAvailable and the free memory of every reporting accelerator the boot's `env`
    selects reach `required` GiB, up to `wait_seconds`: the last figures, and why the boot fails
    (None when the memory was there)."""
    start = clock()
    while True:
        now = state()
        available, accelerator = now.mem_available_gib, _accelerator_free_gib(now, env)
        enough = available is not None and available >= required
        enough = enough and (accelerator is None or accelerator >= required)
        waited = round(clock() - start, 3)
        if enough or waited >= wait_seconds:
            break
        sleep(min(MEMORY_POLL_SECONDS, max(wait_seconds - waited, 0.0)))
    check = MemoryCheck(required, available, accelerator, waited, enough)
    if enough:
        return check, None
    seen = "MemAvailable unreadable" if available is None else f"MemAvailable {available:.1f} GiB"
    if accelerator is not None:
        seen += f", least free accelerator memory {accelerator:.1f} GiB"
    return check, (
        f"the host did not have {required:g} GiB available within {wait_seconds:.0f} s "
        f"(server.min_available_memory_gib): {seen}"
    )


def prepare_boot(
    plan: CampaignPlan,
    server: LaunchedServer | None,
    record: dict[str, Any],
    state: Callable[[], HostState] = read_host_state,
    env: Mapping[str, str] = {},  # noqa: B006 - read only
) -> str | None:
    """Everything the module's docstring lists, before a launched boot starts (`env`: the boot's server
    environment, whose device selection says which accelerators the memory check reads); the boot
    record gets `container`, `before_boot`, `memory_check` and `host_state`. Why the boot fails, or None."""
    if server is None:
        return None
    if isinstance(server, ContainerServer):
        removed = remove_container(server.name)
        record["container"] = msgspec.to_builtins(ContainerRecord(server.name, tuple(server.argv), removed))
    discipline: BootDiscipline = plan.server.discipline
    failure = None
    if discipline.before_boot:
        steps, failure = run_steps(discipline.before_boot, plan.server.shell, discipline.before_boot_timeout)
        record["before_boot"] = msgspec.to_builtins(steps)
    if failure is None and discipline.min_available_memory_gib is not None:
        check, failure = check_memory(
            discipline.min_available_memory_gib, discipline.memory_wait_seconds, state, env=env
        )
        record["memory_check"] = msgspec.to_builtins(check)
    record["host_state"] = msgspec.to_builtins(state())
    return failure
