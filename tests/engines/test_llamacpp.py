"""engines.llamacpp: its readiness probe, per-request fields, depth in force and context flags."""

from __future__ import annotations

from mtpverdict.engines import llamacpp, registry
from mtpverdict.engines.interface import Readiness, ServerFields
from mtpverdict.engines.names import Engine
from mtpverdict.gate.envelope import context_limit
from mtpverdict.parse import observed_k, parse_metrics
from mtpverdict.parse.llamacpp_server import PROPS_PATH, SLOTS_PATH
from mtpverdict.servecommand import Command, split_command


def test_collect_reads_props_and_slots_after_health() -> None:
    readiness = registry.get(Engine.LLAMACPP).readiness
    assert isinstance(readiness, Readiness) and readiness.paths == (PROPS_PATH, SLOTS_PATH)
    assert readiness.judge is llamacpp.judge
    assert registry.has(Engine.LLAMACPP, "readiness") and not registry.has(Engine.VLLM, "readiness")
    assert not registry.has("tgi", "readiness")


def test_the_clock_is_on_every_response() -> None:
    assert registry.get(Engine.LLAMACPP).server_fields == ServerFields(
        "timings", llamacpp.read_timings, timed=True, fields=llamacpp.TIMINGS_FIELDS
    )


def test_the_depth_is_unseen_before_the_first_verified_draft() -> None:
    before = parse_metrics("llamacpp:spec_decode_num_drafts_total 0\n")
    assert before.engine is Engine.LLAMACPP and observed_k(before) is None
    assert llamacpp.depth_in_force(4, True) == 4


def test_the_gate_reads_both_context_spellings() -> None:
    assert context_limit(["llama-server", "-c", "4096"]) == ("-c", 4096)
    assert context_limit(["llama-server", "--ctx-size", "8k"]) == ("--ctx-size", 8000)


def test_llama_server_builds_run_it() -> None:
    programs = registry.get(Engine.LLAMACPP).programs
    assert programs.runs("llama-server") and programs.runs("llama-server-cuda")
    assert not programs.runs("llama-server-") and not programs.runs("llama-server-a/b")
    found = split_command(["llama-server-b6100", "-m", "t.gguf"])
    assert (
        isinstance(found, Command) and found.engine is Engine.LLAMACPP and found.settings == ("-m", "t.gguf")
    )
