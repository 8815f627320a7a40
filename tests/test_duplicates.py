"""Control boots recorded twice (off_B's records copied from off_A's) are flagged and never decided."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mtpverdict.decide import decide_directory
from mtpverdict.formats.decision import ControlStatus, DecisionKind

from .conftest import FIXTURES


def test_off_b_duplicated_from_off_a_is_flagged_and_inconclusive(tmp_path: Path) -> None:
    """Before: at 3 boots such a campaign passed every control check without a word and promoted."""
    out = tmp_path / "dup"
    shutil.copytree(FIXTURES / "synthetic-clean-win", out)
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    kept = [r for r in lines if r["arm"] != "off_B" or r["kind"] == "boot"]
    copies = [{**r, "arm": "off_B"} for r in lines if r["arm"] == "off_A" and r["kind"] != "boot"]
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept + copies))
    decision = decide_directory(out, "default").decision
    assert decision.decision is DecisionKind.INCONCLUSIVE
    dup = next(c for c in decision.controls if c.name == "duplicates")
    assert dup.status is ControlStatus.FAIL and "off_A boot 1 and off_B boot 1" in dup.detail
    assert any("recorded twice" in r for r in decision.reasons)


def test_the_clean_fixture_has_no_duplicates() -> None:
    decision = decide_directory(FIXTURES / "synthetic-clean-win", "default").decision
    assert not [c for c in decision.controls if c.name == "duplicates"]
    assert decision.decision is DecisionKind.PROMOTE


def _copy_off_a_to_off_b(out: Path, jitter_seconds: float) -> None:
    """off_B's request records copied from off_A's, every timestamp moved by +-jitter_seconds."""
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    kept = [r for r in lines if r["arm"] != "off_B" or r["kind"] == "boot"]
    copies = []
    for i, r in enumerate(r for r in lines if r["arm"] == "off_A" and r["kind"] == "request"):
        sign = 1.0 if i % 2 else -1.0
        copy = {**r, "arm": "off_B"}
        for key in ("t_first", "t_end"):
            copy[key] = round(r[key] + sign * jitter_seconds, 6)
        copies.append(copy)
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept + copies))


def test_off_b_copied_with_a_microsecond_jitter_is_flagged(tmp_path: Path) -> None:
    """Before: moving every copied timestamp by 1 us took the copies past the 1e-6 agreement and the
    campaign promoted on one boot recorded twice."""
    out = tmp_path / "jitter"
    shutil.copytree(FIXTURES / "synthetic-clean-win", out)
    _copy_off_a_to_off_b(out, 1e-6)
    decision = decide_directory(out, "default").decision
    assert decision.decision is DecisionKind.INCONCLUSIVE
    dup = next(c for c in decision.controls if c.name == "duplicates")
    assert dup.status is ControlStatus.FAIL and "off_A boot 1 and off_B boot 1" in dup.detail


def test_independent_boots_are_not_near_identical() -> None:
    """Every bundled campaign's control boots differ by more than the tolerance on some run."""
    for fixture in sorted(p for p in FIXTURES.iterdir() if (p / "campaign.json").is_file()):
        decision = decide_directory(fixture, "default").decision
        assert not [c for c in decision.controls if c.name == "duplicates"], fixture.name
