"""collect.discipline and collect.hoststate: the steps, the memory wait and the host's figures, in units."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from mtpverdict.collect.discipline import OUTPUT_CHARS, check_memory, run_steps
from mtpverdict.collect.hoststate import accelerators, read_host_state
from mtpverdict.formats.deployment import Accelerator, HostState

NVIDIA = "0, NVIDIA GB10, 122880, 104448, 2418, 8533, 41\n1, NVIDIA GB10, 122880, [N/A], [N/A], 8533, 40\n"
ROCM = json.dumps(
    {
        "card0": {
            "Card series": "AMD Instinct MI300X",
            "VRAM Total Memory (B)": str(192 * 1024**3),
            "VRAM Total Used Memory (B)": str(2 * 1024**3),
            "Temperature (Sensor edge) (C)": "45.0",
            "sclk clock speed:": "(2100Mhz)",
            "mclk clock speed:": "(1300Mhz)",
        },
        "system": {"Driver version": "6.8"},
    }
)


def _proc(tmp_path: Path, available_kib: int) -> Path:
    (tmp_path / "meminfo").write_text(
        f"MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   {available_kib} kB\n"
    )
    (tmp_path / "loadavg").write_text("1.50 0.75 0.20 2/300 4000\n")
    return tmp_path


def test_the_host_state_reads_meminfo_loadavg_and_nvidia_smi(tmp_path: Path) -> None:
    def run(argv: Sequence[str]) -> str | None:
        return NVIDIA if argv[0] == "nvidia-smi" else None

    state = read_host_state(_proc(tmp_path, 104857600), run)
    assert state.mem_available_gib == 100.0 and state.mem_total_gib == 125.0
    assert (state.load_1m, state.load_5m) == (1.5, 0.75)
    first, second = state.accelerators
    assert first == Accelerator(0, "nvidia-smi", "NVIDIA GB10", 122880, 104448, 2418, 8533, 41)
    assert second.memory_free_mib is None and second.sm_clock_mhz is None  # [N/A] is no figure


def test_rocm_smi_answers_where_nvidia_smi_does_not() -> None:
    (card,) = accelerators(lambda argv: ROCM if argv[0] == "rocm-smi" else None)
    assert card.source == "rocm-smi" and card.name == "AMD Instinct MI300X"
    assert card.memory_total_mib == 192 * 1024 and card.memory_free_mib == 190 * 1024
    assert (card.sm_clock_mhz, card.memory_clock_mhz, card.temperature_c) == (2100, 1300, 45.0)
    assert accelerators(lambda argv: None) == ()


def test_a_missing_proc_file_is_no_figure(tmp_path: Path) -> None:
    state = read_host_state(tmp_path, lambda argv: None)
    assert state == HostState(None, None, None, None, ())


class _Clock:
    """Time that moves only when the check sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_memory_check_waits_for_the_memory_then_passes() -> None:
    clock = _Clock()
    seen = iter([10.0, 20.0, 90.0, 90.0])

    def state() -> HostState:
        return HostState(next(seen), 128.0, 0.1, 0.1, ())

    check, failure = check_memory(80.0, 30.0, state, clock, clock.sleep)
    assert failure is None and check.passed and check.available_gib == 90.0 and check.waited_seconds == 4.0


def test_the_memory_check_fails_the_boot_with_the_figures_after_the_timeout() -> None:
    clock = _Clock()
    gpu = Accelerator(0, "nvidia-smi", "g", 81920.0, 10240.0)

    def state() -> HostState:
        return HostState(100.0, 128.0, 0.1, 0.1, (gpu,))

    check, failure = check_memory(80.0, 5.0, state, clock, clock.sleep)
    assert not check.passed and check.waited_seconds == 5.0 and check.accelerator_free_gib == 10.0
    assert failure is not None and "MemAvailable 100.0 GiB, least free accelerator memory 10.0 GiB" in failure


def test_steps_run_in_order_until_one_fails() -> None:
    ok = [sys.executable, "-c", "print('synced')"]
    bad = [sys.executable, "-c", "import sys; print('busy'); sys.exit(2)"]
    never = [sys.executable, "-c", "print('never')"]
    records, failure = run_steps([ok, bad, never], shell=False, timeout=60)
    assert [r.exit_code for r in records] == [0, 2]
    assert records[0].output == "synced\n"
    assert failure is not None and failure.startswith("before_boot[1]") and failure.endswith("status 2: busy")


def test_a_step_that_cannot_run_or_hangs_fails_the_boot() -> None:
    records, failure = run_steps([["/nonexistent/step"]], shell=False, timeout=60)
    assert records[0].exit_code is None and failure is not None and "cannot be run" in failure
    records, failure = run_steps(
        [[sys.executable, "-c", "import time; time.sleep(60)"]], shell=False, timeout=1
    )
    assert records[0].exit_code is None and failure is not None and "did not finish within 1 s" in failure


def test_a_shell_step_is_one_line_for_sh() -> None:
    records, failure = run_steps([["echo a && echo b"]], shell=True, timeout=60)
    assert failure is None and records[0].argv == ("/bin/sh", "-c", "echo a && echo b")
    assert records[0].output == "a\nb\n"


def test_the_memory_check_reads_the_accelerators_the_boots_device_selects() -> None:
    """A boot on GPU 1 waits for GPU 1's memory, not for GPU 0's, which another device's boot may hold."""
    busy = Accelerator(0, "nvidia-smi", "g", 81920.0, 1024.0)
    free = Accelerator(1, "nvidia-smi", "g", 81920.0, 81000.0)

    def state() -> HostState:
        return HostState(100.0, 128.0, 0.1, 0.1, (busy, free))

    clock = _Clock()
    check, failure = check_memory(60.0, 5.0, state, clock, clock.sleep, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert failure is None and check.passed and check.accelerator_free_gib == round(81000.0 / 1024, 3)
    check, failure = check_memory(60.0, 5.0, state, clock, clock.sleep, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert failure is not None and check.accelerator_free_gib == 1.0
    check, _ = check_memory(60.0, 5.0, state, clock, clock.sleep, env={"CUDA_VISIBLE_DEVICES": "GPU-5a1b"})
    assert check.accelerator_free_gib == 1.0  # selected by UUID: every GPU is read, the cautious reading


def test_a_step_keeps_only_the_end_of_its_output() -> None:
    """A step that prints megabytes is recorded by its last 4 KiB, read as it streams."""
    loud = [sys.executable, "-c", "import sys\nfor i in range(20000): print('x' * 200)\nprint('the end')"]
    records, failure = run_steps([loud], shell=False, timeout=120)
    assert failure is None and len(records[0].output) == OUTPUT_CHARS
    assert records[0].output.endswith("x\nthe end\n")


def test_a_step_that_times_out_takes_its_children_with_it(tmp_path: Path) -> None:
    """On timeout the step's whole process group is killed: a child it started (which held the output
    pipe, so the boot waited for it) goes too."""
    pid_file = tmp_path / "child.pid"
    step = f"sleep 40 & echo $! > {pid_file}; wait"
    start = time.monotonic()
    records, failure = run_steps([[step]], shell=True, timeout=1)
    assert failure is not None and "did not finish within 1 s" in failure
    assert time.monotonic() - start < 30  # not the child's 40 s
    stat = Path(f"/proc/{int(pid_file.read_text())}/stat")
    deadline = time.monotonic() + 30
    while (
        stat.exists()
        and stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)  # SIGKILL is delivered at once; the bound is only for a loaded machine
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z"  # gone, or a zombie
