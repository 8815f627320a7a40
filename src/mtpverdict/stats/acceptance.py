"""Speculative acceptance as a proportion with its sample size, per arm, keeping every surface apart.

acceptance rate = accepted / drafted tokens; mean acceptance length = 1 + accepted / drafts (the
bonus token included); per-position rate i = accepted at position i / drafts; wasted-draft fraction =
1 - acceptance rate (drafted tokens the verifier threw away). The primary surface is the /metrics
counter delta; engine log windows and transcribed reports are kept beside it, never merged into it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

SURFACE_PREFERENCE = ("metrics", "response", "log", "report")  # first surface with counts is primary
CI_METHOD = "wilson"  # statsmodels proportion_confint method; Wilson keeps coverage near 0 and 1


@dataclass(frozen=True, slots=True)
class Surface:
    """Acceptance as one surface reports it, pooled over that surface's windows for an arm."""

    source: str
    scoped: str  # run when every window is one run, window otherwise
    windows: int
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    mean_acceptance_length: float | None
    per_position_rate: tuple[float, ...] | None
    void_windows: int


@dataclass(frozen=True, slots=True)
class ArmAcceptance:
    """An arm's acceptance: the primary surface (with counts when any exist) and every surface."""

    arm: str
    primary: Surface | None
    surfaces: tuple[Surface, ...]

    @property
    def sample_size(self) -> int | None:
        return None if self.primary is None else self.primary.draft_tokens

    @property
    def wasted_fraction(self) -> float | None:
        if self.primary is None or self.primary.rate is None:
            return None
        return 1.0 - self.primary.rate

    @property
    def last_position_rate(self) -> float | None:
        for surface in (self.primary, *self.surfaces):
            if surface is not None and surface.per_position_rate:
                return surface.per_position_rate[-1]
        return None

    @property
    def per_position_rate(self) -> tuple[float, ...] | None:
        for surface in (self.primary, *self.surfaces):
            if surface is not None and surface.per_position_rate:
                return surface.per_position_rate
        return None


def proportion_interval(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """Two-sided (1 - alpha) Wilson interval for a proportion (statsmodels proportion_confint)."""
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(successes, trials, alpha=alpha, method=CI_METHOD)
    return float(low), float(high)


def _as_int(value: object) -> int | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)  # type: ignore[call-overload,no-any-return]


def _surface(source: str, rows: pd.DataFrame, alpha: float) -> Surface:
    ok = rows[rows["status"] == "ok"]
    void = int((rows["status"] == "void").sum())
    counted = ok[ok["draft_tokens"].notna() & ok["accepted_tokens"].notna()]
    scoped = "run" if len(ok) and (ok["scoped"] == "run").all() else "window"
    drafts = draft_tokens = accepted = None
    rate = low = high = mal = None
    per_pos: tuple[float, ...] | None = None
    if len(counted):
        draft_tokens = int(counted["draft_tokens"].astype(int).sum())
        accepted = int(counted["accepted_tokens"].astype(int).sum())
        if counted["drafts"].notna().all():
            drafts = int(counted["drafts"].astype(int).sum())
        if draft_tokens > 0:
            rate = accepted / draft_tokens
            low, high = proportion_interval(accepted, draft_tokens, alpha)
        if drafts:
            mal = 1.0 + accepted / drafts
            positions = [p for p in counted["accepted_per_position"] if isinstance(p, tuple)]
            if len(positions) == len(counted) and len({len(p) for p in positions}) == 1:
                sums = [sum(col) for col in zip(*positions, strict=True)]
                per_pos = tuple(s / drafts for s in sums)
    if rate is None:  # rates only: keep the reported numbers, with no sample size
        rated = ok[ok["acceptance_rate"].notna()]
        if len(rated) == 1:
            rate = float(rated["acceptance_rate"].iloc[0])
        elif len(ok) == 1 and isinstance(ok["per_position_rate"].iloc[0], tuple):
            pos = ok["per_position_rate"].iloc[0]
            rate = sum(pos) / len(pos)
    if per_pos is None:
        rated_pos = [p for p in ok["per_position_rate"] if isinstance(p, tuple)]
        if len(rated_pos) == 1:
            per_pos = tuple(float(x) for x in rated_pos[0])
    if mal is None:
        reported = ok["mean_acceptance_length"].dropna()
        if len(reported) == 1:
            mal = float(reported.iloc[0])
        elif per_pos is not None:
            mal = 1.0 + sum(per_pos)
    return Surface(
        source=source,
        scoped=scoped,
        windows=int(len(ok)),
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        rate=rate,
        ci_low=low,
        ci_high=high,
        mean_acceptance_length=mal,
        per_position_rate=per_pos,
        void_windows=void,
    )


def arm_acceptance(acceptance: pd.DataFrame, arm: str, alpha: float) -> ArmAcceptance:
    """Pool an arm's acceptance windows per surface; the primary is the first surface with counts."""
    rows = acceptance[acceptance["arm"] == arm]
    surfaces = tuple(
        _surface(source, rows[rows["source"] == source], alpha)
        for source in SURFACE_PREFERENCE
        if (rows["source"] == source).any()
    )
    primary = next((s for s in surfaces if s.draft_tokens), None)
    if primary is None:
        primary = next((s for s in surfaces if s.rate is not None), None)
    return ArmAcceptance(arm=arm, primary=primary, surfaces=surfaces)
