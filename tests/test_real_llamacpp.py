"""Against a real llama-server on the CPU: the surfaces a collector reads agree with one another.

Boots each arm of collectors/llamacpp-cpu/campaign.toml with the campaign's own argv, one at a time,
sends greedy streamed completions (one at a time, then four at once), and checks readiness, the depth
in force, acceptance from /metrics against the responses' timings and the log, the void arm, KV
capacity, the version and greedy identity. Needs MTPVERDICT_LLAMA_SERVER (the binary) and
MTPVERDICT_GGUF (convert_models.py output); collectors/llamacpp-cpu/ci.sh provides both. Skipped
without them, unless MTPVERDICT_REQUIRE_REAL_SERVER is set (CI), where a missing server is a failure.
The port is MTPVERDICT_LLAMACPP_PORT (default: the campaign's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from mtpverdict.collect import load_campaign_file
from mtpverdict.collect.campaign import ArmPlan, CampaignPlan
from mtpverdict.parse import AcceptanceReading, KvCapacity, MetricsSnapshot, acceptance_delta, parse_file
from mtpverdict.parse.llamacpp_server import (
    HEALTH_PATH,
    METRICS_PATH,
    PROPS_PATH,
    SLOTS_PATH,
    Health,
    ServerProps,
    SlotsInfo,
    build_version,
    depth_in_force,
    health_state,
    kv_capacity,
    read_props,
    read_slots,
    response_acceptance,
)
from mtpverdict.parse.metrics import parse_metrics

from .conftest import LLAMACPP_ENV, ROOT, real_server

pytestmark = pytest.mark.real_server
CAMPAIGN = ROOT / "collectors" / "llamacpp-cpu" / "campaign.toml"
BOOT_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
MAX_TOKENS = 32
TOGETHER = 4  # the slots of every arm: four requests at once


@dataclass(frozen=True, slots=True)
class Boot:
    """What one arm's server showed."""

    arm: ArmPlan
    props: ServerProps
    slots_before: SlotsInfo
    slots_after: SlotsInfo
    before: MetricsSnapshot
    after: MetricsSnapshot
    finals: tuple[Any, ...]  # the last chunk of every streamed response
    texts: tuple[str, ...]
    log: Path


@pytest.fixture(scope="module")
def boots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Boot]:
    binary, gguf = real_server(LLAMACPP_ENV)
    plan = load_campaign_file(CAMPAIGN)
    port = int(os.environ.get("MTPVERDICT_LLAMACPP_PORT", plan.server.port))
    plan = replace(plan, server=replace(plan.server, port=port))
    work = Path(os.environ.get("MTPVERDICT_CI_WORK") or tmp_path_factory.mktemp("llamacpp")) / "llamacpp-e2e"
    work.mkdir(parents=True, exist_ok=True)
    prompts = [plan.workloads[0].prompt or "", *(case.prompt for case in plan.coherence)]
    variables = {"llama_server": binary, "models": gguf}
    return {arm.name: _boot(plan, arm, variables, prompts, work) for arm in plan.arms}


def _boot(
    plan: CampaignPlan, arm: ArmPlan, variables: dict[str, str], prompts: list[str], work: Path
) -> Boot:
    argv = plan.serve_argv(arm, variables, boot=1, results=str(work))
    base = f"http://127.0.0.1:{plan.server.port}"
    log = work / f"server-{arm.name}.log"
    with log.open("wb") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # llama-server may close a connection after a streamed response; a reused one then fails
        # ("Server disconnected without sending a response"), so every request gets its own.
        fresh = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(base_url=base, timeout=120, limits=fresh) as client:
            _wait_ready(client, server, log)
            props = read_props(client.get(PROPS_PATH).json())
            slots_before = read_slots(client.get(SLOTS_PATH).json())
            before = parse_metrics(client.get(METRICS_PATH).text)
            singles = [_stream(client, p) for p in prompts]
            with ThreadPoolExecutor(TOGETHER) as pool:
                together = list(pool.map(lambda p: _stream(client, p), prompts[:TOGETHER]))
            slots_after = read_slots(client.get(SLOTS_PATH).json())
            after = parse_metrics(client.get(METRICS_PATH).text)
    finally:
        _stop(server)
    streams = singles + together
    return Boot(
        arm=arm,
        props=props,
        slots_before=slots_before,
        slots_after=slots_after,
        before=before,
        after=after,
        finals=tuple(final for _, final in streams),
        texts=tuple(text for text, _ in singles),
        log=log,
    )


