"""collect uses the parts the engine module declares: its readiness probe and judge, its response
object and reader, its boot-log notes, and says once why a part it would use is absent."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from mtpverdict.collect import served as sv
from mtpverdict.engines import registry
from mtpverdict.engines.interface import Absent, Readiness, Ready, ServerFields
from mtpverdict.engines.names import Engine
from mtpverdict.engines.served import PhaseTimings, Seen, ServedFields

from ..conftest import run_cli
from .conftest import small_campaign

SEEN = Seen(max_tokens=24, prompt_bytes=20, content_events=1, elapsed_ms=1000.0)
USAGE = {"usage": {"prompt_tokens": 4, "completion_tokens": 8}}
TIMINGS = {
    "prompt_n": 4,
    "prompt_ms": 5.0,
    "predicted_n": 8,
    "predicted_ms": 9.0,
    "draft_n": 6,
    "draft_n_accepted": 3,
}


def _fields(engine: Engine) -> tuple[ServerFields, ...]:
    return sv.engine_fields(engine)


def test_served_reads_only_the_engines_own_response_object() -> None:
    final = {**USAGE, "timings": TIMINGS}
    assert sv.served(final, SEEN, _fields(Engine.VLLM)).acceptance is None  # vLLM's is `metrics`
    found = sv.served(final, SEEN, _fields(Engine.LLAMACPP))
    assert found.acceptance is not None and found.acceptance.draft_tokens == 6
    assert sv.served(final, SEEN).acceptance == found.acceptance  # by default, every engine's
    assert _fields(Engine.SGLANG) == ()  # declared absent: no object is read


def test_served_parses_with_the_reader_the_engine_names() -> None:
    def read(obj: dict[str, object], seen: Seen, completion_tokens: int) -> ServedFields:
        return ServedFields(phases=PhaseTimings(completion_tokens, None, None, None))

    found = sv.served({**USAGE, "mine": {}, "timings": TIMINGS}, SEEN, (ServerFields("mine", read),))
    assert found.phases == PhaseTimings(8, None, None, None) and found.acceptance is None


def _collect(tmp_path: Path, port: int, server_extra: str = "") -> tuple[int, str, Path]:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port, server_extra=server_extra))
    out = tmp_path / "results"
    ran = run_cli("collect", campaign, "--out", out)
    return ran.returncode, ran.stdout + ran.stderr, out


def test_collect_asks_the_readiness_the_engine_declares(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Mapping[str, str | None]] = []

    def judge(bodies: Mapping[str, str | None], *, speculates: bool, concurrency: int) -> Ready:
        asked.append(bodies)
        return Ready("refused by the engine's own judge", (("seen", "its note"),), None, 512, 3, None)

    vllm = dataclasses.replace(
        registry.ENGINES[Engine.VLLM], readiness=Readiness(("/v1/models",), judge, "t")
    )
    monkeypatch.setitem(registry.ENGINES, Engine.VLLM, vllm)
    code, said, out = _collect(tmp_path, port)
    assert code == 5, said  # a refused boot
    assert [list(b) for b in asked] == [["/v1/models"]] and json.loads(asked[0]["/v1/models"] or "")["data"]
    lines = (out / "records.jsonl").read_text().splitlines()
    boot = next(r for r in map(json.loads, lines) if r["kind"] == "boot")
    assert boot["status"] == "failed" and boot["error"] == "refused by the engine's own judge"
    assert boot["slots"] == 3 and said.count("missing evidence: its note") == 1


def test_an_engine_without_collect_parts_says_why_once(tmp_path: Path, port: int) -> None:
    reason = registry.get(Engine.SGLANG).readiness
    assert isinstance(reason, Absent) and reason.needed
    code, said, out = _collect(tmp_path, port, 'engine = "sglang"')
    assert code == 0, said
    assert said.count(f"missing evidence: {reason.reason}") == 1, said
    campaign = json.loads((out / "campaign.json").read_text())
    assert str(campaign["notes"]).count(f"Missing evidence: {reason.reason}.") == 1, campaign["notes"]


def test_vllm_says_nothing_of_the_parts_it_does_not_need() -> None:
    assert registry.missing_parts(Engine.VLLM, ("readiness", "server_fields", "boot_log")) == ()
    assert registry.missing_parts(Engine.LLAMACPP, ("readiness", "server_fields", "boot_log")) == ()
    assert registry.missing_parts("tgi", ("readiness",)) == ()
