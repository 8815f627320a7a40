"""The host-state control: boots of different arms that started from materially different host states."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtpverdict.decide import decide_directory
from mtpverdict.evidence.controls import HOST_LOAD_SPREAD, HOST_MEMORY_SPREAD

from ..conftest import FIXTURES

WIN = FIXTURES / "synthetic-clean-win"
TOTAL = 128.0


def _state(available: float, load: float = 0.5) -> dict[str, Any]:
    return {
        "mem_available_gib": available,
        "mem_total_gib": TOTAL,
        "load_1m": load,
        "load_5m": load,
        "accelerators": [],
    }


def _results(tmp_path: Path, state: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Path:
    where = tmp_path / "results"
    shutil.copytree(WIN, where)
    lines = []
    for line in (where / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "boot":
            found = state(record)
            if found is not None:
                record["host_state"] = found
        lines.append(json.dumps(record, sort_keys=True, separators=(",", ":")))
    (where / "records.jsonl").write_text("\n".join(lines) + "\n")
    return where


def _control(where: Path) -> Any:
    decision = decide_directory(where, None).decision
    return next((c for c in decision.controls if c.name == "host_state"), None), decision


def test_boots_that_started_alike_pass(tmp_path: Path) -> None:
    control, decision = _control(_results(tmp_path, lambda r: _state(100.0 + r["boot"])))
    assert control is not None and control.status == "pass"
    assert control.detail not in decision.reasons


def test_an_arm_that_started_with_less_memory_is_reported(tmp_path: Path) -> None:
    low = 100.0 - HOST_MEMORY_SPREAD * TOTAL - 1.0

    def state(record: dict[str, Any]) -> dict[str, Any]:
        return _state(low if record["arm"] == "k2" and record["boot"] == 2 else 100.0)

    control, decision = _control(_results(tmp_path, state))
    assert control is not None and control.status == "warn"
    assert "MemAvailable (GiB): " in control.detail and "boot 1 started at 100.00" in control.detail
    assert f"k2 boot 2 at {low:.2f} (apart by more than {HOST_MEMORY_SPREAD * TOTAL:.2f})" in control.detail
    assert control.detail in decision.reasons  # decide reports it


def test_a_busier_host_for_one_arm_is_reported(tmp_path: Path) -> None:
    def state(record: dict[str, Any]) -> dict[str, Any]:
        return _state(100.0, 0.5 + (HOST_LOAD_SPREAD + 0.5 if record["arm"] == "off_B" else 0.0))

    control, _ = _control(_results(tmp_path, state))
    assert control is not None and control.status == "warn" and "1-minute load" in control.detail


def test_no_host_state_is_no_control(tmp_path: Path) -> None:
    control, _ = _control(_results(tmp_path, lambda r: None))
    assert control is None
    one_arm = _results(tmp_path / "one", lambda r: _state(10.0) if r["arm"] == "off_A" else None)
    assert _control(one_arm)[0] is None


def test_boots_are_compared_within_their_device_only(tmp_path: Path) -> None:
    """Two devices (here: two nodes) start from their own host states; an arm is compared with the other
    arms' boots on its device, not with the other node's."""
    low = 100.0 - HOST_MEMORY_SPREAD * TOTAL - 10.0

    def state(record: dict[str, Any]) -> dict[str, Any]:
        record["device"] = f"g{record['boot'] % 2}"
        return _state(100.0 if record["boot"] % 2 else low)

    control, _ = _control(_results(tmp_path, state))
    assert control is not None and control.status == "pass", control

    def uneven(record: dict[str, Any]) -> dict[str, Any]:
        record["device"] = f"g{record['boot'] % 2}"
        return _state(low if record["arm"] == "k2" and record["boot"] == 2 else 100.0)

    control, _ = _control(_results(tmp_path / "uneven", uneven))
    assert control is not None and control.status == "warn" and "device g0: MemAvailable" in control.detail
