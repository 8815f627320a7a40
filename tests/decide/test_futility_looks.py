"""Under looks, the futility decision keeps the policy's alpha: it only keeps arms off, so the look's
share of alpha, which guards promotions, would only make "keep off" unreachable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from mtpverdict.decide import decide_directory

from ..conftest import FIXTURES


def _with_looks(tmp_path: Path, looks: int) -> Path:
    results = tmp_path / "synthetic-null"
    shutil.copytree(FIXTURES / "synthetic-null", results)
    path = results / "campaign.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "sequential_looks": looks}, indent=1))
    return results


def _k1(results: Path) -> tuple[str, str]:
    decision = decide_directory(results, "default").decision
    (k1,) = [a for a in decision.arms if a.name == "k1"]
    return str(k1.verdict), " ".join(decision.reasons)


def test_a_look_keeps_an_arm_off_at_the_policys_alpha(tmp_path: Path) -> None:
    """Before: at alpha / 10 the 98% interval of k1 reaches past +3% and k1 stayed inconclusive."""
    verdict, reasons = _k1(_with_looks(tmp_path, 10))
    assert verdict == "rejected"
    assert "the 90% interval's upper bound is below it at some cell (chat c=1 +2.7%)" in reasons


def test_a_fixed_campaign_is_unchanged(tmp_path: Path) -> None:
    verdict, reasons = _k1(_with_looks(tmp_path, 1))
    assert verdict == "rejected" and "the 90% interval's upper bound" in reasons
