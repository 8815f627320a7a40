"""engines.sglang: its log lines and response fields through the reader, and the parts it lacks."""

from __future__ import annotations

import json

import pytest

from mtpverdict.engines import registry, sglang
from mtpverdict.engines.interface import Absent
from mtpverdict.engines.names import Engine
from mtpverdict.engines.spec import NO_SCHEDULE, ServeSpec
from mtpverdict.parse import parse_text
from mtpverdict.serveconfig import extract_spec

DECODE = (
    "[2025-05-01 10:00:00] Decode batch, #running-req: 1, #token: 90, token usage: 0.01, accept len: 2.50, "
    "accept rate: 0.75, cuda graph: True, gen throughput (token/s): 40.00, #queue-req: 0, "
)


def test_a_decode_line_is_read_by_the_engine_module() -> None:
    found = sglang.find_log_lines(DECODE, 7)
    assert len(found) == 1 and found[0].acceptance is not None
    assert found[0].acceptance.mean_acceptance_length == 2.5
    assert sglang.log_evidence("[2025-05-01 10:00:00 TP0] Load weight end. type=Qwen3")  # no reading, its log
    assert not sglang.log_evidence("INFO:     Started server process")
    result = parse_text(DECODE)
    assert result.engine is Engine.SGLANG and len(result.acceptance) == 1


def test_a_meta_info_response_is_read_by_the_engine_module() -> None:
    doc = {"meta_info": {"spec_verify_ct": 4, "spec_num_correct_drafts": 6, "spec_num_proposed_drafts": 8}}
    (reading, _), *rest = list(sglang.response_readings(doc, None))
    assert rest == [] and (reading.accepted_tokens, reading.draft_tokens, reading.drafts) == (6, 8, 4)
    result = parse_text(json.dumps(doc))
    assert result.engine is Engine.SGLANG and result.acceptance[0].accepted_tokens == 6


def test_the_speculative_flags_are_read_by_the_engine_module() -> None:
    spec = extract_spec(["python", "-m", "sglang.launch_server", "--speculative-algorithm", "NEXTN",
                         "--speculative-num-steps", "3"])  # fmt: skip
    assert isinstance(spec, ServeSpec) and (spec.engine, spec.method, spec.k) == (Engine.SGLANG, "mtp", 3)


@pytest.mark.parametrize("part", ["readiness", "server_fields", "short_flags", "compile_schedule"])
def test_what_collect_and_the_schedule_lack_is_absent_with_a_reason(part: str) -> None:
    value = getattr(registry.get(Engine.SGLANG), part)
    assert isinstance(value, Absent) and value.reason
    assert not registry.has(Engine.SGLANG, part)


def test_a_schedule_for_sglang_says_why_not() -> None:
    compiler = registry.schedule_compiler(Engine.SGLANG)
    assert compiler == Absent(NO_SCHEDULE) == registry.schedule_compiler(None)
