"""Speculative acceptance as a proportion with its sample size, per arm and per cell, surfaces kept apart.

acceptance rate = accepted / drafted tokens; mean acceptance length = 1 + accepted / drafts (the
bonus token included); per-position rate i = accepted at position i / drafts; wasted-draft fraction =
1 - acceptance rate. Tokens of one draft round are not independent (a later position is tried only
when the earlier ones were accepted), so intervals come from stats/acceptance_ci.py: clustered by
request or window where several exist, else by draft round from the per-position counters. The
primary surface is the per-request response fields or the /metrics counter delta; engine log windows
and transcribed reports are kept beside it, never merged into it. Acceptance of a workload is kept
apart from the arm's pooled figure, since one workload's repetition can lift the pool.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from mtpverdict.stats.acceptance_ci import ChainedAcceptance, acceptance_intervals, counts_from_rows

SURFACE_PREFERENCE = ("response", "metrics", "log", "report")  # first surface with counts is primary
CellKey = tuple[str, int]  # (workload, concurrency) of run-scoped windows


@dataclass(frozen=True, slots=True)
class Surface:
    """Acceptance as one surface reports it, pooled over that surface's windows for an arm (or cell)."""

    source: str
    scoped: str  # request or run when every window is one request or one run, window otherwise
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
    unit: str | None = None  # what one replicate of the interval is: request, window, boot, round
    per_position_low: tuple[float, ...] | None = None
    per_position_high: tuple[float, ...] | None = None
    too_small: str | None = None  # why no covering interval exists (a single request or window): the
    # bounds are then the draft rounds' alone, kept for the void control only (evidence/controls.py)


@dataclass(frozen=True, slots=True)
class ArmAcceptance:
    """An arm's acceptance: the primary surface (with counts when any exist), every surface, and the
    primary surface of each (workload, concurrency) its run-scoped windows cover."""

    arm: str
    primary: Surface | None
    surfaces: tuple[Surface, ...]
    cells: tuple[tuple[CellKey, Surface], ...] = ()

    @property
    def wasted_fraction(self) -> float | None:
        if self.primary is None or self.primary.rate is None:
            return None
        return 1.0 - self.primary.rate

    @property
    def per_position_rate(self) -> tuple[float, ...] | None:
        found = self._positions()
        return None if found is None else found.per_position_rate

    def positions(self) -> Surface | None:
        """The surface the per-position rates come from: the primary's first, else another's."""
        return self._positions()

    def _positions(self) -> Surface | None:
        for surface in (self.primary, *self.surfaces):
            if surface is not None and surface.per_position_rate:
                return surface
        return None

    def cell(self, workload: str, concurrency: int) -> Surface | None:
        return next((s for key, s in self.cells if key == (workload, concurrency)), None)

    def workloads(self) -> tuple[tuple[str, Surface], ...]:
        """The primary surface per workload (its cells pooled), for workloads with counted windows."""
        return tuple((w, s) for (w, c), s in self.cells if c == 0)


def _counted(ok: pd.DataFrame) -> pd.DataFrame:
    return ok[ok["draft_tokens"].notna() & ok["accepted_tokens"].notna()]


def _reported(ok: pd.DataFrame) -> tuple[float | None, tuple[float, ...] | None, float | None]:
    """Rate, per-position rates and mean acceptance length as reported, when counts are not known."""
    rate = None
    rated = ok[ok["acceptance_rate"].notna()]
    if len(rated) == 1:
        rate = float(rated["acceptance_rate"].iloc[0])
    elif len(ok) == 1 and isinstance(ok["per_position_rate"].iloc[0], tuple):
        pos = ok["per_position_rate"].iloc[0]
        rate = sum(pos) / len(pos)
    rated_pos = [p for p in ok["per_position_rate"] if isinstance(p, tuple)]
    per_pos = tuple(float(x) for x in rated_pos[0]) if len(rated_pos) == 1 else None
    reported = ok["mean_acceptance_length"].dropna()
    mal = float(reported.iloc[0]) if len(reported) == 1 else None
    return rate, per_pos, mal


def _interval(counted: pd.DataFrame, alpha: float) -> ChainedAcceptance | None:
    counts, unit = counts_from_rows(counted)
    try:
        return acceptance_intervals(counts, unit=unit, alpha=alpha)
    except ValueError:
        return None  # counts that are not a chain: the rates stand, without an interval


