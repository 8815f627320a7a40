"""The boot record on disk, byte for byte: fake-server campaigns against boot records recorded earlier.

tests/collect/data/boot-records.jsonl holds the boot records (and the records of the start files) that
collect wrote for the scenarios below, with what differs between machines and runs replaced by
placeholders (`normalized`): the interpreter, the fake server's path, the port, the results directory,
the ready time and the host state's readings. Each scenario is run again here and must write the same
lines: the same fields, null and absent kept apart, the same values. It covers a ready boot on each
engine, a refused and a failed boot, devices, an interrupted boot rebuilt from its start file and one
whose start file is torn.
How the file was made: `python -m tests.collect.test_boot_record > tests/collect/data/boot-records.jsonl`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mtpverdict._jsonio import record_line
from mtpverdict.collect import Collector, load_campaign_file
from mtpverdict.collect.shard import parse_shard

from .conftest import FAKE, campaign_text, devices_campaign_text, free_port
from .test_llamacpp_collect import DRAFT_K2, Arms, llama_campaign
from .test_llamacpp_collect import FAKE as FAKE_LLAMA

HOST = "{host}"  # a reading of this machine's /proc (memory, load), which no two runs share
FORGED_READY = 0.25  # no real boot is ready this soon: its first health poll waits HEALTH_POLL_SECONDS
RECORDED = Path(__file__).resolve().parent / "data" / "boot-records.jsonl"
FORGED = {  # a start file someone edited: collect keeps only what it can derive again
    "kind": "boot",
    "arm": "off_A",
    "boot": 1,
    "order": 1,
    "status": "ready",
    "ready_seconds": FORGED_READY,
    "kv_cache_tokens": 1,
    "block_size": 16,
    "num_blocks": 1,
    "max_model_len": 4096,
    "engine_version": "9.9.9-forged",
    "argv": ["--model", "forged"],
    "error": None,
    "observed_k": 0,
    "log": "raw/logs/elsewhere.log",
    "slots": 2,
}


def normalized(value: Any, swaps: dict[str, str]) -> Any:
    """`value` with every string's machine- and run-specific parts named, and ready times fixed."""
    if isinstance(value, str):
        for real, name in swaps.items():
            value = value.replace(real, name)
        return value
    if isinstance(value, list):
        return [normalized(v, swaps) for v in value]
    if isinstance(value, dict):
        out = {k: normalized(v, swaps) for k, v in value.items()}
        if isinstance(out.get("ready_seconds"), float) and out["ready_seconds"] > 2 * FORGED_READY:
            out["ready_seconds"] = 1.0  # a measured ready time (the forged one is kept)
        if isinstance(out.get("host_state"), dict):  # the host's memory and load as the boot started
            out["host_state"] = {
                k: HOST if v is not None and k != "accelerators" else v for k, v in out["host_state"].items()
            }
        return out
    return value


def _run(text: str, out: Path, *, shard: str | None = None, mismatch: bool = False) -> None:
    campaign = out.parent / f"{out.name}.toml"
    campaign.write_text(text)
    Collector(
        load_campaign_file(campaign),
        out,
        variables={},
        resume=False,
        allow_argv_mismatch=mismatch,
        on_event=lambda _: None,
        shard=None if shard is None else parse_shard(shard),
    ).run()


def _vllm(out: Path, port: int) -> None:
    """Four arms; off_A's boot 1 and off_B's boot 1 were started by a killed collect (one start file
    forged, one torn), draft_random_k2's server dies during its first measured run."""
    boots = out / "raw" / "boots"
    boots.mkdir(parents=True)
    (boots / "off_A-boot1.json").write_text(
        json.dumps({"arm": "off_A", "boot": 1, "order": 1, "record": FORGED})
    )
    (boots / "off_B-boot1.json").write_text('{"arm": "off_B", "boot": 1, "ord')
    text = campaign_text(port, reps=1, concurrency="[1]", faults={"draft_random_k2": "die:1"})
    _run(text, out, mismatch=True)


def _llama(out: Path, port: int) -> None:
    """llama.cpp: slots and the per-slot window from /props and /slots; a draft arm whose slots do not
    speculate is refused."""
    arms: Arms = (
        ("off_A", None, []),
        ("draft_k2", 2, DRAFT_K2),
        ("no_draft_k2", 2, ["--spec-type", "draft-simple", "--spec-draft-n-max", "2"]),
    )
    _run(llama_campaign(port, arms, reps=1, concurrency="[1]"), out, mismatch=True)


def _devices(out: Path, port: int) -> None:
    """The first of two devices (shard 0/2): each boot carries its device and node."""
    _run(devices_campaign_text([port, free_port()], reps=1, concurrency="[1]"), out, shard="0/2")


SCENARIOS: dict[str, Callable[[Path, int], None]] = {"vllm": _vllm, "llamacpp": _llama, "devices": _devices}


def scenario_lines(name: str, tmp: Path) -> list[str]:
    """The normalized boot records of scenario `name`, then the records its start files hold."""
    out, port = tmp / name, free_port()
    SCENARIOS[name](out, port)
    swaps = {
        str(out): "{results}",
        sys.executable: "{python}",
        str(FAKE_LLAMA): "{fake}",
        str(FAKE): "{fake}",
    }
    swaps[str(port)] = "{port}"
    lines = []
    for line in (out / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "boot":
            lines.append(record_line({"scenario": name, "record": normalized(record, swaps)}))
    for path in sorted((out / "raw" / "boots").glob("*.json")):
        try:
            started = json.loads(path.read_text())
        except ValueError:  # the torn start file the scenario wrote
            continue
        if isinstance(started, dict):
            keys = sorted(k for k in started if k != "record")
            entry = {"scenario": name, "start_file": path.name, "keys": keys, "record": started.get("record")}
            lines.append(record_line(normalized(entry, swaps)))
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_collect_writes_the_recorded_boot_records(tmp_path: Path, name: str) -> None:
    recorded = [line + "\n" for line in RECORDED.read_text().splitlines() if f'"scenario":"{name}"' in line]
    assert recorded, f"{RECORDED} has no lines of scenario {name}"
    assert scenario_lines(name, tmp_path) == recorded


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for scenario in sorted(SCENARIOS):
            sys.stdout.write("".join(scenario_lines(scenario, Path(tmp))))


def _recorded_boots() -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    return [e["record"] for e in entries if e["record"].get("kind") == "boot"]


def test_as_json_gives_back_every_recorded_shape() -> None:
    """Each recorded boot record, rebuilt field by field, is written back as the same line: nulls and
    absent keys (slots, device and node, note) kept apart."""
    from msgspec import UNSET

    from mtpverdict.collect.boot_record import RecordedBoot

    records = _recorded_boots()
    assert {"slots", "device", "note"} <= {k for r in records for k in r}, "the recording lost a shape"
    for record in records:
        fields = {k: v for k, v in record.items() if k != "kind"}
        fields["argv"] = None if fields.get("argv") is None else tuple(fields["argv"])
        fields["slots"] = fields.get("slots", UNSET)
        assert record_line(RecordedBoot(**fields).as_json()) == record_line(record)


def test_the_boot_record_collect_writes_is_the_one_the_results_format_reads() -> None:
    from dataclasses import fields

    from mtpverdict.collect.boot_record import RecordedBoot
    from mtpverdict.formats.results import BootRecord

    assert {f.name for f in fields(RecordedBoot)} <= set(BootRecord.__struct_fields__)
