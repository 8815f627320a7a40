"""Streams set aside per arm, boot and cell, and the comparisons a difference in what was set aside refuses.

A completed stream is set aside for decode and TTFT when it yields no measurement: the client read it
from a buffer in a burst, or it has fewer than 2 tokens or no decode window. If one arm loses more of its
streams than another at a cell, what survives is chosen by the arm, and comparing the survivors is
biased whatever their number. The rule: at each (workload, concurrency), the share of streams set aside
is pooled over each arm's counted boots; a candidate whose share differs from its controls' pooled
share by more than `max_gap` is not compared there, and when the controls differ from each other by more
than `max_gap` no arm is compared there (the floor is biased too). A refused cell is missing evidence:
the arm cannot be shown better or equivalent at every cell of the design.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

Cell = tuple[str, int]
AFFECTED_METRICS = ("decode_tps", "ttft_ms")  # aggregate throughput counts every stream's tokens


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


def _shares(rows: Iterable[MissingRow]) -> dict[tuple[str, Cell], tuple[int, int]]:
    """(arm, cell) -> (set aside, streams), pooled over boots."""
    out: dict[tuple[str, Cell], tuple[int, int]] = {}
    for r in rows:
        key = (r.arm, (r.workload, r.concurrency))
        aside, streams = out.get(key, (0, 0))
        out[key] = (aside + r.set_aside, streams + r.streams)
    return out


def refusals(rows: Sequence[MissingRow], controls: frozenset[str], max_gap: float) -> tuple[Refusal, ...]:
    """Every (arm, cell) not compared because its share set aside differs from its controls' (module doc)."""
    shares = _shares(rows)
    cells = sorted({cell for _, cell in shares})
    out: list[Refusal] = []
    for cell in cells:
        present = {arm: s for (arm, c), s in shares.items() if c == cell and s[1] > 0}
        ctrl = {a: aside / n for a, (aside, n) in present.items() if a in controls}
        if not ctrl:
            continue
        pooled_aside = sum(present[a][0] for a in ctrl)
        pooled = pooled_aside / sum(present[a][1] for a in ctrl)
        if max(ctrl.values()) - min(ctrl.values()) > max_gap:
            hi, lo = max(ctrl, key=ctrl.__getitem__), min(ctrl, key=ctrl.__getitem__)
            why = (
                f"the controls set aside different shares of their streams ({hi} {ctrl[hi]:.0%}, "
                f"{lo} {ctrl[lo]:.0%}): no arm is compared here"
            )
            for arm, (aside, n) in sorted(present.items()):
                other = ctrl[lo] if arm == hi else ctrl[hi]
                out.append(Refusal(arm, cell[0], cell[1], aside / n, other, why))
            continue
        for arm, (aside, n) in sorted(present.items()):
            if arm in controls:
                continue
            share = aside / n
            if abs(share - pooled) > max_gap:
                why = (
                    f"{arm} set aside {aside} of {n} streams ({share:.0%}), the controls {pooled:.0%}: the "
                    "streams kept would be chosen by the arm"
                )
                out.append(Refusal(arm, cell[0], cell[1], share, pooled, why))
    return tuple(out)
