"""--noise-history must be the seat's: refused when it differs, tested against the current controls,
and lent to candidates booted once only when the policy says so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

from mtpverdict.decide import decide_directory
from mtpverdict.errors import ResultsError
from mtpverdict.formats.decision import DecisionKind
from mtpverdict.stats.history import HISTORY_ALPHA, history_fit
from mtpverdict.stats.procedure import ArchivedVariance

from .conftest import FIXTURES

THOR = FIXTURES / "thor-qwen36-35b-a3b"
CLEAN = FIXTURES / "synthetic-clean-win"


def _foreign(tmp_path: Path, source: Path) -> Path:
    """The same records relabelled as another device, model and engine."""
    out = tmp_path / "foreign"
    shutil.copytree(source, out)
    campaign = json.loads((out / "campaign.json").read_text())
    campaign["scope"].update({"device": "another card", "model": "another/model", "engine": "sglang"})
    (out / "campaign.json").write_text(json.dumps(campaign))
    (out / "decision.json").unlink(missing_ok=True)
    return out


def test_a_foreign_history_is_refused_with_what_differs(tmp_path: Path) -> None:
    foreign = _foreign(tmp_path, THOR)
    with pytest.raises(ResultsError) as caught:
        decide_directory(THOR, "thor-c21", [foreign])
    text = str(caught.value)
    assert "campaign.json" in text and "not this campaign's seat" in text
    assert "device 'another card'" in text and "model 'another/model'" in text and "engine 'sglang'" in text


def test_the_refusal_is_one_line_and_exit_2(tmp_path: Path) -> None:
    foreign = _foreign(tmp_path, THOR)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtpverdict",
            "decide",
            str(THOR),
            "-r",
            "default",
            "--noise-history",
            str(foreign),
            "--out",
            str(tmp_path / "d.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (
        done.returncode == 2
        and done.stderr.count("Error:") == 1
        and "--noise-history-any-seat" in done.stderr
    )


@pytest.mark.parametrize("policy", ["default", "thor-c21"])
def test_a_foreign_history_let_in_by_any_seat_is_stated_and_promotes_nothing(
    tmp_path: Path, policy: str
) -> None:
    """Before: a foreign history turned the Thor fixture's inconclusive into `promote k3`."""
    foreign = _foreign(tmp_path, THOR)
    decision = decide_directory(THOR, policy, [foreign], any_seat=True).decision
    assert decision.decision is not DecisionKind.PROMOTE
    history = next(c for c in decision.controls if c.name == "history")
    assert "--noise-history-any-seat" in history.detail and "another card" in history.detail
    assert any("--noise-history-any-seat" in r for r in decision.reasons)


def test_the_same_seat_is_accepted_and_its_use_stated() -> None:
    decision = decide_directory(CLEAN, "default", [CLEAN]).decision
    history = next(c for c in decision.controls if c.name == "history")
    assert "pooled into the controls' variance at" in history.detail and "not lent" in history.detail


def test_the_compatibility_test_is_the_two_sided_f_test() -> None:
    rng = np.random.default_rng(3)
    values = rng.normal(0, 0.02, 6)
    h = ArchivedVariance(s2=0.01**2, df=20, label="aa")
    fit = history_fit(values, h)
    ratio = np.var(values, ddof=1) / h.s2
    p = 2 * min(st.f.cdf(ratio, 5, 20), st.f.sf(ratio, 5, 20))
    assert fit.ratio == pytest.approx(ratio) and fit.p == pytest.approx(p)
    assert fit.compatible == bool(p >= HISTORY_ALPHA)
    assert not history_fit([0.01], h).compatible  # one control boot: nothing to compare with


def test_a_quieter_archive_is_refused_more_often_than_a_matching_one() -> None:
    rng = np.random.default_rng(4)
    controls = rng.normal(0, 0.02, (2000, 6))
    same = np.mean([history_fit(c, ArchivedVariance(0.02**2, 20, "aa")).compatible for c in controls])
    quiet = np.mean([history_fit(c, ArchivedVariance(0.005**2, 20, "aa")).compatible for c in controls])
    assert same > 1 - HISTORY_ALPHA - 0.03  # a matching archive is pooled at about 1 - alpha
    assert quiet < 0.15  # sd 4x smaller: refused in most campaigns
