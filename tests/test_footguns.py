"""Footguns refused: each mistake a new user makes gets one clear error with its hint, never a silent
wrong answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtpverdict import UnknownArmError, load_decision
from mtpverdict.cli import app

from .conftest import DATA, FIXTURES, GOLDEN, ROOT

runner = CliRunner()


def test_decision_arm_names_the_arms_that_exist() -> None:
    decision = load_decision(GOLDEN / "synthetic-void-arm@default.json")
    assert decision.arm("k3").name == "k3"
    with pytest.raises(UnknownArmError) as raised:
        decision.arm("k9")
    message = str(raised.value)
    assert "k9" in message and "off_A, k1, k2, k3, off_B" in message
    assert isinstance(raised.value, KeyError)  # callers that caught KeyError still do


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--effect", "5", "--boot-sd", "2%"], "--effect 5: a bare number is a fraction (5 means +500%)"),
        (["--effect", "5%", "--boot-sd", "2"], "--boot-sd 2: a bare number is a fraction (2 means 200%)"),
        (["--effect", "5%", "--boot-sd", "2%", "--run-sd", "1"], "--run-sd 1: a bare number"),
    ],
)
def test_plan_refuses_a_bare_number_of_one_or_more(args: list[str], fragment: str) -> None:
    done = runner.invoke(app, ["plan", *args])
    assert done.exit_code == 2, done.output
    assert fragment in done.stderr and "write 5% or 0.05" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_plan_takes_a_fraction_or_a_percentage() -> None:
    for effect, sd in (("0.05", "0.02"), ("5%", "2%"), ("+5%", "0.5%")):
        done = runner.invoke(app, ["plan", "--effect", effect, "--boot-sd", sd])
        assert done.exit_code == 0, done.stderr


def _warn_only(tmp: Path, empty: bool = False) -> Path:
    text = (ROOT / "rules" / "default.toml").read_text().replace('name = "default"', 'name = "lenient"')
    text = text.split("[[rules]]")[0] if empty else text.replace('severity = "veto"', 'severity = "warn"')
    path = tmp / "lenient.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("empty", [False, True], ids=["warnings-only", "no-rules"])
def test_rules_check_warns_of_a_policy_that_cannot_veto(tmp_path: Path, empty: bool) -> None:
    policy = _warn_only(tmp_path, empty)
    done = runner.invoke(app, ["rules", "check", str(policy)])
    assert done.exit_code == 0, done.output
    assert 'cannot veto a promotion: no rule has severity = "veto"' in done.output
    shipped = runner.invoke(app, ["rules", "check", "default"])
    assert shipped.exit_code == 0 and "cannot veto" not in shipped.output


@pytest.mark.parametrize("empty", [False, True], ids=["warnings-only", "no-rules"])
def test_decide_strict_refuses_a_policy_that_cannot_veto(tmp_path: Path, empty: bool) -> None:
    policy = _warn_only(tmp_path, empty)
    null = str(FIXTURES / "synthetic-null")  # no depth is faster than off
    loose = runner.invoke(app, ["decide", null, "--rules", str(policy), "--out", str(tmp_path / "d.json")])
    assert loose.exit_code == 0 and "cannot veto a promotion" in loose.stderr
    out = tmp_path / "strict.json"
    strict = runner.invoke(app, ["decide", null, "--rules", str(policy), "--out", str(out), "--strict"])
    assert strict.exit_code == 2, strict.output
    assert strict.stderr.startswith(f"Error: {policy}: cannot veto a promotion") and not out.exists()