def _surface(source: str, rows: pd.DataFrame, alpha: float) -> Surface:
    ok = rows[rows["status"] == "ok"]
    void = int((rows["status"] == "void").sum())
    counted = _counted(ok)
    scoped = "window"
    for one in ("request", "run"):
        scoped = one if len(ok) and (ok["scoped"] == one).all() else scoped
    drafts = draft_tokens = accepted = None
    rate = low = high = mal = None
    per_pos: tuple[float, ...] | None = None
    per_low = per_high = None
    unit = too_small = None
    if len(counted):
        draft_tokens = int(counted["draft_tokens"].astype(int).sum())
        accepted = int(counted["accepted_tokens"].astype(int).sum())
        if counted["drafts"].notna().all():
            drafts = int(counted["drafts"].astype(int).sum())
        found = _interval(counted, alpha) if draft_tokens > 0 else None
        if draft_tokens > 0:
            rate = accepted / draft_tokens
        if found is not None:
            too_small = found.too_small  # bounds then rest on one window's draft rounds only
            low, high, unit = found.overall.low, found.overall.high, str(found.overall.unit)
        if drafts:
            mal = 1.0 + accepted / drafts
            per_pos = _pooled_positions(counted, drafts)
            if per_pos is not None and found is not None and len(found.per_position) == len(per_pos):
                per_low = tuple(p.low for p in found.per_position)
                per_high = tuple(p.high for p in found.per_position)
    reported_rate, reported_pos, reported_mal = _reported(ok)
    if rate is None:  # rates only: keep the reported numbers, with no sample size
        rate = reported_rate
    if per_pos is None:
        per_pos = reported_pos
    if mal is None:
        mal = reported_mal if reported_mal is not None else (None if per_pos is None else 1.0 + sum(per_pos))
    return Surface(
        source=source,
        scoped=scoped,
        windows=int(len(ok)),
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        rate=rate,
        ci_low=_finite(low),
        ci_high=_finite(high),
        mean_acceptance_length=mal,
        per_position_rate=per_pos,
        void_windows=void,
        unit=unit,
        per_position_low=per_low,
        per_position_high=per_high,
        too_small=too_small,
    )


def _pooled_positions(counted: pd.DataFrame, drafts: int) -> tuple[float, ...] | None:
    positions = [p for p in counted["accepted_per_position"] if isinstance(p, tuple)]
    if len(positions) != len(counted) or len({len(p) for p in positions}) != 1:
        return None
    return tuple(sum(col) / drafts for col in zip(*positions, strict=True))


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def arm_acceptance(
    acceptance: pd.DataFrame, arm: str, alpha: float, exclude: Iterable[tuple[int, str, int, int]] = ()
) -> ArmAcceptance:
    """Pool an arm's acceptance windows per surface; the primary is the first surface with counts.

    `exclude` lists (boot, workload, concurrency, rep) runs whose windows do not count (cold runs,
    when the policy leaves them out). Run-scoped windows are also pooled per (workload, concurrency)
    and per workload (concurrency 0) on the primary surface.
    """
    rows = acceptance[acceptance["arm"] == arm]
    skip = set(exclude)
    if skip and len(rows):
        keys = zip(rows["boot"], rows["workload"], rows["concurrency"], rows["rep"], strict=True)
        rows = rows[[(int(b), w, c, r) not in skip for b, w, c, r in keys]]
    surfaces = tuple(
        _surface(source, rows[rows["source"] == source], alpha)
        for source in SURFACE_PREFERENCE
        if (rows["source"] == source).any()
    )
    primary = next((s for s in surfaces if s.draft_tokens), None)
    if primary is None:
        primary = next((s for s in surfaces if s.rate is not None), None)
    cells = () if primary is None else _cells(rows[rows["source"] == primary.source], alpha)
    return ArmAcceptance(arm=arm, primary=primary, surfaces=surfaces, cells=cells)


def _cells(rows: pd.DataFrame, alpha: float) -> tuple[tuple[CellKey, Surface], ...]:
    """The primary surface's run-scoped windows pooled per (workload, concurrency) and per workload."""
    inside = rows["scoped"].isin(("run", "request"))  # a request lies inside one run
    scoped = rows[inside & rows["workload"].notna() & rows["concurrency"].notna()]
    if scoped.empty:
        return ()
    out: list[tuple[CellKey, Surface]] = []
    for workload in dict.fromkeys(scoped["workload"]):
        mine = scoped[scoped["workload"] == workload]
        out.append(((str(workload), 0), _surface(str(mine["source"].iloc[0]), mine, alpha)))
        for conc in sorted({int(c) for c in mine["concurrency"]}):
            at = mine[mine["concurrency"] == conc]
            out.append(((str(workload), conc), _surface(str(at["source"].iloc[0]), at, alpha)))
    return tuple(out)
