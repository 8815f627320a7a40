"""Blocked campaigns: the per-device layout, shards collected on the fake server, merged and loaded."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mtpverdict.collect import Collector, CollectSummary, load_campaign_file
from mtpverdict.collect.campaign import parse_campaign
from mtpverdict.collect.merge import merge_results
from mtpverdict.collect.shard import parse_shard
from mtpverdict.errors import CampaignError, CollectError, InputError
from mtpverdict.formats.results_io import load_results
from mtpverdict.stats.layout import boot_number, device_of, layout, round_order, seq_of

from ..conftest import run_cli, wait_for_request
from .conftest import campaign_text, collect_running, devices_campaign_text, free_port

CLI = [sys.executable, "-m", "mtpverdict"]
ARMS = ["off_A", "k1", "k2", "k3", "off_B"]
CONTROLS = frozenset({"off_A", "off_B"})
EXIT_BAD_INPUT = 2  # README, Exit codes


def _two_ports() -> list[int]:
    first = free_port()
    second = free_port()
    while second == first:
        second = free_port()
    return [first, second]


def _collect(campaign: Path, out: Path, shard: str, *, resume: bool = False) -> CollectSummary:
    plan = load_campaign_file(campaign)
    collector = Collector(
        plan,
        out,
        variables={},
        resume=resume,
        allow_argv_mismatch=False,
        on_event=lambda _: None,
        shard=parse_shard(shard),
    )
    return collector.run()


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


# --- layout -------------------------------------------------------------------------------------------


def test_every_device_runs_every_arm_in_its_own_drawn_order() -> None:
    laid = layout(ARMS, devices=4, rounds=2, seed=5)
    assert len(laid) == 4 * 2 * len(ARMS)
    orders = set()
    for device in range(4):
        for round_ in (1, 2):
            arms = [b.arm for b in laid if b.device == device and b.round == round_]
            assert sorted(arms) == sorted(ARMS)
            orders.add(tuple(arms))
    assert len(orders) > 1  # the order is drawn per device and round, not one order for all
    assert sorted(b.order for b in laid) == list(range(1, len(laid) + 1))
    assert len({(b.arm, b.boot) for b in laid}) == len(laid)
    for b in laid:  # the numbers name their device, so shards collected apart never collide
        assert device_of(b.boot, 4) == b.device == device_of(b.order, 4)
        assert seq_of(b.boot, 4) == b.round
    assert layout(ARMS, devices=4, rounds=2, seed=5) == laid  # the recorded seed replays it
    assert layout(ARMS, devices=4, rounds=2, seed=6) != laid


def test_the_controls_positions_are_drawn_so_devices_differ_in_where_they_fall() -> None:
    """With one round per device, off_A first and off_B last on every device made every control an
    end of its device: slow first and last boots were then read as slow controls."""
    laid = layout(ARMS, devices=8, rounds=1, seed=11)
    ends = []
    for device in range(8):
        arms = [b.arm for b in sorted(laid, key=lambda b: b.order) if b.device == device]
        ends.append(sum(arms.index(c) in (0, len(arms) - 1) for c in CONTROLS))
    assert not all(e == len(CONTROLS) for e in ends)  # not every device has its controls at its ends
    assert len(set(ends)) > 1  # devices differ
    # over many draws each position holds a control as often as any arm: 2 of 5 arms are controls
    at = np.zeros(len(ARMS))
    for device in range(2000):
        order = round_order(ARMS, seed=3, device=device, round_=1)
        for c in CONTROLS:
            at[order.index(c)] += 1
    assert np.all(np.abs(at / 2000 - len(CONTROLS) / len(ARMS)) < 0.05)


def test_without_a_seed_the_file_order_is_kept_and_numbers_are_those_of_one_device() -> None:
    assert round_order(ARMS, seed=None, device=0, round_=1) == ARMS
    laid = layout(ARMS, devices=1, rounds=2, seed=None)
    assert [(b.arm, b.boot, b.order) for b in laid[:6]] == [
        ("off_A", 1, 1),
        ("k1", 1, 2),
        ("k2", 1, 3),
        ("k3", 1, 4),
        ("off_B", 1, 5),
        ("off_A", 2, 6),
    ]
    assert [boot_number(k, 2, 3) for k in (1, 2, 3)] == [3, 6, 9]


# --- the campaign keys ----------------------------------------------------------------------------------


def test_device_keys_are_checked_and_named() -> None:
    text = devices_campaign_text([8001, 8002])
    plan = parse_campaign(text, "c.toml")
    assert [(d.name, d.node, d.port) for d in plan.devices] == [("d0", "n0", 8001), ("d1", "n1", 8002)]
    assert plan.order_seed == 11
    argv = plan.serve_argv(plan.arms[0], {}, 1, "out", plan.devices[1])
    assert argv[argv.index("--port") + 1] == "8002"
    assert plan.server_env({}, plan.devices[1]) == {"FAKE_DEVICE": "d1"}
    notes = plan.results_campaign({}, "out")["notes"]
    assert "Blocked over 2 devices (d0@n0, d1@n1)" in notes and "order_seed 11" in notes
    dup = text.replace('name = "d1"', 'name = "d0"')
    with pytest.raises(CampaignError) as caught:
        parse_campaign(dup, "c.toml")
    assert caught.value.problems[0].key == "devices"
    assert "'d0' appears twice" in caught.value.problems[0].message
    wrong_port = text.replace("port = 8002", 'port = "8002"')
    with pytest.raises(CampaignError) as caught:
        parse_campaign(wrong_port, "c.toml")
    assert caught.value.problems[0].key == "devices[1].port"
    seed_alone = campaign_text(8001).replace('title = "collector', 'order_seed = 3\ntitle = "collector', 1)
    assert parse_campaign(seed_alone, "c.toml").order_seed == 3  # one device draws its order too


def test_one_device_draws_its_order_as_several_devices_do(tmp_path: Path) -> None:
    """Before: a campaign without [[devices]] kept the file's order, off_A first and off_B last in
    every round, so the controls' position was their role."""
    from mtpverdict.collect.owed import plan_boots
    from mtpverdict.formats.results_io import ResultsWriter

    plan = parse_campaign(campaign_text(8001, boots=6), "c.toml")
    assert plan.order_seed is not None and plan.boots == 6
    writer = ResultsWriter(tmp_path / "out", plan.results_campaign({}, str(tmp_path / "out")))
    try:
        owed, _ = plan_boots(plan, writer)
    finally:
        writer.close()
    names = [a.name for a in plan.arms]
    expected = [b.arm for b in layout(names, devices=1, rounds=6, seed=plan.order_seed)]
    assert [p.arm.name for p in owed] == expected
    assert [p.order for p in owed] == list(range(1, len(expected) + 1))
    rounds = [expected[i : i + len(names)] for i in range(0, len(expected), len(names))]
    assert any(r[0] not in ("off_A", "off_B") or r[-1] not in ("off_A", "off_B") for r in rounds)


