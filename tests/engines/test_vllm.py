"""engines.vllm: its schedule compilation, depth in force, short flags and per-request clock."""

from __future__ import annotations

import json

from mtpverdict.engines import registry, vllm
from mtpverdict.engines.interface import ServerFields
from mtpverdict.engines.names import Engine
from mtpverdict.engines.spec import DepthRange, ServeSpec
from mtpverdict.gate import short_flags
from mtpverdict.parse import observed_k, parse_metrics
from mtpverdict.servecommand import Command, Unproven, split_command
from mtpverdict.serveconfig import extract_spec


def test_the_compiled_schedule_is_what_vllm_reads_back() -> None:
    table = (DepthRange(1, 4, 3), DepthRange(5, 64, 1), DepthRange(65, 1024, 0))
    text = vllm.compile_schedule({"method": "mtp"}, 3, table)
    assert json.loads(text) == {
        "method": "mtp",
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 64, 1], [65, 1024, 0]],
    }
    spec = extract_spec(["vllm", "serve", "m", "--speculative-config", text])
    assert isinstance(spec, ServeSpec) and spec.engine is Engine.VLLM
    assert spec.k == 3 and spec.schedule == table


def test_the_depth_in_force_is_zero_without_spec_counters() -> None:
    off = parse_metrics('vllm:num_requests_running{engine="0"} 0\n')
    assert off.engine is Engine.VLLM and observed_k(off) == 0
    on = parse_metrics(
        'vllm:spec_decode_num_drafts_total{engine="0"} 2\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 1\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 1\n'
    )
    assert observed_k(on) == 2
    assert vllm.depth_in_force(0, True) is None  # counters but no positions: the depth cannot be seen


def test_the_gate_reads_vllm_short_flags_by_program_or_image() -> None:
    assert short_flags(["vllm", "serve", "m", "-tp", "2"]) is vllm.SHORT_FLAGS
    assert short_flags(["m", "-tp", "2"], image="vllm/vllm-openai:v0.32.0") is vllm.SHORT_FLAGS
    assert short_flags(["llama-server", "-n", "8"]) == {}
    assert short_flags(["m"], image="ghcr.io/ggml-org/llama.cpp:server") == {}


def test_the_server_clock_is_vllms_flag() -> None:
    fields = registry.get(Engine.VLLM).server_fields
    assert fields == ServerFields(
        "metrics",
        vllm.read_metrics,
        "--enable-per-request-metrics",
        (0, 32),
        timed=True,
        fields=vllm.SERVER_FIELDS,
        report_flags=(("--per-request-spec-decode-metrics", 1),),
    )


def test_the_serving_program_is_vllm_serve_or_its_modules() -> None:
    programs = registry.get(Engine.VLLM).programs
    assert programs.runs("vllm") and not programs.runs("vllm-cuda")  # no builds by another name
    assert split_command(["vllm", "serve", "m", "-tp", "2"]) == Command(
        ("vllm", "serve"), ("m", "-tp", "2"), Engine.VLLM
    )
    assert split_command(["vllm", "bench", "m"]) == Unproven("vllm without the serve subcommand")
    found = split_command(["python3", "-m", "vllm.entrypoints.cli.main", "m"])
    assert found == Unproven("-m vllm.entrypoints.cli.main without the serve subcommand")
