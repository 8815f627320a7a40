"""collect uses the parts the engine module declares: its readiness probe and judge, its response
object and reader, its boot-log notes, and says once why a part it would use is absent."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mtpverdict.collect import client as cl
from mtpverdict.collect import engine_log, logruns
from mtpverdict.collect import served as sv
from mtpverdict.collect.measure import _log_counts, _sent_run
from mtpverdict.engines import registry
from mtpverdict.engines.interface import Absent, BootLog, Readiness, Ready, ServerFields
from mtpverdict.engines.names import Engine
from mtpverdict.engines.served import PhaseTimings, RequestAcceptance, Seen, ServedFields, count
from mtpverdict.parse.model import AcceptanceReading

from ..conftest import run_cli
from .conftest import small_campaign
from .test_client_stream import CONTENT, run_one, script_of, usage

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


def _drafting_only(obj: dict[str, Any], seen: Seen, completion_tokens: int) -> ServedFields:
    """A toy engine's response object: drafting counts only, no timing."""
    drafted = count(obj.get("drafted"), "toy_stats.drafted", 0, 10_000)
    return ServedFields(acceptance=RequestAcceptance(Engine.VLLM, drafted, drafted // 2, None, None, None))


TOY = (ServerFields("toy_stats", _drafting_only),)


def test_a_response_is_read_when_the_engines_own_object_is_whatever_it_gives() -> None:
    """Log matching counts a request as read by its engine's object, not by llama.cpp's timings."""
    found = sv.served({**USAGE, "toy_stats": {"drafted": 6}}, SEEN, TOY)
    assert _log_counts(found) == (True, (6, 3))
    assert found.own_read and found.phases is None and found.timing is None
    missing = sv.served(USAGE, SEEN, TOY)
    assert not missing.own_read and _log_counts(missing) == (False, None)


def test_a_run_of_drafting_only_responses_is_a_group_the_log_lines_are_placed_in() -> None:
    toy = b'data: {"choices":[],"toy_stats":{"drafted":4}}\n\n'
    stream = run_one(
        script_of(CONTENT, CONTENT, usage(2), toy, b"data: [DONE]\n\n"),
        max_tokens=2,
        limits=cl.StreamLimits(server_fields=TOY),
    )
    assert stream.status == "ok" and stream.phases is None, stream.error
    sent = _sent_run(("w", 1, 1), cl.RunResult((stream,), 0.0, 1.0), "w c=1 rep 1")
    assert sent.drafted == ((4, 2),) and stream.own_read
    line = AcceptanceReading("log", "run", "log_window", draft_tokens=4, accepted_tokens=2, line=7)
    matched = logruns.match_lines([line], [sent])
    assert matched.reason is None and [r.lines for r in matched.runs] == [(line,)]


class _Said:
    """What the log reading appends and says (a CollectContext's three calls)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.said: list[str] = []

    def append(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def note(self, arm: str, boot: int, detail: str) -> None:
        self.said.append(detail)

    def missing(self, note: tuple[str, str], arm: str, boot: int) -> None:
        self.said.append(note[1])


def test_the_engines_boot_log_says_which_readings_are_one_requests() -> None:
    """A toy whose per-request lines are its run-scoped readings: its windows with counts stay windows."""
    one = AcceptanceReading("log", "run", "log_window", draft_tokens=4, accepted_tokens=2, line=3)
    window = AcceptanceReading("log", "window", "log_window", draft_tokens=40, accepted_tokens=20, line=9)
    boot_log = BootLog(("kv", "no kv"), ("lines", "no lines"), lambda r: r.scoped == "run")
    ctx: Any = _Said()
    record: Any = SimpleNamespace(arm="a", boot=1)
    sent = [logruns.Sent(("w", 1, 1), ((4, 2),), "w c=1 rep 1")]
    left = engine_log._request_lines(ctx, record, "raw/logs/a.log", [one, window], sent, boot_log)
    assert left == [window] and ctx.said == []
    assert [(r["scoped"], r["draft_tokens"], r["line"]) for r in ctx.records] == [("run", 4, 3)]
    none = BootLog(("kv", "no kv"), ("lines", "no lines"))  # by default no reading is one request's
    assert engine_log._request_lines(ctx, record, "r", [one], sent, none) == [one]


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