def _wait_ready(client: httpx.Client, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"llama-server exited with {server.returncode}; see {log}")
        try:
            if health_state(client.get(HEALTH_PATH).status_code) is Health.READY:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(0.1)
    pytest.fail(f"llama-server not ready after {BOOT_TIMEOUT_S} s; see {log}")


def _stream(client: httpx.Client, prompt: str) -> tuple[str, Any]:
    body = {
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    text: list[str] = []
    final: Any = None
    with client.stream("POST", "/v1/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[len("data: ") :])
            text.extend(choice.get("text", "") for choice in chunk.get("choices") or ())
            final = chunk
    return "".join(text), final


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _candidates(boots: dict[str, Boot]) -> list[Boot]:
    return [b for b in boots.values() if b.arm.role == "candidate"]


def test_ready_speculates_only_on_candidates_and_shows_its_depth_after_a_draft(
    boots: dict[str, Boot],
) -> None:
    for boot in boots.values():
        speculating = boot.arm.role == "candidate"
        assert boot.slots_before.speculating is boot.slots_after.speculating is speculating, boot.arm.name
        assert depth_in_force(boot.after, boot.slots_after) == (boot.arm.k or 0), boot.arm.name
        assert depth_in_force(boot.before, boot.slots_before) == (None if speculating else 0), boot.arm.name


def test_acceptance_agrees_between_metrics_responses_and_log(boots: dict[str, Boot]) -> None:
    for boot in _candidates(boots):
        window = acceptance_delta(boot.before, boot.after)
        assert isinstance(window, AcceptanceReading), boot.arm.name
        per_request = [r for r in (response_acceptance(f) for f in boot.finals) if r is not None]
        assert window.draft_tokens == sum(r.draft_tokens or 0 for r in per_request), boot.arm.name
        assert window.accepted_tokens == sum(r.accepted_tokens or 0 for r in per_request), boot.arm.name
        logged = [r for r in parse_file(boot.log).acceptance if r.kind == "log_window"]
        assert len(logged) == len(per_request), boot.arm.name
        assert sum(r.draft_tokens or 0 for r in logged) == window.draft_tokens, boot.arm.name
        assert sum(r.accepted_tokens or 0 for r in logged) == window.accepted_tokens, boot.arm.name
        assert window.accepted_per_position is not None
        assert sum(window.accepted_per_position) == window.accepted_tokens, boot.arm.name


def test_the_void_arm_accepts_nothing_and_the_copy_nearly_everything(boots: dict[str, Boot]) -> None:
    def window(name: str) -> AcceptanceReading:
        reading = acceptance_delta(boots[name].before, boots[name].after)
        assert isinstance(reading, AcceptanceReading) and reading.draft_tokens
        return reading

    random = window("draft_random_k2")
    assert random.accepted_tokens == 0 and (random.draft_tokens or 0) > 0
    for name in ("draft_copy_k2", "draft_copy_k4"):
        copy = window(name)
        assert (copy.accepted_tokens or 0) >= 0.9 * (copy.draft_tokens or 0)  # batched f16 may differ


def test_kv_capacity_version_and_greedy_identity(boots: dict[str, Boot]) -> None:
    texts = {boot.texts for boot in boots.values()}
    assert len(texts) == 1  # greedy output identical across every arm
    for boot in boots.values():
        assert kv_capacity(boot.props) == KvCapacity(window_tokens=1024, slots=4)
        log = parse_file(boot.log)
        assert [(kv.kv_cache_tokens, kv.window_tokens, kv.slots) for kv in log.kv_capacity] == [
            (4096, 1024, 4)
        ]
        fingerprints = {build_version(f["system_fingerprint"]) for f in boot.finals}
        assert fingerprints == {boot.props.version} == {log.engine_version}
        assert log.engine_version is not None
