"""Round economics and context regimes: what one speculative round costs against a plain decode step.

baseline step ms = 1000 / off decode tok/s; round ms = 1000 * tokens per round / arm decode tok/s,
where tokens per round is the mean acceptance length (bonus token included); cost in baseline steps =
round ms / step ms. A round can return at most k + 1 tokens, so a cost above k + 1 steps means the
depth cannot pay even at perfect acceptance. Speculation pays exactly when tokens per round exceed the
cost in steps (equivalently when arm decode tok/s exceeds off decode tok/s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RoundEconomics:
    """One depth's round cost at one cell."""

    baseline_step_ms: float
    round_ms: float
    tokens_per_round: float
    cost_in_baseline_steps: float
    max_tokens_per_round: int | None  # k + 1
    exceeds_max_return: bool | None  # cost above k + 1: no acceptance could make it pay
    pays: bool  # tokens per round above cost in steps


def round_economics(
    off_decode_tps: float, arm_decode_tps: float, mean_acceptance_length: float, k: int | None
) -> RoundEconomics | None:
    """Round economics from decode rates and mean acceptance length; None when an input is missing."""
    values = (off_decode_tps, arm_decode_tps, mean_acceptance_length)
    if not all(math.isfinite(v) and v > 0 for v in values):
        return None
    step = 1000.0 / off_decode_tps
    round_ms = 1000.0 * mean_acceptance_length / arm_decode_tps
    cost = round_ms / step
    max_return = None if k is None else k + 1
    return RoundEconomics(
        baseline_step_ms=step,
        round_ms=round_ms,
        tokens_per_round=mean_acceptance_length,
        cost_in_baseline_steps=cost,
        max_tokens_per_round=max_return,
        exceeds_max_return=None if max_return is None else cost > max_return,
        pays=mean_acceptance_length > cost,
    )


@dataclass(frozen=True, slots=True)
class RegimePoint:
    """The arm-to-off ratio at one context depth."""

    workload: str
    prompt_tokens: int | None
    ratio: float
    ci_low: float | None
    ci_high: float | None
    outcome: str


def crossing(points: list[RegimePoint]) -> str | None:
    """The first workload (by prompt depth) from which the ratio stays below 1; None if it never does."""
    ordered = sorted(points, key=lambda p: (p.prompt_tokens is None, p.prompt_tokens or 0, p.workload))
    first_loss = None
    for point in ordered:
        if point.ratio < 1.0:
            if first_loss is None:
                first_loss = point.workload
        else:
            first_loss = None
    return first_loss
