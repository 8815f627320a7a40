"""The host's state before a boot: MemAvailable, load average, and each accelerator's memory, clocks and heat.

Read from /proc/meminfo and /proc/loadavg, and from `nvidia-smi` or `rocm-smi` where one is on PATH
and answers within ACCELERATOR_SECONDS; a figure a source does not give is None, never a guess.
Clocks are read, not pinned: the record says what they were, as the seeds' sweeps noted them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from mtpverdict.formats.deployment import Accelerator, HostState

__all__ = ["ACCELERATOR_SECONDS", "accelerators", "read_host_state", "read_loadavg", "read_meminfo"]

ACCELERATOR_SECONDS = 10.0  # nvidia-smi answers in well under a second; a hung driver must not hang a boot
KIB_PER_GIB = 1024 * 1024
BYTES_PER_MIB = 1024 * 1024
NVIDIA_QUERY = "index,name,memory.total,memory.free,clocks.sm,clocks.mem,temperature.gpu"

Runner = Callable[[Sequence[str]], str | None]


def _run(argv: Sequence[str]) -> str | None:
    """A tool's standard output, or None when it is absent, fails or takes too long."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv
            list(argv),
            capture_output=True,
            text=True,
            timeout=ACCELERATOR_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def read_meminfo(proc: Path = Path("/proc")) -> tuple[float | None, float | None]:
    """(MemAvailable, MemTotal) in GiB; None where the file or the line is missing."""
    try:
        text = (proc / "meminfo").read_text()
    except OSError:
        return None, None
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemAvailable", "MemTotal") and parts and parts[0].isdigit():
            found[name] = round(int(parts[0]) / KIB_PER_GIB, 3)
    return found.get("MemAvailable"), found.get("MemTotal")


def read_loadavg(proc: Path = Path("/proc")) -> tuple[float | None, float | None]:
    """The one- and five-minute load averages."""
    try:
        parts = (proc / "loadavg").read_text().split()
        return float(parts[0]), float(parts[1])
    except (OSError, ValueError, IndexError):
        return None, None


def _number(text: str) -> float | None:
    cleaned = text.strip().strip("()").lower().removesuffix("mhz").strip()
    try:
        return float(cleaned)
    except ValueError:
        return None


def _nvidia(text: str) -> list[Accelerator]:
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 7 or not cells[0].isdigit():
            continue
        total, free, sm, mem, temp = (_number(c) for c in cells[2:])
        out.append(
            Accelerator(
                index=int(cells[0]),
                source="nvidia-smi",
                name=cells[1] or None,
                memory_total_mib=total,
                memory_free_mib=free,
                sm_clock_mhz=sm,
                memory_clock_mhz=mem,
                temperature_c=temp,
            )
        )
    return out


def _rocm(text: str) -> list[Accelerator]:
    """rocm-smi --json: one object per card ("card0": {...}), its keys as rocm-smi words them."""
    try:
        loaded = json.loads(text)
    except ValueError:
        return []
    out = []
    for card, fields in sorted(loaded.items()) if isinstance(loaded, dict) else ():
        if not (isinstance(fields, dict) and card.startswith("card") and card[4:].isdigit()):
            continue

        def field(*words: str, values: dict[str, object] = fields) -> float | None:
            for key, value in values.items():
                if all(w in key.lower() for w in words):
                    return _number(str(value))
            return None

        total, used = field("vram total memory"), field("vram total used")
        temperature = field("temperature", "edge")
        out.append(
            Accelerator(
                index=int(card[4:]),
                source="rocm-smi",
                name=str(fields.get("Card series") or fields.get("Card Series") or "") or None,
                memory_total_mib=None if total is None else round(total / BYTES_PER_MIB, 1),
                memory_free_mib=None
                if total is None or used is None
                else round((total - used) / BYTES_PER_MIB, 1),
                sm_clock_mhz=field("sclk"),
                memory_clock_mhz=field("mclk"),
                temperature_c=temperature if temperature is not None else field("temperature"),
            )
        )
    return out


def accelerators(run: Runner = _run) -> tuple[Accelerator, ...]:
    """What nvidia-smi (else rocm-smi) reports of each accelerator; () when neither answers."""
    text = run(["nvidia-smi", f"--query-gpu={NVIDIA_QUERY}", "--format=csv,noheader,nounits"])
    if text is not None:
        return tuple(_nvidia(text))
    text = run(
        ["rocm-smi", "--showmeminfo", "vram", "--showtemp", "--showclocks", "--showproductname", "--json"]
    )
    return tuple(_rocm(text)) if text is not None else ()


def read_host_state(proc: Path = Path("/proc"), run: Runner = _run) -> HostState:
    """The host as it is now (see the module's docstring)."""
    available, total = read_meminfo(proc)
    load_1m, load_5m = read_loadavg(proc)
    return HostState(available, total, load_1m, load_5m, accelerators(run))