def test_the_default_order_seed_is_the_same_for_every_shard() -> None:
    text = devices_campaign_text([8001, 8002]).replace("order_seed = 11\n", "")
    first, second = parse_campaign(text, "a.toml"), parse_campaign(text, "b.toml")
    assert first.order_seed is not None and first.order_seed == second.order_seed


# --- shards on the fake server ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, list[int]]:
    """A 2-device campaign collected as two shards (each an ordinary results directory)."""
    root = tmp_path_factory.mktemp("shards")
    ports = _two_ports()
    campaign = root / "campaign.toml"
    campaign.write_text(devices_campaign_text(ports, reps=1, concurrency="[1]"))
    for i in (0, 1):
        summary = _collect(campaign, root / f"shard-{i}", f"{i}/2")
        assert summary.boots == 4 and summary.failed_boots == 0
    return campaign, root / "shard-0", root / "shard-1", ports


@pytest.mark.slow
def test_each_shard_is_an_ordinary_results_directory_of_its_device(
    shards: tuple[Path, Path, Path, list[int]],
) -> None:
    _, first, second, ports = shards
    for i, (out, port) in enumerate(((first, ports[0]), (second, ports[1]))):
        results = load_results(out)
        boots = results.boots.sort_values("order")
        assert set(boots["device"]) == {f"d{i}"} and set(boots["node"]) == {f"n{i}"}
        campaign_arms = [a.name for a in load_campaign_file(shards[0]).arms]
        drawn = round_order(campaign_arms, seed=load_campaign_file(shards[0]).order_seed, device=i, round_=1)
        assert list(boots["arm"]) == drawn  # the device's drawn order, controls included
        assert set(boots["boot"]) == {i + 1}  # device i's first boots are numbered i + 1
        assert sorted(boots["order"]) == [i + 1, i + 3, i + 5, i + 7]
        assert all(argv[argv.index("--port") + 1] == str(port) for argv in boots["argv"])
        shard = json.loads((out / "raw" / "shard.json").read_text())
        assert (shard["shard"], shard["shards"], shard["device"]) == (i, 2, f"d{i}")


