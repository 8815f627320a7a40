"""No measured evidence is not a verdict: every policy is inconclusive, the gate refuses, validate says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mtpverdict.decide import decide_directory
from mtpverdict.rules import shipped_policies

from ..conftest import FIXTURES, run_cli


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    """A campaign whose records.jsonl holds nothing (a collector that never ran a request)."""
    out = tmp_path / "empty"
    out.mkdir()
    shutil.copy(FIXTURES / "synthetic-null" / "campaign.json", out / "campaign.json")
    (out / "records.jsonl").write_text("")
    return out


@pytest.mark.parametrize("policy", sorted(shipped_policies()))
def test_every_policy_is_inconclusive(empty: Path, policy: str) -> None:
    decision = decide_directory(empty, rules=policy).decision
    assert decision.decision == "inconclusive" and decision.selected is None
    assert "no measured evidence" in decision.reasons[0]


def test_the_gate_refuses_off_as_well(empty: Path) -> None:
    # strict-ci rejected every arm for missing evidence and decided keep_mtp_disabled: `--proposed off` passed
    done = run_cli("gate", empty, "--rules", "strict-ci", "--proposed", "off")
    assert done.returncode == 1, done.output


def test_validate_says_the_directory_holds_no_measurements(empty: Path) -> None:
    done = run_cli("validate", empty)
    assert done.returncode == 0
    assert "holds no measurements" in done.output
