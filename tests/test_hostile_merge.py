"""Hostile shards given to `merge`: each is refused with exit 2 and one line per problem, never exit 70.

The shards are written by hand (a two-device layout of the synthetic-clean-win campaign, one boot per
arm and device), so every case edits one file of an otherwise valid pair and runs the command line.
"""

from __future__ import annotations

import errno
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.formats.results_io import content_sha256, load_results
from mtpverdict.stats.layout import boot_number

from . import conftest
from .conftest import FIXTURES
from .test_hostile import assert_refused, fifo, run_cli

BASE = FIXTURES / "synthetic-clean-win"
ARMS = ("off_A", "k1", "k2", "k3", "off_B")
EXIT_INCOMPLETE = 4  # README, Exit codes


def _boot(arm: str, seq: int, position: int, device: int, devices: int = 2) -> dict[str, Any]:
    return {
        "kind": "boot",
        "arm": arm,
        "boot": boot_number(seq, device, devices),
        "order": boot_number(position, device, devices),
        "status": "ready",
        "ready_seconds": 50.0,
        "kv_cache_tokens": 1000,
        "block_size": 16,
        "num_blocks": 62,
        "max_model_len": 4096,
        "engine_version": "simulated",
        "argv": ["--model", "synthetic"],
        "error": None,
        "device": f"d{device}",
        "node": f"n{device}",
    }


def _request(arm: str, boot: int) -> dict[str, Any]:
    return {
        "kind": "request",
        "arm": arm,
        "boot": boot,
        "workload": "chat",
        "concurrency": 1,
        "warmup": False,
        "rep": 1,
        "stream": 0,
        "status": "ok",
        "error": None,
        "prompt_tokens": 256,
        "completion_tokens": 256,
        "t_start": 100.0,
        "t_first": 100.4,
        "t_end": 105.3,
    }


def shard_info(campaign: dict[str, Any], index: int, devices: int) -> dict[str, Any]:
    return {
        "format": "mtpverdict.shard/1",
        "campaign_id": campaign["id"],
        "campaign_sha256": content_sha256(campaign),
        "shard": index,
        "shards": devices,
        "device": f"d{index}",
        "node": f"n{index}",
        "devices": [{"name": f"d{i}", "node": f"n{i}"} for i in range(devices)],
        "rounds": 1,
        "arms": list(ARMS),
        "order_seed": 11,
    }


def write_shard(tmp: Path, index: int, devices: int = 2) -> Path:
    """Shard `index` of `devices`: every arm booted once on device d<index>, one request per boot."""
    out = tmp / f"shard-{index}"
    (out / "raw").mkdir(parents=True)
    campaign = json.loads((BASE / "campaign.json").read_text())
    (out / "campaign.json").write_text(json.dumps(campaign))
    records = []
    for position, arm in enumerate(ARMS, start=1):
        boot = _boot(arm, 1, position, index, devices)
        records += [boot, _request(arm, boot["boot"])]
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (out / "raw" / "shard.json").write_text(json.dumps(shard_info(campaign, index, devices)))
    return out