@pytest.mark.slow  # the module's `shards` collects two shards first
def test_two_shards_merge_into_one_campaign_that_loads(
    shards: tuple[Path, Path, Path, list[int]], tmp_path: Path
) -> None:
    _, first, second, _ = shards
    summary = merge_results([second, first], tmp_path / "merged")
    assert (summary.shards, summary.expected, summary.missing, summary.owed_boots) == (2, 2, (), 0)
    results = load_results(tmp_path / "merged")
    assert summary.records == len(_records(first)) + len(_records(second))
    boots = results.boots
    assert len(boots) == 8 and sorted(boots["order"]) == list(range(1, 9))
    assert boots.groupby("device").size().to_dict() == {"d0": 4, "d1": 4}
    assert sorted(zip(boots["arm"], boots["boot"], strict=True)) == sorted(
        (a, b) for a in ("off_A", "ngram_k2", "draft_random_k2", "off_B") for b in (1, 2)
    )
    assert results.requests.groupby("arm")["boot"].nunique().to_dict() == {
        "draft_random_k2": 2,
        "ngram_k2": 2,
        "off_A": 2,
        "off_B": 2,
    }
    assert (tmp_path / "merged" / "raw" / "shards" / "shard-1-shard.json").is_file()
    assert not (tmp_path / "merged" / "raw" / "collect.lock").exists()
    logs = [str(p) for p in boots["log"]]
    assert all((tmp_path / "merged" / p).is_file() for p in logs)  # each boot's log came along


@pytest.mark.slow  # the module's `shards` collects two shards first
def test_a_missing_shard_is_recorded_as_failed_boots_of_its_device(
    shards: tuple[Path, Path, Path, list[int]], tmp_path: Path
) -> None:
    _, first, _, _ = shards
    summary = merge_results([first], tmp_path / "merged")
    assert summary.missing == ("shard 1/2 (device d1)",) and summary.owed_boots == 4
    boots = load_results(tmp_path / "merged").boots
    failed = boots[boots["status"] == "failed"]
    assert set(failed["device"]) == {"d1"} and set(failed["boot"]) == {2}
    assert sorted(failed["order"]) == [2, 4, 6, 8]
    assert all("shard 1/2 (device d1) was not among the merged shards" in e for e in failed["error"])


