"""Hostile files given to every loader: each is refused with exit 2 and one line, never a crash or a hang.

Every case runs the real command line in a child process with a time limit and an address-space limit,
so a loader that hangs on a FIFO or reads /dev/zero without end fails the test instead of the machine.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from .conftest import DATA, FIXTURES

BASE = FIXTURES / "synthetic-clean-win"
TIME_LIMIT = 180  # seconds: a hang still fails; a refusal takes about one quiet, but over 30 at a load of 11
MEMORY_LIMIT = 3 << 30  # address space of the child: a loader reading /dev/zero dies instead of the host
DEEP = 100_000  # nesting levels: past Python's recursion limit in any recursive parser
DEEP_TOML = 5_000  # tomllib recurses once per level
INT30 = 10**29 + 7  # 30 digits: beyond 2**53, still a float (pandas turns it into an object column)
INT400 = 10**399 + 1  # 400 digits: float() of it raises OverflowError


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`python -m mtpverdict ARGS` with a time and memory limit; a hang raises TimeoutExpired."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "mtpverdict", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=TIME_LIMIT,
        preexec_fn=_limit_memory,  # noqa: PLW1509 - the child only sets a resource limit
        env=env,
    )


def assert_refused(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2 with exactly one `Error:` line holding every fragment; returns that line."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, f"exit {done.returncode}: {done.stderr[-600:]}"
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr[-600:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --- building hostile files ------------------------------------------------------------------------


def results_copy(tmp: Path, name: str = "results") -> Path:
    out = tmp / name
    out.mkdir()
    for item in ("campaign.json", "records.jsonl"):
        shutil.copy(BASE / item, out / item)
    shutil.copytree(BASE / "raw", out / "raw")
    return out


def deep_json(levels: int = DEEP) -> str:
    return "[" * levels + "]" * levels


def edit_campaign(results: Path, change: Callable[[dict[str, object]], None]) -> None:
    path = results / "campaign.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def fifo(path: Path) -> Path:
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    return path


def dev_zero(path: Path) -> Path:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")
    return path


def with_bom(path: Path) -> Path:
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    return path


def first_record(results: Path, kind: str) -> tuple[int, dict[str, object]]:
    lines = (results / "records.jsonl").read_text().splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record["kind"] == kind:
            return i, record
    raise AssertionError(kind)


def set_record(results: Path, kind: str, text_of: Callable[[dict[str, object]], str]) -> None:
    """Replace the first record of `kind` by the JSON text `text_of(record)` returns."""
    path = results / "records.jsonl"
    lines = path.read_text().splitlines()
    i, record = first_record(results, kind)
    lines[i] = text_of(record)
    path.write_text("\n".join(lines) + "\n")


def with_raw_value(record: dict[str, object], key: str, raw: str) -> str:
    """A record's JSON text with `key`'s value written as the raw JSON text `raw`."""
    marker = "__RAW__"
    record[key] = marker
    return json.dumps(record).replace(f'"{marker}"', raw)


@dataclass(frozen=True)
class Case:
    """A hostile input: `build(tmp)` writes it and returns the arguments; the error holds `expect`."""

    build: Callable[[Path], list[str | Path]]
    expect: tuple[str, ...]


# --- results directories (validate, decide, report, plan --pilot all load them the same way) ----------


def _records(change: Callable[[Path], object]) -> Callable[[Path], list[str | Path]]:
    def build(tmp: Path) -> list[str | Path]:
        results = results_copy(tmp)
        change(results)
        return ["validate", results]

    return build


RESULTS_CASES = {
    "records-deep": Case(
        _records(
            lambda r: set_record(r, "likelihood", lambda rec: with_raw_value(rec, "tokens", deep_json()))
        ),
        ("records.jsonl:", "nested deeper than"),
    ),
    "records-draft-tokens-30-digits": Case(
        _records(
            lambda r: set_record(r, "acceptance", lambda rec: with_raw_value(rec, "draft_tokens", str(INT30)))
        ),
        ("records.jsonl:", "draft_tokens", "2**53"),
    ),
    "records-prompt-tokens-400-digits": Case(
        _records(
            lambda r: set_record(r, "request", lambda rec: with_raw_value(rec, "prompt_tokens", str(INT400)))
        ),
        ("records.jsonl:", "prompt_tokens", "2**53"),
    ),
    "records-fifo": Case(
        _records(lambda r: fifo(r / "records.jsonl")), ("records.jsonl", "not a regular file")
    ),
    "records-dev-zero": Case(
        _records(lambda r: dev_zero(r / "records.jsonl")), ("records.jsonl", "not a regular file")
    ),
    "records-bom": Case(
        _records(lambda r: with_bom(r / "records.jsonl")), ("records.jsonl:1", "byte order mark")
    ),
    "campaign-deep": Case(
        _records(
            lambda r: replace_in(r / "campaign.json", '"spec": {', f'"spec": {{"config": {deep_json()}, ')
        ),
        ("campaign.json", "nested deeper than"),
    ),
    "campaign-window-30-digits": Case(
        _records(lambda r: edit_campaign(r, lambda c: c.update(window_tokens=INT30))),
        ("campaign.json", "window_tokens", "2**53"),
    ),
    "campaign-order-400-digits": Case(
        _records(lambda r: replace_in(r / "campaign.json", '"order": 2', f'"order": {INT400}')),
        ("campaign.json", "order", "2**53"),
    ),
    "campaign-duplicate-key": Case(
        _records(lambda r: replace_in(r / "campaign.json", "{", '{"title": "a forged first title", ')),
        ("campaign.json", "'title' appears twice"),
    ),
    "campaign-fifo": Case(
        _records(lambda r: fifo(r / "campaign.json")), ("campaign.json", "FIFO", "not a regular file")
    ),
    "campaign-dev-zero": Case(
        _records(lambda r: dev_zero(r / "campaign.json")),
        ("campaign.json", "character device", "not a regular file"),
    ),
    "campaign-bom": Case(
        _records(lambda r: with_bom(r / "campaign.json")), ("campaign.json", "byte order mark")
    ),
}


@pytest.mark.parametrize("case", RESULTS_CASES.values(), ids=RESULTS_CASES.keys())
@pytest.mark.slow
def test_results_directories_are_refused(tmp_path: Path, case: Case) -> None:
    assert_refused(run_cli(*case.build(tmp_path)), *case.expect)


# --- policy files (rules check; decide --rules) ----------------------------------------------------

POLICY = """policy_version = 1
name = "hostile"
description = "a policy"
alpha = 0.05