def edit_info(shard: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = shard / "raw" / "shard.json"
    info = json.loads(path.read_text())
    change(info)
    path.write_text(json.dumps(info))


def add_line(shard: Path, text: str) -> None:
    with (shard / "records.jsonl").open("a") as fh:
        fh.write(text + "\n")


def edit_first_boot(shard: Path, change: Callable[[dict[str, Any]], str]) -> None:
    path = shard / "records.jsonl"
    lines = path.read_text().splitlines()
    lines[0] = change(json.loads(lines[0]))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return write_shard(tmp_path, 0), write_shard(tmp_path, 1)


def in_process(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The command line run in this process (a child costs seconds of start-up per case); an error
    the command did not map surfaces as an exit other than 2."""
    done = conftest.run_cli(*args)
    return subprocess.CompletedProcess(list(done.args), done.returncode, done.stdout, done.stderr)


def merge_cli(tmp: Path, *shards: Path, child: bool = False) -> subprocess.CompletedProcess[str]:
    return (run_cli if child else in_process)("merge", *shards, "--out", tmp / "merged")


def test_the_hand_written_shards_merge(pair: tuple[Path, Path], tmp_path: Path) -> None:
    done = merge_cli(tmp_path, *pair, child=True)
    assert done.returncode == 0, done.stderr
    results = load_results(tmp_path / "merged")
    assert len(results.boots) == 10 and len(results.requests) == 10
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left


def _shard_value(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(info: dict[str, Any]) -> None:
        info[key] = value

    return change


SHARD_CASES = {  # the shard file of shard 1 edited: (change, fragments of the one error line)
    "shard-true": (_shard_value("shard", True), ("shard.json", "shard")),
    "shard-fraction": (_shard_value("shard", 1.5), ("shard.json", "shard")),
    "shard-string": (_shard_value("shard", "1"), ("shard.json", "shard")),
    "shard-out-of-range": (_shard_value("shard", 2), ("shard.json", "shard", "count from 0")),
    "devices-without-node": (
        _shard_value("devices", [{"name": "d0"}, {"name": "d1"}]),
        ("shard.json", "devices[0].node"),
    ),
    "too-few-devices": (_shard_value("devices", [{"name": "d0", "node": "n0"}]), ("lists 1 devices",)),
    "rounds-many": (_shard_value("rounds", "many"), ("shard.json", "rounds")),
    "rounds-ten-million": (_shard_value("rounds", 10_000_000), ("shard.json", "rounds")),
    "arms-objects": (_shard_value("arms", [{}]), ("shard.json", "arms[0]")),
    "arms-other": (_shard_value("arms", ["off_A", "k9"]), ("shard.json", "arms")),
    "unknown-key": (_shard_value("extra", 1), ("shard.json", "extra")),
    "a-list": (None, ("shard.json", "not a shard file")),
}


@pytest.mark.parametrize("case", sorted(SHARD_CASES))
def test_merge_refuses_a_malformed_shard_file(pair: tuple[Path, Path], tmp_path: Path, case: str) -> None:
    change, expect = SHARD_CASES[case]
    if change is None:
        (pair[1] / "raw" / "shard.json").write_text("[]")
    else:
        edit_info(pair[1], change)
    if change is not None and case.startswith(
        "rounds"
    ):  # both shards agree: the value itself is refused, not the difference
        edit_info(pair[0], change)
    assert_refused(merge_cli(tmp_path, *pair), *expect)
    assert not (tmp_path / "merged").exists()


RECORD_CASES = {  # the first boot record of shard 1 rewritten: (its JSON text, fragments of the error)
    "string-order": (lambda r: json.dumps({**r, "order": "2"}), ("records.jsonl:1", "order")),
    "boot-without-status": (
        lambda r: json.dumps({k: v for k, v in r.items() if k != "status"}),
        ("records.jsonl:1", "status"),
    ),
    "list-arm": (lambda r: json.dumps({**r, "arm": ["off_A"]}), ("records.jsonl:1", "arm")),
    "record-a-list": (lambda r: json.dumps([r]), ("records.jsonl:1", "JSON object")),
    "nan": (lambda r: json.dumps({**r, "ready_seconds": float("nan")}), ("records.jsonl:1", "NaN")),
}


@pytest.mark.parametrize("case", sorted(RECORD_CASES))
def test_merge_refuses_a_malformed_record_as_validate_does(
    pair: tuple[Path, Path], tmp_path: Path, case: str
) -> None:
    text_of, expect = RECORD_CASES[case]
    edit_first_boot(pair[1], text_of)
    line = assert_refused(merge_cli(tmp_path, *pair), *expect)
    validate = in_process("validate", pair[1])
    assert validate.returncode == 2 and line in validate.stderr  # the same line as validate's
    assert not (tmp_path / "merged").exists()


def test_merge_refuses_records_of_a_boot_another_shard_owns(pair: tuple[Path, Path], tmp_path: Path) -> None:
    add_line(pair[0], json.dumps({**_request("k1", 2), "rep": 2}))  # boot 2 of k1 is device 1's
    assert_refused(merge_cli(tmp_path, *pair), "records.jsonl", "k1 boot 2", "no boot record in this shard")
    assert not (tmp_path / "merged").exists()


def test_merge_refuses_a_boot_numbered_for_another_device(pair: tuple[Path, Path], tmp_path: Path) -> None:
    edit_first_boot(pair[0], lambda r: json.dumps({**r, "boot": 2}))  # device 0 numbers 1, 3, 5...
    path = pair[0] / "records.jsonl"
    path.write_text(path.read_text().replace('"boot": 1,', '"boot": 2,', 1))  # its request follows it
    assert_refused(merge_cli(tmp_path, *pair), "records.jsonl", "numbered for device 1")
    edit_first_boot(pair[0], lambda r: json.dumps({**r, "boot": 1, "order": 2}))
    path.write_text(path.read_text().replace('"boot": 2,', '"boot": 1,', 1))
    assert_refused(merge_cli(tmp_path, *pair), "records.jsonl", "order 2 is numbered for device 1")


def test_merge_refuses_a_boot_of_another_node(pair: tuple[Path, Path], tmp_path: Path) -> None:
    edit_first_boot(pair[1], lambda r: json.dumps({**r, "node": "n0"}))
    assert_refused(merge_cli(tmp_path, *pair), "records.jsonl", "not on this shard's device")


def test_merge_reads_no_line_longer_than_the_loader_does(pair: tuple[Path, Path], tmp_path: Path) -> None:
    with (pair[1] / "records.jsonl").open("a") as fh:  # 64 MiB of one line: refused, never held whole
        fh.write('{"kind": "request", "note": "' + "x" * (64 << 20) + '"}\n')
    assert_refused(merge_cli(tmp_path, *pair, child=True), "records.jsonl:11", "longer than 1048576 bytes")


def test_merge_refuses_a_fifo_for_records(pair: tuple[Path, Path], tmp_path: Path) -> None:
    fifo(pair[1] / "records.jsonl")
    assert_refused(merge_cli(tmp_path, *pair, child=True), "records.jsonl", "not a regular file")


def test_merge_bounds_the_boots_it_owes(tmp_path: Path) -> None:
    shard = write_shard(tmp_path, 0, devices=4)
    edit_info(shard, lambda info: info.update(rounds=10_000))  # three devices missing: 200,000 boots owed
    assert_refused(merge_cli(tmp_path, shard), "shard.json", "rounds", "more than the 100000")


def test_merge_refuses_out_inside_a_shard(pair: tuple[Path, Path], tmp_path: Path) -> None:
    done = in_process("merge", *pair, "--out", pair[0] / "raw" / "merged")
    assert_refused(done, "is inside the shard")
    assert not (pair[0] / "raw" / "merged").exists()
    assert_refused(in_process("merge", *pair, "--out", pair[1]), "not empty")
    assert_refused(in_process("merge", pair[0] / "raw", "--out", pair[0] / "raw" / "x"), "inside the shard")


def test_a_full_disk_leaves_nothing_at_out(
    pair: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mtpverdict.collect.merge as merge

    real = merge._copy_records
    calls = []

    def full(shard: Any, fh: Any) -> int:
        calls.append(shard)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))
        return real(shard, fh)

    monkeypatch.setattr(merge, "_copy_records", full)
    done = merge_cli(tmp_path, *pair)
    assert done.returncode == EXIT_INCOMPLETE, done.stderr
    assert "No space left on device" in done.stderr and "nothing was left there" in done.stderr
    assert {p.name for p in tmp_path.iterdir()} == {"shard-0", "shard-1"}  # no merged, no staging
    monkeypatch.setattr(merge, "_copy_records", real)
    again = merge_cli(tmp_path, *pair)
    assert again.returncode == 0, again.stderr  # the next merge is not refused by a partial one


def test_collect_shard_refuses_a_negative_index_before_writing(tmp_path: Path) -> None:
    from mtpverdict.collect.ray_shards import collect_shard
    from mtpverdict.errors import CollectError

    from .collect.conftest import devices_campaign_text

    campaign = tmp_path / "campaign.toml"
    campaign.write_text(devices_campaign_text([8001, 8002]))
    for index in (-1, 2):
        with pytest.raises(CollectError, match="I counts from 0"):
            collect_shard(str(campaign), str(tmp_path / "out"), index, resume=False)
    assert not (tmp_path / "out").exists()


def test_a_shard_written_with_crlf_line_ends_merges_as_validate_reads_it(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    path = pair[1] / "records.jsonl"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    done = merge_cli(tmp_path, *pair)
    assert done.returncode == 0, done.stderr
    assert len(load_results(tmp_path / "merged").boots) == 10


def test_a_raw_file_two_shards_fill_differently_is_named_in_both(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    for shard, text in zip(pair, ("one", "two"), strict=True):
        (shard / "raw" / "logs").mkdir()
        (shard / "raw" / "logs" / "x.log").write_text(text)
    line = assert_refused(merge_cli(tmp_path, *pair), "shard-1/raw/logs/x.log", "shard-0/raw/logs/x.log")
    assert ".merging-" not in line  # the temporary directory is never named
    assert {p.name for p in tmp_path.iterdir()} == {"shard-0", "shard-1"}


def test_a_boot_without_its_node_is_refused_naming_what_is_missing(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    edit_first_boot(pair[1], lambda r: json.dumps({k: v for k, v in r.items() if k != "node"}))
    assert_refused(merge_cli(tmp_path, *pair), "(node None), not on this shard's device 'd1' (node 'n1')")
