"""faster_than_off: better than off beyond min_effect at every design cell, from the family procedure.

The evidence here is gathered from records (boots given as decode rates per cell), so the rule is
tested through the real procedure: per-arm Welch variance, the intersection-union over cells, Holm
across the family, equivalence first, leave-one-boot-out. Issue 13's failing cases are among them.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from mtpverdict.formats.decision import RuleStatus
from mtpverdict.rules.kinds.faster_than_off import KIND
from mtpverdict.stats.procedure import Outcome, Why

from .conftest import assert_on_missing, candidate, control, gathered, make_evidence, params, refused

K2 = candidate()
CELLS = (("chat", 1), ("chat", 4))


def boots(*rates: float, cells: tuple[tuple[str, int], ...] = CELLS) -> list[dict[tuple[str, int], float]]:
    """One boot per rate, each measuring every cell at that rate."""
    return [dict.fromkeys(cells, r) for r in rates]


CONTROLS = {"off_A": boots(100.0, 102.0, 99.0), "off_B": boots(101.0, 98.0, 100.0)}


def evaluate(
    k2: list[dict[tuple[str, int], float]], body: str = "", concurrency: list[int] | None = None
) -> Any:
    ev = gathered({"off_A": CONTROLS["off_A"], "k2": k2, "off_B": CONTROLS["off_B"]}, concurrency=concurrency)
    return KIND.evaluate(ev, ev.campaign.arm("k2"), params("faster_than_off", body))


def test_better_at_every_cell_passes_with_the_worst_ratio() -> None:
    finding = evaluate(boots(115.0, 117.0, 114.0))
    assert finding.status is RuleStatus.PASS
    assert finding.outcome.outcome is Outcome.BETTER and finding.outcome.why is Why.RESOLVED
    assert finding.value == pytest.approx(math.exp(min(c.estimate for c in finding.outcome.cells)))
    assert finding.threshold == pytest.approx(1.03)  # the default min_effect is the equivalence margin


def test_a_design_cell_the_arm_never_measured_leaves_it_unresolved() -> None:
    """Issue 13 item 1: better at c=1 and c=4, its c=8 missing, is not better 'at every cell'."""
    controls = {
        name: boots(*(b[CELLS[0]] for b in v), cells=(*CELLS, ("chat", 8))) for name, v in CONTROLS.items()
    }
    ev = gathered({"off_A": controls["off_A"], "k2": boots(115.0, 117.0, 114.0), "off_B": controls["off_B"]})
    finding = KIND.evaluate(ev, ev.campaign.arm("k2"), params("faster_than_off"))
    assert finding.status is RuleStatus.INCONCLUSIVE
    assert finding.outcome is not None and finding.outcome.why is Why.MISSING_CELL
    assert finding.outcome.missing_cells == (("chat", 8),)
    assert "chat c=8: not measured" in KIND.render(finding, K2)


def test_a_declared_cell_nobody_measured_is_missing_too() -> None:
    finding = evaluate(boots(115.0, 117.0, 114.0), concurrency=[1, 4, 8])
    assert finding.status is RuleStatus.INCONCLUSIVE
    assert finding.outcome.missing_cells == (("chat", 8),)


def test_equivalent_to_off_fails() -> None:
    """Issue 13 item 6: about +0.5% over five boots is equivalence (no practical effect), decided first."""
    finding = evaluate(boots(100.5, 99.5, 101.0, 100.0, 101.5))
    assert finding.status is RuleStatus.FAIL
    assert finding.outcome.outcome is Outcome.EQUIVALENT


def test_an_interval_wholly_below_min_effect_fails() -> None:
    """Issue 13 item 7: +10% with min_effect 0.15 is below the bar, not unresolved."""
    finding = evaluate(boots(110.0, 110.5, 109.5), "min_effect = 0.15")
    assert finding.status is RuleStatus.FAIL
    assert finding.outcome.outcome is Outcome.BELOW_MIN_EFFECT
    assert finding.threshold == pytest.approx(1.15)
    assert "+15.0%" in KIND.render(finding, K2)


def test_identical_control_boots_are_unknown_variance_not_certainty() -> None:
    """Issue 13 item 3: off_B identical to off_A must not promote a null arm with p ~ 1e-13."""
    ev = gathered({"off_A": boots(100.0), "k2": boots(100.2, 100.1), "off_B": boots(100.0)})
    finding = KIND.evaluate(ev, ev.campaign.arm("k2"), params("faster_than_off"))
    assert finding.status is not RuleStatus.PASS


def test_one_boot_cannot_carry_a_promotion() -> None:
    """Issue 13 item 5: two null boots and one boot +30% are not better beyond the floor."""
    finding = evaluate(boots(100.0, 101.0, 130.0))
    assert finding.status is not RuleStatus.PASS


def test_slower_at_a_cell_fails() -> None:
    k2 = [{CELLS[0]: r, CELLS[1]: r * 0.75} for r in (115.0, 117.0, 114.0)]
    finding = evaluate(k2)
    assert finding.status is RuleStatus.FAIL
    assert finding.outcome.outcome is Outcome.WORSE


def test_the_rule_cells_narrow_the_design() -> None:
    k2 = [{CELLS[0]: r, CELLS[1]: r * 0.75} for r in (115.0, 117.0, 114.0)]
    finding = evaluate(k2, "concurrency = [1]")
    assert finding.status is RuleStatus.PASS
    assert [c.cell for c in finding.outcome.cells] == [("chat", 1)]


def test_no_comparison_is_missing_evidence_with_the_same_bar() -> None:
    finding = KIND.evaluate(
        make_evidence([control(), K2]), K2, params("faster_than_off", "min_effect = 0.05")
    )
    assert finding.status is RuleStatus.MISSING and finding.threshold == pytest.approx(1.05)
    assert KIND.render(finding, K2) == "k2: no decode_tps comparison with its control"


def test_on_missing_decides_what_no_comparison_means() -> None:
    assert_on_missing(make_evidence([control(), K2]), K2, "faster_than_off")


def test_contradictions_are_refused() -> None:
    assert refused("faster_than_off", 'metric = "ttft_ms"', "rules[0].metric", "lower-is-better")
    assert refused("faster_than_off", "min_effect = 1.5", "rules[0].min_effect", "<= 1")


def test_the_sentence_states_the_outcome_and_each_cell() -> None:
    finding = evaluate(boots(115.0, 117.0, 114.0))
    text = KIND.render(finding, K2)
    assert text.startswith("k2 vs off, every cell together: better (beyond +3.0% at every cell")
    assert "chat c=1 alone better: +" in text and "welch, df" in text
