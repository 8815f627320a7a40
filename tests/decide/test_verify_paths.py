"""A decision does not depend on how its results directory was named: `verify` reproduces it from any
spelling of the path and from any working directory."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from mtpverdict.formats.decision import fill_paths

from ..conftest import FIXTURES, ROOT, run_cli


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # an inconclusive fixture: its decision carries a next-step command naming the results directory
    root = tmp_path / "laptop"
    shutil.copytree(FIXTURES / "synthetic-null", root / "results" / "null")
    monkeypatch.chdir(root)
    decided = run_cli("decide", "results/null", "--out", "decision.json")
    assert decided.returncode == 0, decided.output
    return root


def test_the_decision_json_names_no_path(checkout: Path) -> None:
    text = (checkout / "decision.json").read_text()
    decision = json.loads(text)
    assert decision["next_step"] is not None
    assert "results/null" not in text and str(checkout) not in text


@pytest.mark.parametrize("spelling", ["relative", "absolute", "trailing-slash", "other-cwd"])
def test_verify_reproduces_from_every_spelling(
    checkout: Path, spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decision, results = "decision.json", "results/null"
    if spelling == "absolute":
        decision, results = str(checkout / decision), str(checkout / results)
    elif spelling == "trailing-slash":
        results += "/"
    elif spelling == "other-cwd":
        elsewhere = tmp_path / "ci" / "work"
        elsewhere.mkdir(parents=True)
        monkeypatch.chdir(elsewhere)
        decision, results = "../../laptop/decision.json", "../../laptop/results/null/"
    verified = run_cli("verify", decision, results)
    assert verified.returncode == 0, verified.output
    assert "reproduces byte for byte" in verified.output


def test_a_moved_checkout_still_verifies(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moved = tmp_path / "ci-clone"
    shutil.copytree(checkout, moved)
    monkeypatch.chdir(moved)
    verified = run_cli("verify", "decision.json", moved / "results" / "null")
    assert verified.returncode == 0, verified.output


def test_the_printed_next_step_names_the_directory_as_typed(checkout: Path) -> None:
    # collected with --until-resolved and looks left: the next step resumes the directory in place
    campaign = checkout / "results" / "null" / "campaign.json"
    campaign.unlink()  # a copy of its own, not the fixture's
    data = json.loads((FIXTURES / "synthetic-null" / "campaign.json").read_text())
    campaign.write_text(json.dumps(data | {"sequential_looks": 3}))
    (checkout / "results" / "null" / "raw" / "looks.jsonl").unlink()  # the fixture's look, taken as fixed
    decided = run_cli("decide", checkout / "results" / "null", "--out", "again.json")
    assert decided.returncode == 0, decided.output
    command = re.sub(r" \\\n +", " ", decided.output)  # a long command is continued over lines
    assert f"--out {checkout / 'results' / 'null'} --resume" in command


def test_a_policy_file_is_named_by_a_placeholder(checkout: Path) -> None:
    text = (ROOT / "rules" / "default.toml").read_text().replace('name = "default"', 'name = "mine"')
    (checkout / "policy").mkdir()
    (checkout / "policy" / "mine.toml").write_text(text)
    decided = run_cli("decide", "results/null", "--rules", "policy/mine.toml", "--out", "m.json")
    assert decided.returncode == 0, decided.output
    assert "--rules policy/mine.toml" in decided.output
    step = json.loads((checkout / "m.json").read_text())["next_step"]
    # a fixed campaign's alpha is spent at its one look: the next step is a new directory
    assert "--out NEW_RESULTS" in step and "--rules RULES.toml" in step
    absolute = str(checkout / "policy" / "mine.toml")
    verified = run_cli("verify", checkout / "m.json", "results/null/", "--rules", absolute)
    assert verified.returncode == 0, verified.output


def test_fill_paths_quotes_and_leaves_lookalikes() -> None:
    text = "mtpverdict collect CAMPAIGN.toml --out RESULTS --rules RULES.toml; RESULTS_X my/RESULTS"
    filled = fill_paths(text, "a dir/x", None)
    assert filled == (
        "mtpverdict collect CAMPAIGN.toml --out 'a dir/x' --rules RULES.toml; RESULTS_X my/RESULTS"
    )


@pytest.mark.parametrize(
    "spelling", ["default", "rules/default.toml", "./rules/default.toml", "absolute", "copy.toml"]
)
def test_the_shipped_policy_gives_one_decision_however_it_is_named(checkout: Path, spelling: str) -> None:
    # the shipped default by name, by three spellings of its path, and as a copy under another name
    (checkout / "rules").mkdir()
    shutil.copy(ROOT / "rules" / "default.toml", checkout / "rules" / "default.toml")
    shutil.copy(ROOT / "rules" / "default.toml", checkout / "copy.toml")
    rules = str(checkout / "rules" / "default.toml") if spelling == "absolute" else spelling
    decided = run_cli("decide", "results/null", "--rules", rules, "--out", "named.json")
    assert decided.returncode == 0, decided.output
    assert (checkout / "named.json").read_text() == (checkout / "decision.json").read_text()
    verified = run_cli("verify", "named.json", "results/null")
    assert verified.returncode == 0, verified.output


def test_a_file_under_rules_that_is_not_the_shipped_policy_is_named_by_a_placeholder(
    checkout: Path,
) -> None:
    # named like a shipped policy (rules/default.toml, name "default") but not its text
    text = (ROOT / "rules" / "default.toml").read_text().replace("alpha = 0.05 ", "alpha = 0.01 ")
    assert "alpha = 0.01 " in text
    (checkout / "rules").mkdir()
    (checkout / "rules" / "default.toml").write_text(text)
    decided = run_cli("decide", "results/null", "--rules", "rules/default.toml", "--out", "own.json")
    assert decided.returncode == 0, decided.output
    step = json.loads((checkout / "own.json").read_text())["next_step"]
    assert "--rules RULES.toml" in step, step
