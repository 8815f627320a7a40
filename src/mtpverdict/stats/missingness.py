"""Streams set aside per arm, boot and cell, and the comparisons a difference in what was set aside refuses.

A completed stream is set aside for decode and TTFT when it yields no measurement: the client read it
from a buffer in a burst, or it has fewer than 2 tokens or no decode window. If one arm loses more of its
streams than another at a cell, what survives is chosen by the arm, and comparing the survivors is
biased whatever their number. But a share is a count: 7 of 36 and 12 of 36 differ by 14 points and by
nothing a test can tell apart. The rule: at each (workload, concurrency), the streams set aside are
pooled over each arm's counted boots; a candidate is not compared there when its share differs from its
controls' pooled share by more than `max_gap` *and* the counts differ by Fisher's exact test (two-sided)
at `level`; when the controls differ from each other so (the most and the least set aside), no arm is
compared there (the floor is biased too). A refused cell is missing evidence: the arm cannot be shown
better or equivalent at every cell of the design. No correction for the many cells tested: a false
refusal costs a cell (inconclusive), a missed one a bias, so the test errs toward refusing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

Cell = tuple[str, int]
AFFECTED_METRICS = ("decode_tps", "ttft_ms")  # aggregate throughput counts every stream's tokens
# scipy.stats.fisher_exact's tolerance: tables this close to the observed one's probability count as
# equally extreme (floating-point ties), so the p-value matches scipy's to rounding
FISHER_TIE = 1e-7


@dataclass(frozen=True, slots=True)
class MissingRow:
    """One boot at one cell: completed streams, those measured, those read in a burst."""

    arm: str
    boot: int
    workload: str
    concurrency: int
    streams: int  # completed (status ok) measured streams of the counted runs
    kept: int  # of those, with a decode measurement
    burst: int  # of those, read from a buffer in a burst (client timing only)
    timing: str  # server or client: whose clock timed decode and TTFT

    @property
    def set_aside(self) -> int:
        return self.streams - self.kept


@dataclass(frozen=True, slots=True)
class Refusal:
    """A cell where an arm is not compared, with the shares that refused it."""

    arm: str
    workload: str
    concurrency: int
    share: float  # the arm's share of streams set aside
    versus: float  # the controls' pooled share (for a control: the other control's)
    reason: str
    p_value: float = math.nan  # Fisher's exact test of the two counts (two-sided)


def missing_rows(runs: pd.DataFrame, include_cold: bool) -> tuple[MissingRow, ...]:
    """Per (arm, boot, workload, concurrency): streams completed and kept over the counted runs."""
    if runs.empty:
        return ()
    counted = runs if include_cold else runs[~runs["cold"].astype(bool)]
    if counted.empty:
        return ()
    grouped = counted.groupby(["arm", "boot", "workload", "concurrency"], sort=True)
    table = grouped.agg(
        streams=("n_ok", "sum"),
        kept=("n_decode", "sum"),
        burst=("n_burst", "sum"),
        timing=("timing", "first"),
    ).reset_index()
    return tuple(
        MissingRow(str(a), int(b), str(w), int(c), int(s), int(k), int(u), str(t))
        for a, b, w, c, s, k, u, t in table.itertuples(index=False)
    )


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_exact(aside: int, streams: int, other_aside: int, other_streams: int) -> float:
    """Two-sided p-value of Fisher's exact test on [[aside, kept], [other_aside, other_kept]].

    The probability, under equal chances of being set aside, of every table with the same margins no
    more likely than the one observed (scipy.stats.fisher_exact's definition, computed here so that
    deciding does not import scipy.stats; tests/stats/test_missingness.py checks the two agree).
    """
    if not (0 <= aside <= streams and 0 <= other_aside <= other_streams):
        raise ValueError("set-aside counts must lie within their stream counts")
    total = streams + other_streams
    margin = aside + other_aside
    if streams == 0 or other_streams == 0 or margin in (0, total):
        return 1.0
    base = _log_comb(total, margin)

    def log_p(x: int) -> float:
        return _log_comb(streams, x) + _log_comb(other_streams, margin - x) - base

    observed = log_p(aside) + math.log1p(FISHER_TIE)
    tables = range(max(0, margin - other_streams), min(margin, streams) + 1)
    return min(1.0, math.fsum(math.exp(lp) for lp in map(log_p, tables) if lp <= observed))


def _shares(rows: Iterable[MissingRow]) -> dict[tuple[str, Cell], tuple[int, int]]:
    """(arm, cell) -> (set aside, streams), pooled over boots."""
    out: dict[tuple[str, Cell], tuple[int, int]] = {}
    for r in rows:
        key = (r.arm, (r.workload, r.concurrency))
        aside, streams = out.get(key, (0, 0))
        out[key] = (aside + r.set_aside, streams + r.streams)
    return out


def refusals(
    rows: Sequence[MissingRow], controls: frozenset[str], max_gap: float, level: float
) -> tuple[Refusal, ...]:
    """Every (arm, cell) not compared because what it set aside differs from its controls' (module doc)."""
    shares = _shares(rows)
    cells = sorted({cell for _, cell in shares})
    out: list[Refusal] = []
    for cell in cells:
        present = {arm: s for (arm, c), s in shares.items() if c == cell and s[1] > 0}
        ctrl = {a: s for a, s in present.items() if a in controls}
        if not ctrl:
            continue
        hi = max(ctrl, key=lambda a: (ctrl[a][0] / ctrl[a][1], a))
        lo = min(ctrl, key=lambda a: (ctrl[a][0] / ctrl[a][1], a))
        p = fisher_exact(*ctrl[hi], *ctrl[lo])
        if _differs(ctrl[hi], ctrl[lo], p, max_gap, level):
            why = (
                f"the controls set aside different shares of their streams ({hi} {_count(ctrl[hi])}, "
                f"{lo} {_count(ctrl[lo])}, Fisher p = {p:.2g}): no arm is compared here"
            )
            for arm, (aside, n) in sorted(present.items()):
                other = ctrl[lo] if arm == hi else ctrl[hi]
                out.append(Refusal(arm, cell[0], cell[1], aside / n, other[0] / other[1], why, p))
            continue
        pooled = (sum(s[0] for s in ctrl.values()), sum(s[1] for s in ctrl.values()))
        for arm, counts in sorted(present.items()):
            if arm in controls:
                continue
            p = fisher_exact(*counts, *pooled)
            if _differs(counts, pooled, p, max_gap, level):
                why = (
                    f"{arm} set aside {_count(counts)} streams, the controls {_count(pooled)} (Fisher p = "
                    f"{p:.2g}): the streams kept would be chosen by the arm"
                )
                out.append(
                    Refusal(arm, cell[0], cell[1], counts[0] / counts[1], pooled[0] / pooled[1], why, p)
                )
    return tuple(out)


def _differs(one: tuple[int, int], other: tuple[int, int], p: float, max_gap: float, level: float) -> bool:
    """Larger than the gap that matters, and more than the counts could show by chance."""
    return abs(one[0] / one[1] - other[0] / other[1]) > max_gap and p < level


def _count(counts: tuple[int, int]) -> str:
    return f"{counts[0]} of {counts[1]} ({counts[0] / counts[1]:.0%})"