@pytest.mark.slow  # the module's `shards` collects two shards first
def test_merge_refuses_shards_that_do_not_belong_together(
    shards: tuple[Path, Path, Path, list[int]], tmp_path: Path
) -> None:
    _, first, second, _ = shards
    with pytest.raises(InputError, match="again"):
        merge_results([first, first], tmp_path / "a")
    other = tmp_path / "other"
    shutil.copytree(second, other)
    campaign = json.loads((other / "campaign.json").read_text())
    (other / "campaign.json").write_text(json.dumps({**campaign, "title": "another campaign"}))
    with pytest.raises(InputError, match="shards of another campaign"):
        merge_results([first, other], tmp_path / "b")
    unnamed = tmp_path / "unnamed"
    shutil.copytree(second, unnamed)
    lines = [
        json.dumps({k: v for k, v in r.items() if k != "device"} if r["kind"] == "boot" else r)
        for r in _records(unnamed)
    ]
    (unnamed / "records.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="names no device") as caught:
        merge_results([first, unnamed], tmp_path / "c")
    assert caught.value.problems[0].key == "device"
    twin = tmp_path / "twin"  # shard 0's boots presented as shard 1
    shutil.copytree(first, twin)
    info = json.loads((twin / "raw" / "shard.json").read_text())
    (twin / "raw" / "shard.json").write_text(json.dumps({**info, "shard": 1}))
    with pytest.raises(InputError, match=r"is not devices\[1\]"):
        merge_results([first, twin], tmp_path / "d")
    (twin / "raw" / "shard.json").write_text(json.dumps({**info, "shard": 1, "device": "d1", "node": "n1"}))
    with pytest.raises(InputError, match="ran on 'd0'"):  # its boots name the device that ran them
        merge_results([first, twin], tmp_path / "d")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(InputError, match="not empty"):
        merge_results([first, second], tmp_path / "full")
    assert not any((tmp_path / name).exists() for name in "abcd")  # nothing written on a refusal


@pytest.mark.slow
def test_a_killed_shard_resumes_on_its_own_and_merges(tmp_path: Path) -> None:
    ports = _two_ports()
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(devices_campaign_text(ports, reps=2, concurrency="[1]", tps=150))
    plan = load_campaign_file(campaign)
    second_arm = round_order([a.name for a in plan.arms], seed=plan.order_seed, device=1, round_=1)[1]
    out = tmp_path / "shard-1"
    popen = subprocess.Popen(
        [*CLI, "collect", str(campaign), "--out", str(out), "--shard", "1/2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with collect_running(popen, out) as proc:  # a failed assertion leaves no server behind
        wait_for_request(out, second_arm, proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with pytest.raises(CollectError, match="holds shard 1/2"):
            _collect(campaign, out, "0/2", resume=True)
        with pytest.raises(CollectError, match="resume it with --shard 1/2"):  # not as a whole campaign
            Collector(
                plan, out, variables={}, resume=True, allow_argv_mismatch=False, on_event=lambda _: None
            )
        summary = _collect(campaign, out, "1/2", resume=True)
    assert summary.failed_boots == 0 and _port_free(ports[1])  # the orphaned server was stopped
    boots = {(b["arm"], b["boot"]): b for b in _records(out) if b["kind"] == "boot"}
    assert boots[(second_arm, 2)]["status"] == "interrupted"
    assert boots[(second_arm, 2)]["device"] == "d1"
    assert boots[(second_arm, 4)]["status"] == "ready"  # device 1's next number for that arm
    assert len(boots) == 5 and {b["device"] for b in boots.values()} == {"d1"}
    _collect(campaign, tmp_path / "shard-0", "0/2")
    merged = merge_results([tmp_path / "shard-0", out], tmp_path / "merged")
    assert merged.owed_boots == 0 and len(merged.results.boots) == 9


def test_collect_refuses_a_shard_the_campaign_does_not_have(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(devices_campaign_text([8001, 8002]))
    for shard, message in (("2/2", "I counts from 0"), ("0/3", "does not match the campaign's 2 devices")):
        done = run_cli("collect", campaign, "--out", tmp_path / "o", "--shard", shard)
        assert done.returncode == EXIT_BAD_INPUT and message in done.stderr
    single = tmp_path / "single.toml"
    single.write_text(campaign_text(8001))
    done = run_cli("collect", single, "--out", tmp_path / "o", "--shard", "0/1")
    assert done.returncode == EXIT_BAD_INPUT and "add [[devices]]" in done.stderr
    assert not (tmp_path / "o").exists()
