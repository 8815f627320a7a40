"""Hostile inputs of a second adversarial pass over parse, schedule-arm, merge and collect's redaction.

Each test names what it defends: a JSON document of many responses parsed in linear time, a schedule
whose depths no arm of the campaign measured, `--out` a symbolic link, and secrets a server prints
escaped, encoded or cut short (collect/redact.py).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import time
import urllib.parse
from pathlib import Path

import msgspec
import pytest

from mtpverdict.collect import Collector, Event, load_campaign_file
from mtpverdict.collect.preflight import preflight
from mtpverdict.collect.redact import REDACTED, Redactor
from mtpverdict.collect.schedule_arm import schedule_arm
from mtpverdict.errors import CollectError, InputError
from mtpverdict.formats.decision import ScheduleRange
from mtpverdict.importers import import_vllm_bench
from mtpverdict.parse import parse_text

from .collect.conftest import campaign_text, free_port
from .collect.test_schedule_arm import CAMPAIGN, _decision
from .collect.test_secrets import KEY_ENV, TOKEN_ENV
from .conftest import DATA
from .test_hostile_merge import _boot, _request, add_line, in_process, write_shard

RESPONSES = 60_000  # quadratic line counting took minutes on this many; linear takes about a second


def test_a_json_document_of_many_responses_is_parsed_in_linear_time() -> None:
    text = (
        "[\n"
        + ",\n".join('{"timings":{"draft_n":2,"draft_n_accepted":1}}' for _ in range(RESPONSES))
        + "\n]\n"
    )
    start = time.process_time()
    result = parse_text(text)
    assert time.process_time() - start < 15.0  # generous: a busy 2-core machine; the old code took > 60 s
    assert len(result.acceptance) == RESPONSES
    assert [r.line for r in result.acceptance[:3]] == [2, 3, 4] and result.acceptance[
        -1
    ].line == RESPONSES + 1


def _schedule_config(top: int, later: int) -> str:
    return (
        f'{{"method":"ngram","num_speculative_tokens":{top},"num_speculative_tokens_per_batch_size":'
        f'[[1,1,{top}],[2,1024,{later}]],"prompt_lookup_max":4,"prompt_lookup_min":2}}'
    )


@pytest.mark.parametrize(
    ("first", "second", "words"),
    [
        ((7, "ngram_k3"), (1, "ngram_k1"), "k=7, but their arm ngram_k3 runs ngram at k=3"),
        ((3, "ngram_k3"), (2, "ngram_k1"), "k=2, but their arm ngram_k1 runs ngram at k=1"),
        ((3, "ngram_k3"), (2, None), "k=2, but name no arm of this campaign that measured it (None)"),
        ((3, "ngram_k3"), (1, "ghost_k1"), "name no arm of this campaign that measured it (ghost_k1)"),
    ],
)
def test_a_schedule_at_a_depth_no_arm_measured_is_refused(
    first: tuple[int, str | None], second: tuple[int, str | None], words: str
) -> None:
    decision = _decision(config=_schedule_config(first[0], second[0]))
    assert decision.schedule is not None
    ranges = (
        ScheduleRange(1, 1, first[0], first[1], (1,), ("edited",)),
        ScheduleRange(2, 1024, second[0], second[1], (4,), ("edited",)),
    )
    edited = msgspec.structs.replace(
        decision, schedule=msgspec.structs.replace(decision.schedule, ranges=ranges)
    )
    with pytest.raises(InputError) as caught:
        schedule_arm(CAMPAIGN.read_text(), "c.toml", edited, "d.json", origin="d.json sha")
    problems = caught.value.problems
    assert len(problems) == 1 and problems[0].key == "schedule.ranges"
    assert words in problems[0].message


def _leaking_campaign(port: int, fault: str | None = None) -> str:
    """The fake server printing the API key and a secret variable, as tests/collect/test_secrets.py."""
    faults = {"ngram_k2": fault} if fault else None
    text = campaign_text(port, reps=2, concurrency="[1]", faults=faults)
    text = text.replace(
        '"--port", "{port}"',
        f'"--port", "{{port}}", "--leak-env", "{KEY_ENV}", "--leak-env", "{TOKEN_ENV}"',
        1,
    )
    secret_keys = f'api_key_env = "{KEY_ENV}"\nsecrets = ["{TOKEN_ENV}", "hf"]\n'
    return text.replace("stall_seconds =", secret_keys + "stall_seconds =", 1)


@pytest.mark.parametrize(("key", "token", "hf"), [("ok", "t" * 20, "h" * 20), ("k" * 20, "t" * 20, "hf-1")])
def test_a_secret_too_short_to_redact_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, token: str, hf: str
) -> None:
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.setenv(TOKEN_ENV, token)
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(_leaking_campaign(free_port()))
    with pytest.raises(CollectError) as caught:
        preflight(
            load_campaign_file(campaign),
            tmp_path / "results",
            variables={"hf": hf},
            resume=False,
            allow_argv_mismatch=False,
            until_resolved=False,
        )
    message = str(caught.value)
    assert "shorter than 8" in message and (KEY_ENV in message or "hf" in message)
    assert f" {key} " not in message and hf not in message  # the variable is named, never its value
    assert not (tmp_path / "results").exists()


SECRET = 'sk-ab/cd+ef=gh"ij\\kl\u00e9mn0123456789'


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


BASIC = "Authorization: Basic "


@pytest.mark.parametrize(
    ("printed", "spelled"),
    [
        (f'{{"api_key": "{json.dumps(SECRET)[1:-1]}"}}', json.dumps(SECRET)[1:-1]),
        ('{"k": "' + json.dumps(SECRET, ensure_ascii=False)[1:-1].replace("/", "\\/") + '"}', SECRET[14:]),
        (repr({"api_key": SECRET}), repr(SECRET)[1:-1]),
        ("GET /v1/models?key=" + urllib.parse.quote(SECRET, safe=""), urllib.parse.quote(SECRET, safe="")),
        ("GET /v1/models?key=" + urllib.parse.quote_plus(SECRET), urllib.parse.quote_plus(SECRET)),
        (BASIC + _b64(b"user:" + SECRET.encode()), _b64(b"user:" + SECRET.encode())[7:-3]),
        (BASIC + _b64(b"u:" + SECRET.encode()), _b64(b"u:" + SECRET.encode())[3:-3]),
        (BASIC + _b64(SECRET.encode()), _b64(SECRET.encode())[:-4]),
    ],
)
def test_a_secret_printed_escaped_or_encoded_is_redacted(printed: str, spelled: str) -> None:
    """`spelled`: the secret as the line spells it (of base64, the characters only its bytes decide)."""
    redactor = Redactor([SECRET])
    line = printed + " and more"
    pieces = {spelled[i : i + 12] for i in range(len(spelled) - 11)}
    for written in (redactor.text(line), _streamed(redactor, line.encode(), 5).decode()):
        assert REDACTED in written and written.endswith(" and more"), written
        assert not [p for p in pieces if p in written], written


def _streamed(redactor: Redactor, data: bytes, step: int) -> bytes:
    stream = redactor.stream()
    return b"".join(stream.feed(data[i : i + step]) for i in range(0, len(data), step)) + stream.flush()


def test_a_secret_cut_short_at_either_end_of_a_text_is_redacted() -> None:
    secret = "sk-" + "0123456789abcdef" * 3
    redactor = Redactor([secret])
    error = ("HTTP 401: invalid key " + secret)[:40]  # an error kept to its first characters
    assert redactor.text(error) == "HTTP 401: invalid key " + REDACTED
    tail = (secret + " was refused")[-30:]  # a log's last bytes
    assert redactor.text(tail) == REDACTED + " was refused"
    assert redactor.text("tokens: 6, sk-") == "tokens: 6, sk-"  # too little of it to say
    assert _streamed(redactor, b"server stopped while printing " + secret[:20].encode(), 7).endswith(
        REDACTED.encode()
    )


def test_no_piece_of_a_secret_reaches_the_results_or_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server quotes the key in a 500 answer, cut by the error text's bound in the middle of it."""
    key, token, hf = (f"sk-{secrets.token_hex(20)}" for _ in range(3))
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.setenv(TOKEN_ENV, token)
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(_leaking_campaign(free_port(), fault="5xx:2"))
    events: list[Event] = []
    summary = Collector(
        load_campaign_file(campaign),
        tmp_path / "results",
        variables={"hf": hf},
        resume=False,
        allow_argv_mismatch=True,
        on_event=events.append,
    ).run()
    assert summary.request_errors > 0
    records = (tmp_path / "results" / "records.jsonl").read_text()
    assert "injected failure" in records and REDACTED in records
    shown = "\n".join([*(e.detail for e in events), *summary.failed])
    pieces = {s[i : i + 12] for s in (key, token, hf) for i in range(len(s) - 11)}
    for path in (p for p in (tmp_path / "results").rglob("*") if p.is_file()):
        data = path.read_text(errors="replace")
        assert not [p for p in pieces if p in data], f"{path} holds a piece of a secret"
    assert not [p for p in pieces if p in shown]


