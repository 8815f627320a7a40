"""`shell = true`: every substitution reaches the shell quoted, and the arm's serve_args reach the server."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from mtpverdict.collect import load_campaign_file

from .conftest import FAKE, run_collect, small_campaign

CLI = [sys.executable, "-m", "mtpverdict"]
SPEC = '["--speculative-config", "{\\"num_speculative_tokens\\": 2, \\"fake_accept\\": 0.9}"]'
ARMS = (("off_A", "[]"), ("ngram_k2", SPEC))


def _shell_command(spec: str) -> str:
    # the tag travels as an environment assignment, where an unquoted $(...) would run
    line = f"MTPVERDICT_TEST_TAG={{tag}} {{python}} {{fake}} --port {{port}} --tps 400{spec}"
    return json.dumps([line])


@pytest.mark.parametrize("spec", [" {spec}", ""], ids=["spec-placeholder", "spec-appended"])
@pytest.mark.slow
def test_shell_mode_quotes_substitutions_and_passes_the_arm_args(
    tmp_path: Path, port: int, spec: str
) -> None:
    planted = tmp_path / "planted"
    text = small_campaign(port, arms=ARMS, command=_shell_command(spec), shell=True).replace(
        "[server]", f'[vars]\npython = "{sys.executable}"\nfake = "{FAKE}"\n\n[server]'
    )
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(text)
    out = tmp_path / "results"
    argv = [*CLI, "collect", str(campaign), "--out", str(out), "--var", f"tag=$(touch {planted})"]
    done = run_collect(argv, out, timeout=180)
    assert not planted.exists(), "a --var value ran as a shell command"
    assert done.returncode == 0, done.stdout + done.stderr
    boots = {
        r["arm"]: r
        for r in map(json.loads, (out / "records.jsonl").read_text().splitlines())
        if r["kind"] == "boot"
    }
    assert boots["ngram_k2"]["status"] == "ready" and boots["ngram_k2"]["observed_k"] == 2
    assert boots["off_A"]["observed_k"] == 0
    argv = boots["ngram_k2"]["argv"]
    assert argv[:2] == ["/bin/sh", "-c"] and len(argv) == 3  # the record is what ran
    words = shlex.split(argv[2])
    assert f"MTPVERDICT_TEST_TAG=$(touch {planted})" in words
    assert words[-2:] == ["--speculative-config", '{"num_speculative_tokens": 2, "fake_accept": 0.9}']


def test_shell_mode_argv_quotes_each_value_once(tmp_path: Path) -> None:
    text = small_campaign(
        8000, arms=ARMS, command=json.dumps(["run {model} --x={arm} {spec} --port {port}"]), shell=True
    )
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(text)
    plan = load_campaign_file(campaign)
    argv = plan.serve_argv(plan.arms[1], {"model": "a b'; rm -rf /"}, 1, "r")
    assert argv[:2] == ["/bin/sh", "-c"]
    assert shlex.split(argv[2]) == [
        "run",
        "a b'; rm -rf /",
        "--x=ngram_k2",
        "--speculative-config",
        '{"num_speculative_tokens": 2, "fake_accept": 0.9}',
        "--port",
        "8000",
    ]