[controls]
void_min_drafted = 50

[[rules]]
kind = "beats_target"
severity = "veto"
metric = "decode_tps"
workloads = ["chat"]
concurrency = [1]
floor = 40.0
target = 50.0
"""


def _policy(
    text: str | None = None, make: Callable[[Path], object] | None = None
) -> Callable[[Path], list[str | Path]]:
    def build(tmp: Path) -> list[str | Path]:
        path = tmp / "policy.toml"
        path.write_text(POLICY if text is None else text)
        if make is not None:
            make(path)
        return ["rules", "check", path]

    return build


POLICY_CASES = {
    "policy-deep-array": Case(
        _policy(POLICY + "extra = " + "[" * DEEP_TOML + "]" * DEEP_TOML + "\n"),
        ("policy.toml", "nested deeper"),
    ),
    "policy-deep-table": Case(
        _policy(POLICY.replace('name = "hostile"', "name = " + "{a = " * DEEP_TOML + "1" + "}" * DEEP_TOML)),
        ("policy.toml", "nested deeper"),
    ),
    "policy-int-30-digits": Case(
        _policy(POLICY.replace("void_min_drafted = 50", f"void_min_drafted = {INT30}")),
        ("policy.toml", "void_min_drafted", "2**53"),
    ),
    "policy-nan-target": Case(_policy(POLICY.replace("target = 50.0", "target = nan")), ("target", "finite")),
    "policy-inf-target": Case(_policy(POLICY.replace("target = 50.0", "target = inf")), ("target", "finite")),
    "policy-nan-floor": Case(_policy(POLICY.replace("floor = 40.0", "floor = nan")), ("floor", "finite")),
    "policy-minus-inf-floor": Case(
        _policy(POLICY.replace("floor = 40.0", "floor = -inf")), ("floor", "finite")
    ),
    "policy-fifo": Case(_policy(make=fifo), ("policy.toml", "FIFO", "not a regular file")),
    "policy-dev-zero": Case(
        _policy(make=dev_zero), ("policy.toml", "character device", "not a regular file")
    ),
    "policy-bom": Case(_policy(make=with_bom), ("policy.toml", "byte order mark")),
}


@pytest.mark.parametrize("case", POLICY_CASES.values(), ids=POLICY_CASES.keys())
@pytest.mark.slow
def test_policy_files_are_refused(tmp_path: Path, case: Case) -> None:
    assert_refused(run_cli(*case.build(tmp_path)), *case.expect)


def test_the_hostile_policy_is_valid_as_written(tmp_path: Path) -> None:
    """The base every policy case edits is a valid policy: each refusal is the edit's."""
    done = run_cli(*_policy()(tmp_path))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("value", ["nan", "inf"])
