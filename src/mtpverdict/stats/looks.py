"""Alpha spending over the looks of a campaign: Bonferroni over the planned looks, the rest re-split.

A campaign is planned for L looks (1 for a fixed design; `boots` under collect --until-resolved).
Look k spends

    alpha_k = (alpha - S_{k-1}) / max(L_k - k + 1, 1),

where S_{k-1} is the alpha the recorded earlier looks spent and L_k the looks planned when look k is
taken. With L fixed this is alpha / L at every look (Bonferroni). When a resume raises the planned
looks, what is left is split over the looks still to come, so alpha already spent is never spent
again; once the planned looks have spent it all (the last one spends the remainder), a further look
has nothing left and cannot promote. Every look's alpha is fixed before its data is seen and the
alphas of any sequence of looks sum to at most alpha, so by the union bound the family-wise
false-promotion rate over every look stays at alpha, whatever the sequence (planned or raised later).
bench/calibration.py --looks measures it by following the decision's next step by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

SPENT = 1e-12  # alpha left below this is spent: rounding, not a budget


def look_alpha(alpha: float, planned: int, spent: Sequence[float]) -> float:
    """The alpha of the next look, after the looks that spent `spent` (module docstring)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    if any(s < 0 for s in spent):
        raise ValueError("a look cannot spend a negative alpha")
    left = alpha - sum(spent)
    if left <= SPENT:
        return 0.0
    return left / max(planned - len(spent), 1)