@pytest.mark.parametrize("names", ["an empty directory inside a shard", "nothing"])
def test_merge_refuses_out_that_is_a_symbolic_link(tmp_path: Path, names: str) -> None:
    shards = write_shard(tmp_path, 0), write_shard(tmp_path, 1)
    inside = shards[0] / "raw" / "empty"
    if names != "nothing":
        inside.mkdir()
    (tmp_path / "merged").symlink_to(inside)
    done = in_process("merge", *shards, "--out", tmp_path / "merged")
    assert done.returncode == 2, done.stderr
    assert "is a symbolic link" in done.stderr and done.stderr.count("Error:") == 1
    assert (tmp_path / "merged").is_symlink() and not [
        p for p in tmp_path.iterdir() if p.name.startswith(".")
    ]


def test_merge_refuses_a_shard_that_ran_more_rounds_than_its_shard_file_claims(tmp_path: Path) -> None:
    """A shard file saying rounds = 1 beside two boots of an arm: a missing shard would owe too few."""
    shards = write_shard(tmp_path, 0), write_shard(tmp_path, 1)
    extra = _boot("k1", 2, 6, 0)
    add_line(shards[0], json.dumps(extra))
    add_line(shards[0], json.dumps(_request("k1", extra["boot"])))
    done = in_process("merge", *shards, "--out", tmp_path / "merged")
    assert done.returncode == 2, done.stderr
    assert "k1 has 2 ready boots in this shard, more than the 1 rounds" in done.stderr
    assert done.stderr.count("Error:") == 1 and not (tmp_path / "merged").exists()


def test_import_of_many_requests_flushes_the_disk_once_not_per_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One fsync per record made 200,000 requests take six minutes on a slow disk."""
    data = json.loads((DATA / "vllm_bench" / "k3_detailed.json").read_text())
    n = 2000
    for key in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors"):
        data[key] = (data[key] * n)[:n]
    data["start_times"] = [1000.0 + i / 100 for i in range(n)]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    real_fsync, synced = os.fsync, []

    def counted(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    report = import_vllm_bench([path], arm="k3", out=tmp_path / "r", method="mtp", k=3)
    assert dict(report.written)["request"] == n
    assert len(synced) < 20  # campaign.json and records.jsonl: a few, whatever the count of records
    lines = (tmp_path / "r" / "records.jsonl").read_text().splitlines()
    assert sum('"kind":"request"' in line for line in lines) == n