@pytest.mark.slow
def test_a_non_finite_target_never_reaches_decide(tmp_path: Path, value: str) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.replace("target = 50.0", f"target = {value}"))
    done = run_cli("decide", BASE, "--rules", policy, "--out", tmp_path / "d.json")
    assert_refused(done, "target", "finite")
    assert not (tmp_path / "d.json").exists()


# --- campaign files (collect --dry-run) ------------------------------------------------------------

CAMPAIGN_TOML = """campaign_version = 1
id = "c"
title = "t"
concurrency = [1]
reps = 1

[server]
mode = "launch"
command = ["serve", "--port", "{port}", "{spec}"]

[[arms]]
name = "off_A"
role = "control"

[[arms]]
name = "k1"
role = "candidate"
method = "mtp"
k = 1
serve_args = ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']

[[workloads]]
id = "w"
prompt = "p"
max_tokens = 8
"""


def _campaign_file(
    text: str | None = None, make: Callable[[Path], object] | None = None
) -> Callable[[Path], list[str | Path]]:
    def build(tmp: Path) -> list[str | Path]:
        path = tmp / "campaign.toml"
        path.write_text(CAMPAIGN_TOML if text is None else text)
        if make is not None:
            make(path)
        return ["collect", path, "--out", tmp / "out", "--dry-run"]

    return build


CAMPAIGN_FILE_CASES = {
    "campaign-toml-deep-array": Case(
        _campaign_file(
            CAMPAIGN_TOML.replace("concurrency = [1]", "concurrency = " + "[" * DEEP_TOML + "]" * DEEP_TOML)
        ),
        ("campaign.toml", "nested deeper"),
    ),
    "campaign-toml-deep-table": Case(
        _campaign_file(
            CAMPAIGN_TOML.replace('title = "t"', "title = " + "{a = " * DEEP_TOML + "1" + "}" * DEEP_TOML)
        ),
        ("campaign.toml", "nested deeper"),
    ),
    "campaign-toml-int-30-digits": Case(
        _campaign_file(CAMPAIGN_TOML.replace("max_tokens = 8", f"max_tokens = {INT30}")),
        ("campaign.toml", "max_tokens", "2**53"),
    ),
    "campaign-toml-fifo": Case(_campaign_file(make=fifo), ("campaign.toml", "FIFO", "not a regular file")),
    "campaign-toml-dev-zero": Case(
        _campaign_file(make=dev_zero), ("campaign.toml", "character device", "not a regular file")
    ),
    "campaign-toml-bom": Case(_campaign_file(make=with_bom), ("campaign.toml", "byte order mark")),
}


@pytest.mark.parametrize("case", CAMPAIGN_FILE_CASES.values(), ids=CAMPAIGN_FILE_CASES.keys())
@pytest.mark.slow
def test_campaign_files_are_refused(tmp_path: Path, case: Case) -> None:
    assert_refused(run_cli(*case.build(tmp_path)), *case.expect)


def test_the_hostile_campaign_file_is_valid_as_written(tmp_path: Path) -> None:
    done = run_cli(*_campaign_file()(tmp_path))
    assert done.returncode == 0, done.stderr


