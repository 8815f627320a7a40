"""Hostile inputs, fuzzing of every loader, determinism across environments, tamper evidence."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtpverdict.collect.campaign import parse_campaign
from mtpverdict.errors import CampaignError, InputError, PolicyError, ResultsError
from mtpverdict.formats.results_io import load_results
from mtpverdict.gate import read_serve_config
from mtpverdict.rules import parse_rules as parse_policy

from .conftest import DATA, FIXTURES, ROOT, copy_fixture, run_cli

INVALID = DATA / "invalid"
CAMPAIGN_FILE_CASES: dict[str, tuple[str | None, str]] = {
    "unknown_top_key": ("owner", "unknown key"),
    "unknown_version": ("campaign_version", "campaign_version 2 is not supported"),
    "no_control": ("arms", "no control arm"),
    "candidate_without_method": ("arms[1]", "a candidate arm needs method and k"),
    "external_without_base_url": ("arms[0].base_url", "external mode needs base_url"),
    "shell_with_argv_list": ("server.command", "shell = true takes the command as one string"),
    "not_toml": (None, "not valid TOML"),
    "duplicate_arm": ("arms", "appears twice"),
    "prompt_and_prompt_tokens": ("workloads[0]", "give one of prompt, prompt_tokens and dataset"),
    "zero_concurrency": ("concurrency[0]", "must be >= 1"),
    "env_not_string": ("server.env.X", "must be a string, got int"),
    "unknown_method": ("arms[1].method", "must be one of mtp"),
    "launch_without_command": ("server.command", "launch mode needs the serve command"),
}


def test_the_hostile_corpus_has_at_least_forty_files() -> None:
    files = [p for p in INVALID.rglob("*") if p.is_file() and p.name != "campaign.json"]
    assert len(files) >= 40


@pytest.mark.parametrize("case", sorted(CAMPAIGN_FILE_CASES))
def test_malformed_campaign_files_are_refused(case: str) -> None:
    path = INVALID / "campaign-files" / f"{case}.toml"
    key, fragment = CAMPAIGN_FILE_CASES[case]
    with pytest.raises(CampaignError) as info:
        parse_campaign(path.read_text(), str(path))
    found = [(p.key, p.message) for p in info.value.problems]
    assert any(k == key and fragment in m for k, m in found), found


def test_the_campaign_file_corpus_is_complete() -> None:
    assert {p.stem for p in (INVALID / "campaign-files").glob("*.toml")} == set(CAMPAIGN_FILE_CASES)


# --- fuzzing: no exception but the module's own input error escapes any loader ----------------------

VALID_LINES = (FIXTURES / "synthetic-void-arm" / "records.jsonl").read_text().splitlines()[:40]
CAMPAIGN_JSON = (FIXTURES / "synthetic-void-arm" / "campaign.json").read_text()


def _mutate(data: st.DataObject, text: str) -> str:
    ops = data.draw(
        st.lists(st.tuples(st.integers(0, max(len(text) - 1, 0)), st.text(max_size=4)), max_size=4)
    )
    for pos, piece in ops:
        cut = data.draw(st.integers(0, 3))
        text = text[:pos] + piece + text[pos + cut :]
    return text


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_fuzz_results_loader(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    lines = [_mutate(data, line) if data.draw(st.booleans()) else line for line in VALID_LINES]
    campaign = _mutate(data, CAMPAIGN_JSON) if data.draw(st.integers(0, 9)) == 0 else CAMPAIGN_JSON
    (root / "campaign.json").write_text(campaign)
    raw = data.draw(st.binary(max_size=64)) if data.draw(st.integers(0, 9)) == 0 else b""
    (root / "records.jsonl").write_bytes("\n".join(lines).encode() + b"\n" + raw)
    try:
        load_results(root)
    except ResultsError as exc:
        assert all(str(p) and "\n" not in str(p) for p in exc.problems)


POLICY_TEXT = (ROOT / "rules" / "thor-c21.toml").read_text()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzz_policy_parser(data: st.DataObject) -> None:
    text = _mutate(data, POLICY_TEXT) if data.draw(st.booleans()) else data.draw(st.text(max_size=200))
    try:
        parse_policy(text, "fuzz.toml")
    except PolicyError:
        pass


CAMPAIGN_TOML = (ROOT / "collectors" / "vllm-cpu" / "campaign.toml").read_text()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fuzz_campaign_parser(data: st.DataObject) -> None:
    text = _mutate(data, CAMPAIGN_TOML) if data.draw(st.booleans()) else data.draw(st.text(max_size=200))
    try:
        parse_campaign(text, "fuzz.toml")
    except CampaignError:
        pass


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_fuzz_serve_config_reader(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("serve") / "compose.yaml"
    path.write_text("services:\n  seat:\n    command: " + text)
    try:
        read_serve_config(path, "seat")
    except InputError:
        pass


# --- memory stays bounded on a huge line ------------------------------------------------------------


@pytest.mark.slow
def test_a_huge_line_is_streamed_not_slurped(tmp_path: Path) -> None:
    shutil.copy(INVALID / "campaign.json", tmp_path / "campaign.json")
    size = 1 << 30  # a 1 GiB line (sparse on disk: its middle reads as NUL bytes); the loader holds 1 MiB
    with (tmp_path / "records.jsonl").open("wb") as fh:
        fh.write(b'{"kind": "request", "note": "' + b"x" * (1 << 20))
        fh.seek(size)
        fh.write(b'"}\n')
    code = (
        "import resource, sys\nfrom mtpverdict.formats.results_io import load_results\n"
        "from mtpverdict.errors import ResultsError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"try:\n    load_results({str(tmp_path)!r})\n"
        "except ResultsError as exc:\n    print(exc.problems[0])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    message, grown_kib = done.stdout.strip().splitlines()
    assert "longer than" in message
    assert int(grown_kib) < 64 * 1024, f"RSS grew by {int(grown_kib) // 1024} MiB on a 1 GiB line"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0


# --- determinism ------------------------------------------------------------------------------------


def _decide_text(fixture: Path, env: dict[str, str], out: Path) -> bytes:
    subprocess.run(
        [sys.executable, "-m", "mtpverdict", "decide", str(fixture), "--out", str(out), "-q"],
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


@pytest.mark.slow
def test_decisions_are_byte_identical_across_reruns_hash_seeds_and_locales(tmp_path: Path) -> None:
    fixture = copy_fixture("synthetic-clean-win", tmp_path)  # the first run records its look there
    envs = [{"PYTHONHASHSEED": str(seed)} for seed in (0, 1, 12345)]
    envs += [{"LC_ALL": "C", "LANG": "C"}, {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}, {"TZ": "Asia/Kolkata"}]
    outputs = {_decide_text(fixture, env, tmp_path / f"d{i}.json") for i, env in enumerate(envs)}
    assert len(outputs) == 1


def test_ten_in_process_reruns_and_shuffled_lines_give_one_answer(tmp_path: Path) -> None:
    from mtpverdict.decide import decide_directory

    fixture = FIXTURES / "thor-qwen36-35b-a3b"
    texts = {decide_directory(fixture, "thor-c21").json_text for _ in range(10)}
    shuffled = tmp_path / "shuffled"
    shutil.copytree(fixture, shuffled)
    lines = (shuffled / "records.jsonl").read_text().splitlines()
    (shuffled / "records.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    texts.add(decide_directory(shuffled, "thor-c21").json_text)
    assert len(texts) == 1


# --- tamper evidence ----------------------------------------------------------------------------------


def test_verify_detects_a_changed_record(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(FIXTURES / "synthetic-void-arm", results)
    decision = tmp_path / "decision.json"
    assert run_cli("decide", results, "--out", decision, "-q").returncode == 0
    ok = run_cli("verify", decision, results)
    assert ok.returncode == 0 and "reproduces byte for byte" in ok.stdout
    lines = (results / "records.jsonl").read_text().splitlines()
    record = json.loads(lines[5])
    record["t_end"] = record["t_end"] - 0.001  # a faster run, slipped in after the decision
    lines[5] = json.dumps(record)
    (results / "records.jsonl").write_text("\n".join(lines) + "\n")
    bad = run_cli("verify", decision, results)
    assert bad.returncode == 1 and "records_sha256: differs" in bad.stdout and "MISMATCH" in bad.stdout
    not_decision = tmp_path / "x.json"
    not_decision.write_text("{}")
    refused = run_cli("verify", not_decision, results)
    assert refused.returncode == 2 and "not a mtpverdict.decision/2 file" in refused.stderr
