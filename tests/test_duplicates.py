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