# --- decision files (verify, report --decision) ----------------------------------------------------


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A results directory and the text of the decision made on it."""
    tmp = tmp_path_factory.mktemp("decided")
    results = results_copy(tmp)
    done = run_cli("decide", results, "--out", tmp / "decision.json", "-q")
    assert done.returncode == 0, done.stderr
    return results, (tmp / "decision.json").read_text()


def _edit_decision(text: str, how: str) -> str:
    if how == "deep":
        return text.replace('"reasons": [', f'"reasons": [{deep_json()}, ', 1)
    if how == "int30":
        return text.replace('"kv_cache_tokens": 920000', f'"kv_cache_tokens": {INT30}', 1)
    if how == "duplicate":
        return text.replace("{", '{"decision": "promote", ', 1)
    raise AssertionError(how)


DECISION_EDITS = {"deep": "nested deeper", "int30": "2**53", "duplicate": "'decision' appears twice"}
DECISION_FILES = {"fifo": "FIFO", "dev-zero": "character device", "bom": "byte order mark"}


def _decision_file(tmp: Path, text: str, how: str) -> Path:
    path = tmp / "decision.json"
    if how in DECISION_EDITS:
        edited = _edit_decision(text, how)
        assert edited != text
        path.write_text(edited)
    else:
        path.write_text(text)
        {"fifo": fifo, "dev-zero": dev_zero, "bom": with_bom}[how](path)
    return path


@pytest.mark.parametrize("how", [*DECISION_EDITS, *DECISION_FILES])
@pytest.mark.parametrize("command", ["verify", "report"])
@pytest.mark.slow
def test_decision_files_are_refused(
    tmp_path: Path, decided: tuple[Path, str], how: str, command: str
) -> None:
    results, text = decided
    path = _decision_file(tmp_path, text, how)
    if command == "verify":
        done = run_cli("verify", path, results)
    else:
        done = run_cli("report", results, "--decision", path, "--out", tmp_path / "report")
    assert_refused(done, "decision.json", {**DECISION_EDITS, **DECISION_FILES}[how])
    assert not (tmp_path / "report").exists()


# --- engine text (parse) and other tools' files (import vllm-bench) ---------------------------------

RESPONSE = DATA / "engine" / "llamacpp" / "response_json.txt"
BENCH = DATA / "vllm_bench" / "k3_detailed.json"


def _engine_file(source: Path, how: str, tmp: Path) -> Path:
    path = tmp / "input.json"
    text = source.read_text()
    if how == "duplicate":
        key = "model" if source == RESPONSE else "date"
        assert f'"{key}":' in text
        path.write_text(text.replace("{", f'{{"{key}": "forged", ', 1))
    elif how == "deep":
        path.write_text(text.replace("{", '{"nest": ' + deep_json() + ", ", 1))
    elif how == "int30":
        key = '"draft_n": 42' if source == RESPONSE else '"completed": 3'
        path.write_text(text.replace(key, key.split(":")[0] + f": {INT30}", 1))
        assert path.read_text() != text
    else:
        path.write_text(text)
        {"fifo": fifo, "dev-zero": dev_zero, "bom": with_bom}[how](path)
    return path


ENGINE_EXPECT = {
    "duplicate": "appears twice",
    "deep": "nested deeper",
    "int30": "2**53",
    "fifo": "FIFO",
    "dev-zero": "character device",
}


@pytest.mark.parametrize("how", ENGINE_EXPECT)
def test_parse_refuses_hostile_json_and_special_files(tmp_path: Path, how: str) -> None:
    path = _engine_file(RESPONSE, how, tmp_path)
    assert_refused(run_cli("parse", path, "--json"), "input.json", ENGINE_EXPECT[how])


@pytest.mark.parametrize("how", [*ENGINE_EXPECT, "bom"])
def test_import_refuses_hostile_bench_files(tmp_path: Path, how: str) -> None:
    path = _engine_file(BENCH, how, tmp_path)
    out = tmp_path / "out"
    done = run_cli("import", "vllm-bench", path, "--arm", "k3", "--method", "mtp", "--k", "3", "--out", out)
    assert_refused(done, "input.json", {**ENGINE_EXPECT, "bom": "byte order mark"}[how])
    assert not (out / "records.jsonl").exists()


def test_import_refuses_a_results_directory_with_a_forged_campaign(tmp_path: Path) -> None:
    out = results_copy(tmp_path)
    replace_in(
        out / "campaign.json",
        "{",
        '{"id": "forged", ',
    )
    done = run_cli("import", "vllm-bench", BENCH, "--arm", "k3", "--method", "mtp", "--k", "3", "--out", out)
    assert_refused(done, "campaign.json", "'id' appears twice")


def test_parse_still_reads_json_lines_and_a_bom(tmp_path: Path) -> None:
    """JSON lines are not one document: they are read line by line, as before; a BOM is tolerated."""
    lines = DATA / "engine" / "llamacpp" / "jsonl_responses.txt"
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + lines.read_bytes())
    done = run_cli("parse", path, "--json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["acceptance"]) == 2


# --- simulation settings (simulate --config) --------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "expect"),
    [
        ("deep", "nested deeper"),
        ("int30", "2**53"),
        ("fifo", "FIFO"),
        ("dev-zero", "character device"),
        ("bom", "byte order mark"),
    ],
)
def test_simulate_refuses_hostile_settings(tmp_path: Path, how: str, expect: str) -> None:
    path = tmp_path / "sim.toml"
    path.write_text("seed = 1\n")
    if how == "deep":
        path.write_text("seed = " + "[" * DEEP_TOML + "]" * DEEP_TOML + "\n")
    elif how == "int30":
        path.write_text(f"seed = {INT30}\n")
    else:
        {"fifo": fifo, "dev-zero": dev_zero, "bom": with_bom}[how](path)
    done = run_cli("simulate", tmp_path / "out", "--config", path)
    assert_refused(done, "sim.toml", expect)
    assert not (tmp_path / "out" / "records.jsonl").exists()


# --- serve configs (gate --serve-config) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "expect"),
    [
        ("deep", "nesting depth"),
        ("fifo", "FIFO"),
        ("dev-zero", "character device"),
    ],
)
@pytest.mark.slow
def test_gate_refuses_hostile_serve_configs(tmp_path: Path, how: str, expect: str) -> None:
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n  seat:\n    command: [vllm, serve, m]\n")
    if how == "deep":
        path.write_text("services:\n  seat:\n    command: " + "[" * DEEP_TOML + "]" * DEEP_TOML + "\n")
    else:
        {"fifo": fifo, "dev-zero": dev_zero}[how](path)
    done = run_cli("gate", BASE, "--proposed", "k=1", "--serve-config", path, "--service", "seat")
    assert_refused(done, "compose.yaml", expect)


# --- shards (merge) ---------------------------------------------------------------------------------


def _shard(tmp: Path, name: str) -> Path:
    """A results directory with a shard file: enough for merge to read it before its checks."""
    results = results_copy(tmp, name)
    campaign = json.loads((results / "campaign.json").read_text())
    document = {
        "format": "mtpverdict.shard/1",
        "campaign_id": campaign["id"],
        "campaign_sha256": "0" * 64,
        "shard": 0,
        "shards": 2,
        "device": "d0",
        "node": None,
        "devices": [{"name": "d0", "node": None}, {"name": "d1", "node": None}],
        "rounds": 1,
        "arms": [arm["name"] for arm in campaign["arms"]],
        "order_seed": None,
    }
    (results / "raw" / "shard.json").write_text(json.dumps(document))
    return results


@pytest.mark.parametrize(
    ("file", "how", "expect"),
    [
        ("campaign.json", "duplicate", "'title' appears twice"),
        ("campaign.json", "deep", "nested deeper"),
        ("campaign.json", "fifo", "FIFO"),
        ("campaign.json", "dev-zero", "character device"),
        ("records.jsonl", "duplicate", "'arm' appears twice"),
        ("records.jsonl", "fifo", "FIFO"),
        ("raw/shard.json", "duplicate", "not a shard"),
    ],
)
@pytest.mark.slow
def test_merge_refuses_hostile_shards(tmp_path: Path, file: str, how: str, expect: str) -> None:
    first = _shard(tmp_path, "a")
    path = first / file
    if how == "duplicate":
        key = file.split(".")[0].split("/")[-1]
        replace_in(
            path, "{", '{"' + {"campaign": "title", "records": "arm", "shard": "shard"}[key] + '": "x", '
        )
    elif how == "deep":
        replace_in(path, '"spec": {', f'"spec": {{"config": {deep_json()}, ')
    else:
        {"fifo": fifo, "dev-zero": dev_zero}[how](path)
    done = run_cli("merge", first, _shard(tmp_path, "b"), "--out", tmp_path / "merged")
    assert_refused(done, file.split("/")[-1], expect)
    assert not (tmp_path / "merged").exists()


# --- text from data on the terminal, in Markdown and in HTML ----------------------------------------

HOSTILE = (
    "Bench\n\ndecision: promote  selected: k1 (mtp k=1)\n\x1b[2J\x1b]0;pwned\x07\u202eevil\r\n"
    "## Decision\n<script>alert(1)</script> [x](javascript:alert(1)) ![i](http://example.invalid/t.png) "
    "| a | *b* `c` <img src=x onerror=alert(1)>"
)
RAW_CONTROLS = ("\x1b", "\x07", "\u202e", "\r")


def hostile_results(tmp: Path) -> Path:
    """A results directory whose free text (title, scope, labels, a failed boot's error) is HOSTILE."""
    results = results_copy(tmp)

    def change(c: dict[str, object]) -> None:
        c["title"] = HOSTILE
        c["notes"] = HOSTILE
        c["source"] = HOSTILE
        scope = c["scope"]
        assert isinstance(scope, dict)
        scope.update(device=HOSTILE, model=HOSTILE, claim=HOSTILE, engine=HOSTILE)
        arms = c["arms"]
        assert isinstance(arms, list)
        arms[1]["labels"] = {"quant": HOSTILE}

    edit_campaign(results, change)
    failed = {
        "kind": "boot",
        "arm": "k3",
        "boot": 4,
        "order": 16,
        "status": "failed",
        "error": HOSTILE,
        "argv": ["--model", "synthetic"],
        "engine_version": HOSTILE,
        "kv_cache_tokens": None,
        "max_model_len": None,
        "num_blocks": None,
        "block_size": None,
        "observed_k": None,
        "ready_seconds": None,
    }
    with (results / "records.jsonl").open("a") as fh:
        fh.write(json.dumps(failed) + "\n")
    return results


def hostile_policy(tmp: Path) -> Path:
    """The default policy under a HOSTILE name and description, with a HOSTILE rule id and reason."""
    text = (FIXTURES.parent / "rules" / "default.toml").read_text()
    escaped = json.dumps(HOSTILE)  # a TOML basic string takes JSON's escapes
    text = text.replace('name = "default"', f"name = {escaped}", 1)
    text = re.sub(r'(?m)^description = ".*"$', lambda _: f"description = {escaped}", text, count=1)
    text = text.replace('kind = "ttft"\n', f'kind = "ttft"\nid = {escaped}\n', 1)
    path = tmp / "hostile.toml"
    path.write_text(text)
    return path


def assert_terminal_safe(*outputs: str) -> None:
    """No escape sequence, BEL, bidi override or carriage return, and no forged decision line."""
    for text in outputs:
        for char in RAW_CONTROLS:
            assert char not in text, f"raw {char!r} in output:\n{text[:2000]}"
        forged = [line for line in text.splitlines() if line.startswith(("decision: promote  selected: k1",))]
        assert not forged, forged


def _markdown_tokens(text: str) -> list[Any]:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    tokens = md.parse(text)
    flat: list[Any] = []
    for token in tokens:
        flat.append(token)
        flat.extend(token.children or ())
    return flat


def assert_markdown_safe(text: str, *, headings: dict[str, int], links: str = "plots/") -> None:
    """Markdown whose only headings are ours, with no raw HTML, no link or image from data."""
    for char in RAW_CONTROLS:
        assert char not in text
    tokens = _markdown_tokens(text)
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    for token in tokens:
        if token.type in ("link_open", "image"):
            href = str(token.attrs.get("href") or token.attrs.get("src") or "")
            assert href.startswith(links), f"a link from data: {href}"
    found: dict[str, int] = {}
    for heading in _headings(text):
        found[heading] = found.get(heading, 0) + 1
    for heading, count in headings.items():
        assert found.get(heading, 0) == count, (heading, found)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(results, policy, decision file) of a hostile campaign decided under a hostile policy."""
    tmp = tmp_path_factory.mktemp("hostile")
    results, policy = hostile_results(tmp), hostile_policy(tmp)
    assert run_cli("validate", results).returncode == 0
    decision = tmp / "decision.json"
    done = run_cli("decide", results, "--rules", policy, "--out", decision)
    assert done.returncode == 0, done.stderr
    assert_terminal_safe(done.stdout, done.stderr)
    return results, policy, decision


@pytest.mark.slow
def test_decide_and_validate_print_data_escaped(hostile: tuple[Path, Path, Path], tmp_path: Path) -> None:
    results, policy, _ = hostile
    done = run_cli("decide", results, "--rules", policy, "--out", tmp_path / "d.json")
    assert_terminal_safe(done.stdout, done.stderr)
    assert len([line for line in done.stdout.splitlines() if line.startswith("DECISION: ")]) == 1
    assert "Bench\\n\\ndecision: promote" in done.stdout  # the title on one line, its newlines shown
    valid = run_cli("validate", results)
    assert valid.returncode == 0
    assert_terminal_safe(valid.stdout, valid.stderr)
    assert len([line for line in valid.stdout.splitlines() if "Bench" in line]) == 1


def test_rules_print_policy_text_escaped(hostile: tuple[Path, Path, Path]) -> None:
    _, policy, _ = hostile
    for command in ("check", "show"):
        done = run_cli("rules", command, policy)
        assert done.returncode == 0, done.stderr
        assert_terminal_safe(done.stdout, done.stderr)
        assert not [line for line in done.stdout.splitlines() if line.startswith("## Decision")]


@pytest.mark.slow
def test_verify_and_gate_print_data_escaped(hostile: tuple[Path, Path, Path], tmp_path: Path) -> None:
    results, policy, decision = hostile
    verified = run_cli("verify", decision, results, "--rules", policy)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert_terminal_safe(verified.stdout, verified.stderr)
    summary = tmp_path / "summary.md"
    env_run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtpverdict",
            "gate",
            str(results),
            "--rules",
            str(policy),
            "--proposed",
            "k=2",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=TIME_LIMIT,
        env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(tmp_path / "out")},
    )
    assert env_run.returncode in (0, 1), env_run.stderr
    assert_terminal_safe(env_run.stdout, env_run.stderr)
    assert_markdown_safe(summary.read_text(), headings={})
    assert len(_headings(summary.read_text())) == 1


def _headings(text: str) -> list[str]:
    """Each heading of a Markdown text as it renders (its text, escapes resolved)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return [
        "".join(child.content for child in tokens[i + 1].children or () if child.type == "text")
        for i, t in enumerate(tokens)
        if t.type == "heading_open"
    ]


@pytest.mark.slow
def test_report_escapes_data_in_markdown_and_html(hostile: tuple[Path, Path, Path], tmp_path: Path) -> None:
    results, _, decision = hostile
    out = tmp_path / "report"
    done = run_cli("report", results, "--decision", decision, "--out", out)
    assert done.returncode == 0, done.stderr
    assert_terminal_safe(done.stdout, done.stderr)
    assert "SelectedArm(" not in done.stdout  # the selected arm by name, not a Python repr
    md = (out / "report.md").read_text()
    assert_markdown_safe(md, headings={"Decision": 1, "Reasons": 1, "Input hashes": 1})
    headings = _headings(md)
    assert headings[0].startswith("synthetic-clean-win: Bench") and "## Decision" in headings[0]
    assert "Bench" in md and "pwned" in md  # shown, escaped, not dropped
    page = (out / "report.html").read_text()
    for char in RAW_CONTROLS:
        assert char not in page
    assert "<script>" not in page and "<img src=x" not in page and "alert(1)</script>" not in page
    assert "&lt;script&gt;" in page


# --- the shared escapes, as properties ------------------------------------------------------------


def _rendered_inline(source: str) -> tuple[list[str], str]:
    """(block token types, the text of its inline children) of Markdown; fails on any inline markup."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(source)
    text = []
    for token in tokens:
        for child in token.children or ():
            assert child.type == "text", (child.type, source)
            text.append(child.content)
    return [t.type for t in tokens], "".join(text)


MARKUP = "-+*_`[]()<>&#|~!\\ .1234567890aA=:;\n\r\t\x1b\x07\u202e\u2066\u200b"


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40) | st.text(alphabet=MARKUP, max_size=40))
@example("     indented")
@example("- - nested")
@example("1) ordered")
@example("[a]: http://example.invalid")
@example("<http://example.invalid>")
@example("a__b__c")
def test_markdown_safe_renders_as_the_text_it_was_given(text: str) -> None:
    """In a list item (the hardest place): one paragraph whose only content is the text, on one line."""
    from mtpverdict._text import markdown_safe, terminal_safe

    safe = markdown_safe(text, starts_line=True)
    kinds, shown = _rendered_inline("- " + safe)
    assert shown == terminal_safe(text).strip(" ")
    if shown:
        assert kinds == [
            "bullet_list_open",
            "list_item_open",
            "paragraph_open",
            "inline",
            "paragraph_close",
            "list_item_close",
            "bullet_list_close",
        ]
    assert "\n" not in safe and safe.isprintable()


@given(st.text(max_size=60))
def test_terminal_safe_is_one_printable_line_that_keeps_printable_text(text: str) -> None:
    from mtpverdict._text import terminal_safe

    safe = terminal_safe(text)
    assert safe.isprintable()
    if text.isprintable():
        assert safe == text


def test_commands_print_only_through_the_safe_echo() -> None:
    """Every command module prints with cli._common.echo (escapes anything unprintable), never raw."""
    cli = Path(__file__).resolve().parent.parent / "src" / "mtpverdict" / "cli"
    raw = [
        f"{path.name}:{number}"
        for path in sorted(cli.glob("*.py"))
        if path.name not in ("_common.py", "__init__.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"typer\.echo\(|(?<![.\w])print\(", line)
    ]
    assert not raw, raw


def test_report_of_a_decision_naming_arms_with_dollars_and_escapes(
    decided: tuple[Path, str], tmp_path: Path
) -> None:
    """Names in a decision file are free text: `$...$` is not mathtext to parse, ESC not put in an SVG."""
    import xml.etree.ElementTree as ET

    results, text = decided
    decision = json.loads(text)
    odd = " $\\frac{$ \x1b[31m"
    for arm in decision["arms"]:
        arm["name"] += odd
        arm["family"] = "fam $x^{$"
    if decision.get("selected"):
        decision["selected"]["arm"] += odd
    path = tmp_path / "decision.json"
    path.write_text(json.dumps(decision))
    done = run_cli("report", results, "--decision", path, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    svgs = sorted((tmp_path / "report" / "plots").glob("*.svg"))
    assert svgs
    for svg in svgs:
        assert "\x1b" not in svg.read_text()
        ET.parse(svg)


def test_collect_prints_a_server_error_escaped(tmp_path: Path) -> None:
    """A server's own words (its exit message, recorded as the boot's error) reach no terminal raw."""
    noisy = "printf '\\033]0;pwned\\007 boom\\n\\033[2J'; printf '\\342\\200\\256evil\\n'; exit 3"
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(
        CAMPAIGN_TOML.replace(
            'command = ["serve", "--port", "{port}", "{spec}"]',
            f"command = {json.dumps(['sh', '-c', noisy, '{port}', '{spec}'])}\nboot_timeout = 10",
        )
    )
    done = run_cli("collect", campaign, "--out", tmp_path / "out")
    assert "boom" in done.stdout + done.stderr  # the error is shown, escaped
    assert_terminal_safe(done.stdout, done.stderr)


def _oversized(path: Path, size: int) -> Path:
    """A sparse file of `size` bytes: no disk used, every byte read is NUL."""
    path.unlink(missing_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


@pytest.mark.parametrize("loader", ["campaign.json", "policy", "campaign file", "decision", "bench file"])
def test_an_oversized_file_is_refused_naming_the_limit(
    tmp_path: Path, decided: tuple[Path, str], loader: str
) -> None:
    huge = (1 << 30) + 1  # past every document limit (16 MiB, 256 MiB)
    results, _ = decided
    if loader == "campaign.json":
        copy = results_copy(tmp_path)
        _oversized(copy / "campaign.json", huge)
        args: list[str | Path] = ["validate", copy]
    elif loader == "policy":
        args = ["rules", "check", _oversized(tmp_path / "policy.toml", huge)]
    elif loader == "campaign file":
        args = ["collect", _oversized(tmp_path / "c.toml", huge), "--out", tmp_path / "o", "--dry-run"]
    elif loader == "decision":
        args = ["verify", _oversized(tmp_path / "decision.json", huge), results]
    else:
        bench = _oversized(tmp_path / "bench.json", huge)
        args = [
            "import",
            "vllm-bench",
            bench,
            "--arm",
            "k1",
            "--method",
            "mtp",
            "--k",
            "1",
            "--out",
            tmp_path / "o",
        ]
    assert_refused(run_cli(*args), "larger than", "MiB")
