"""Calibration: the real decision engine over many simulated campaigns of one scenario, counted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtpverdict.sim.campaign import Scenario, simulate_campaign


@dataclass(frozen=True, slots=True)
class Calibration:
    """Outcomes of the real decision engine over many simulated campaigns of one scenario."""

    scenario: str
    campaigns: int
    promotions: int  # decisions "promote" (any arm)
    correct_promotions: int  # promotions of an arm whose true effect is positive
    inconclusive: int
    keep_disabled: int
    keep_reference: int = 0

    @property
    def false_promotions(self) -> int:
        """Promotions of an arm whose true effect is zero or negative."""
        return self.promotions - self.correct_promotions

    def rate_interval(self, count: int, alpha: float = 0.05) -> tuple[float, float]:
        """Two-sided (1 - alpha) Clopper-Pearson interval of count / campaigns."""
        from statsmodels.stats.proportion import proportion_confint

        low, high = proportion_confint(count, self.campaigns, alpha=alpha, method="beta")
        return float(low), float(high)


def combine(parts: Sequence[Calibration]) -> Calibration:
    """Add up calibrations of one scenario run in pieces (disjoint campaign numbers)."""
    if not parts or len({p.scenario for p in parts}) != 1:
        raise ValueError("combine needs one or more calibrations of the same scenario")
    return Calibration(
        scenario=parts[0].scenario,
        campaigns=sum(p.campaigns for p in parts),
        promotions=sum(p.promotions for p in parts),
        correct_promotions=sum(p.correct_promotions for p in parts),
        inconclusive=sum(p.inconclusive for p in parts),
        keep_disabled=sum(p.keep_disabled for p in parts),
        keep_reference=sum(p.keep_reference for p in parts),
    )


def calibrate(scenario: Scenario, policy: Any, campaigns: int, seed: int, start: int = 0) -> Calibration:
    """Run `decide` with `policy` on `campaigns` simulated campaigns; count what it concluded.

    Campaign i is generated from numpy.random.default_rng([seed, i]) for i from `start`, so a long
    calibration split into pieces over disjoint ranges adds up to the same counts as one run.
    """
    import numpy as np

    from mtpverdict.decide import decide
    from mtpverdict.formats.results_io import results_from_records

    truth = {a.name: a.effect for a in scenario.arms}
    promotions = correct = inconclusive = keep = reference = 0
    for i in range(start, start + campaigns):
        campaign, records = simulate_campaign(scenario, np.random.default_rng([seed, i]))
        decision = decide(results_from_records(campaign, records, label=f"sim-{i}"), policy)
        if decision.decision == "promote" and decision.selected is not None:
            promotions += 1
            correct += truth[decision.selected.arm] > 0
        elif decision.decision == "inconclusive":
            inconclusive += 1
        elif decision.decision == "keep_mtp_disabled":
            keep += 1
        elif decision.decision == "keep_reference":
            reference += 1
    return Calibration(
        scenario=scenario.name,
        campaigns=campaigns,
        promotions=promotions,
        correct_promotions=correct,
        inconclusive=inconclusive,
        keep_disabled=keep,
        keep_reference=reference,
    )
