"""A 2-shard campaign on a local Ray cluster against the fake server: one shard killed, resumed, merged."""

from __future__ import annotations

import importlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.collect import load_campaign_file
from mtpverdict.collect.ray_shards import device_resource, run_shards, shard_dir, submit_shards
from mtpverdict.formats.results_io import load_results
from mtpverdict.stats.layout import round_order

from ..conftest import child_processes, leaks, open_descriptors, wait_for_request
from .conftest import devices_campaign_text, free_port

# skipped without the ray extra, except where CI sets MTPVERDICT_REQUIRE_RAY: there a missing ray fails
ray: Any = (
    importlib.import_module("ray") if os.environ.get("MTPVERDICT_REQUIRE_RAY") else pytest.importorskip("ray")
)
pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A local Ray cluster of 2 CPUs with one custom resource per device (as `ray start --resources`)."""
    ray.init(
        num_cpus=2,
        resources={device_resource("d0"): 1, device_resource("d1"): 1},
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    yield ray
    ray.shutdown()


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """The suite's leak guard without sockets: Ray's driver opens its connections to the cluster lazily
    (on a test's first submit, cancel or get) and keeps them for the cluster's life, which is the
    module's. Files and child processes (a shard's orphaned server) still fail the test."""
    descriptors, children = open_descriptors(), child_processes()
    yield
    left = [leak for leak in leaks(descriptors, children) if "(socket:[" not in leak]
    if left:
        pytest.fail("the test left behind: " + "; ".join(left), pytrace=False)


def _ports() -> list[int]:
    first = free_port()
    second = free_port()
    while second == first:
        second = free_port()
    return [first, second]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_two_shards_on_ray_one_killed_mid_run_resumed_and_merged(cluster: Any, tmp_path: Path) -> None:
    ports = _ports()
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(devices_campaign_text(ports, reps=2, concurrency="[1]", tps=150))
    plan = load_campaign_file(campaign)
    second_arm = round_order([a.name for a in plan.arms], seed=plan.order_seed, device=1, round_=1)[1]
    out = tmp_path / "campaign-results"
    refs = submit_shards(str(campaign), str(out))
    wait_for_request(shard_dir(out, 1), second_arm, timeout=180)
    cluster.cancel(refs[1], force=True)  # the worker process running shard 1 is killed mid-boot
    with pytest.raises(cluster.exceptions.RayError):
        cluster.get(refs[1], timeout=60)
    first = cluster.get(refs[0], timeout=240)
    assert (first.shard, first.device, first.outcome, first.boots) == (0, "d0", "complete", 4)
    assert not (shard_dir(out, 1) / "merged").exists()

    runs, merged = run_shards(str(campaign), str(out), resume=True)
    assert [(r.shard, r.outcome) for r in runs] == [(0, "complete"), (1, "complete")]
    assert runs[0].boots == 0  # shard 0 was complete: resuming it boots nothing
    assert runs[1].boots == 3 and _port_free(ports[1])  # the killed shard's orphaned server was stopped
    assert merged.missing == () and merged.owed_boots == 0

    results = load_results(out / "merged")
    boots = results.boots
    assert boots.groupby("device").size().to_dict() == {"d0": 4, "d1": 5}
    interrupted = boots[boots["status"] == "interrupted"]
    assert list(zip(interrupted["arm"], interrupted["device"], strict=True)) == [(second_arm, "d1")]
    assert set(boots[boots["status"] != "interrupted"]["status"]) == {"ready"}
    for device in ("d0", "d1"):  # each device runs every arm once, in its own drawn order
        arms = list(
            boots[(boots["device"] == device) & (boots["status"] == "ready")].sort_values("order")["arm"]
        )
        drawn = round_order(
            [a.name for a in plan.arms], seed=plan.order_seed, device=int(device[1]), round_=1
        )
        assert arms == drawn  # the drawn order, controls at whatever positions the draw gave them
    shard_files = sorted((out / "merged" / "raw" / "shards").glob("shard-*-shard.json"))
    assert [json.loads(p.read_text())["device"] for p in shard_files] == ["d0", "d1"]
    assert _port_free(ports[0])


def test_a_shard_runs_only_where_its_device_resource_is(cluster: Any, tmp_path: Path) -> None:
    campaign = tmp_path / "campaign.toml"
    text = devices_campaign_text(_ports(), reps=1, concurrency="[1]").replace(
        'name = "d1"', 'name = "elsewhere"'
    )
    campaign.write_text(text)
    refs = submit_shards(str(campaign), str(tmp_path / "out"), shards=[1])
    ready, _ = cluster.wait([refs[1]], timeout=3)
    assert ready == []  # no node offers mtpverdict-device-elsewhere: Ray keeps it pending, never runs it
    assert not shard_dir(tmp_path / "out", 1).exists()
    cluster.cancel(refs[1], force=True)
    time.sleep(0.5)
