"""Archived A/A history against the current controls: is the archive's boot variance theirs?

An archive of the seat's A/A boots adds degrees of freedom to the controls' variance only when it is
the same noise. Each cell's archived variance s2_h (df_h) is tested against the current control boots'
s2_c (df_c = control boots - 1) by the two-sided F test of equal variances (F = s2_c / s2_h); the
archive is pooled at that cell only when the test does not reject at HISTORY_ALPHA. With fewer than
two current control boots nothing can be compared and the archive is not pooled: a history has to be
shown compatible, not assumed so. With df_h = 20, an archive whose variance is 4x smaller than the
current controls' (sd half) is refused at df_c = 5 in 63% of campaigns and at df_c = 11 in 85%; 16x
smaller, in 97% and 99.9% (tests/test_history_seat.py measures it).

scipy.special's F distribution (fdtr, fdtrc), as scipy.stats.f computes it; the tests check it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from mtpverdict.stats.procedure import ArchivedVariance
from mtpverdict.stats.welch import Array

HISTORY_ALPHA = 0.10  # two-sided level of the compatibility test: a history must pass it to be pooled
MIN_CONTROL_BOOTS = 2  # current control boots needed to compare their variance with the archive's


@dataclass(frozen=True, slots=True)
class HistoryFit:
    """One cell's archive against the current controls."""

    compatible: bool
    ratio: float  # s2_c / s2_h (NaN when untestable)
    p: float  # two-sided F test (NaN when untestable)
    df_control: int
    df_history: int


def history_fit(
    control_logs: Sequence[float] | Array, history: ArchivedVariance, alpha: float = HISTORY_ALPHA
) -> HistoryFit:
    """Test the archived variance against the current control boots' (log statistics of one cell)."""
    values = np.asarray(control_logs, dtype=float)
    df_c = len(values) - 1
    if len(values) < MIN_CONTROL_BOOTS or history.df < 1 or not history.s2 > 0:
        return HistoryFit(False, math.nan, math.nan, max(df_c, 0), history.df)
    s2_c = float(np.var(values, ddof=1))
    ratio = s2_c / history.s2
    lower = float(special.fdtr(df_c, history.df, ratio))
    p = min(1.0, 2.0 * min(lower, float(special.fdtrc(df_c, history.df, ratio))))
    return HistoryFit(p >= alpha, ratio, p, df_c, history.df)
