"""Break-even acceptance: the mean acceptance length (and rate) below which a speculative depth stops paying.

The model (the seeds' round economics, stats/economics.py): at one cell a speculative step of depth k
costs c = (L / R_k) · R_off baseline steps, where R_k and R_off are the arm's and the controls' decode
rates and L the step's mean acceptance length (bonus token included). The step returns L tokens for
the price of c plain steps, so speculation pays exactly while L > c: c is the break-even mean
acceptance length. With k̄ tokens drafted per step (k for MTP, fewer for an n-gram lookup that finds
less), L = 1 + k̄ · a for the acceptance rate a, so the break-even rate is (c − 1) / k̄. A break-even
rate above 1 means no acceptance can pay (a cost above the k + 1 tokens a step can return); one below
0 means the step is cheaper than a plain one and any acceptance pays.

The assumption: a step's cost does not depend on how many of its drafts were accepted (the target
verifies all k̄ drafted tokens either way; rejection only discards them). c is then a property of the
depth at the cell, not of the traffic, and a live L can be judged against it.

Since R_k / R_off = exp(estimate) of the comparison at the cell, c = L · exp(−estimate), and the
comparison's boot-level interval (two-sided 1 − 2 alpha) gives c's interval at the measured L:
[L · exp(−ci_high), L · exp(−ci_low)]. The conservative bound is the upper end: live acceptance below it
may no longer pay even where the comparison's interval is at its least favourable. The measured L's
own interval (1 + k̄ · the acceptance rate's interval) is reported beside it; the conservative margin
is its low end minus c's high end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its interval (None when the data give no interval)."""

    value: float
    low: float | None
    high: float | None


@dataclass(frozen=True, slots=True)
class BreakEven:
    """One depth at one cell: the step's cost, the acceptance at which it stops paying, and the margin."""

    step_cost: Interval  # baseline steps per speculative step = the break-even mean acceptance length
    rate: Interval | None  # break-even acceptance rate per drafted token (None without k̄)
    measured_length: Interval  # the cell's mean acceptance length with its interval
    measured_rate: Interval | None
    drafted_per_step: float | None  # k̄: draft tokens per drafting step

    @property
    def margin(self) -> float:
        """Measured mean acceptance length minus break-even: tokens per step above what pays."""
        return self.measured_length.value - self.step_cost.value

    @property
    def conservative_bound(self) -> float:
        """The upper end of the break-even length (the point when the comparison has no interval)."""
        return self.step_cost.high if self.step_cost.high is not None else self.step_cost.value

    @property
    def conservative_margin(self) -> float:
        """The measured length's low end minus the conservative bound: > 0 pays at both ends."""
        low = self.measured_length.low
        return (self.measured_length.value if low is None else low) - self.conservative_bound

    @property
    def pays(self) -> bool:
        return self.margin > 0


def length_interval(rate: Interval | None, length: float, drafted_per_step: float | None) -> Interval:
    """The mean acceptance length's interval from the rate's: 1 + k̄ · [low, high]."""
    if rate is None or drafted_per_step is None or rate.low is None or rate.high is None:
        return Interval(length, None, None)
    return Interval(length, 1.0 + drafted_per_step * rate.low, 1.0 + drafted_per_step * rate.high)


def break_even(
    length: Interval,
    drafted_per_step: float | None,
    log_ratio: float,
    log_ratio_low: float | None = None,
    log_ratio_high: float | None = None,
    measured_rate: Interval | None = None,
) -> BreakEven | None:
    """Break-even of one depth at one cell (module docstring); None when an input is missing.

    `log_ratio` is log(R_k / R_off) (the comparison's estimate), its bounds the comparison's interval.
    """
    if not (math.isfinite(length.value) and length.value >= 1.0 and math.isfinite(log_ratio)):
        return None
    k_bar = drafted_per_step if drafted_per_step is not None and drafted_per_step > 0 else None
    cost = _scaled(length.value, log_ratio)
    if cost is None:
        return None  # a cost beyond floating point: the inputs describe no real step
    low = _scaled(length.value, log_ratio_high)
    high = _scaled(length.value, log_ratio_low)
    step_cost = Interval(cost, low, high)
    rate = None
    if k_bar is not None:
        rate = Interval(
            (cost - 1.0) / k_bar,
            None if low is None else (low - 1.0) / k_bar,
            None if high is None else (high - 1.0) / k_bar,
        )
    return BreakEven(step_cost, rate, length, measured_rate, k_bar)


def _scaled(length: float, log_ratio: float | None) -> float | None:
    """length · exp(−log_ratio), or None when it is missing or beyond floating point."""
    if log_ratio is None or not math.isfinite(log_ratio):
        return None
    try:
        value = length * math.exp(-log_ratio)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def conservative_bound(cells: Sequence[BreakEven]) -> BreakEven | None:
    """The most demanding cell: the largest conservative bound over an arm's cells (None when none)."""
    return max(cells, key=lambda b: b.conservative_bound, default=None)
