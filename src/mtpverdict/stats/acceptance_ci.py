"""Acceptance intervals that cover under chained acceptance: clustered by request, window, boot or round.

Position i of a draft round is accepted only if position i-1 was, so the tokens of one round are not
independent draws and neither are the rounds of one request (a request's text sets how predictable it
is). A Wilson interval on drafted tokens treats every token as its own trial: at k = 3 and a
per-position rate of 0.9 a nominal 90% interval covers about 71% (issue 13 item 9).

Here the unit of replication is a cluster: a request (per-request counts: vLLM 0.32 per-request
spec-decode metrics, llama.cpp `timings.draft_n`), a window (a run's /metrics delta or a log window) or a
boot. The rate is the ratio estimator sum(accepted) / sum(drafted) with its linearised between-cluster
variance; the interval is Korn and Graubard's (1998, Survey Methodology 24:193-201): Clopper-Pearson at
the effective sample size (drafted tokens over the design effect, the design effect at least 1),
shrunk by the ratio of t quantiles for the cluster degrees of freedom, and, below UNCAPPED_CLUSTERS
clusters, at most CLUSTER_CAP * n^2 effective trials for n clusters (2 at 2 clusters, 8 at 4, 60 at
11). The cap is measured, not derived: with few clusters and per-request rates skewed near 1 (a Beta
of concentration 3 around 0.9: most requests accept nearly everything, a few far less), a sample
often holds none of the poor requests and its estimated design effect is far too small; the plain
Korn-Graubard interval then covered 86-88% at 3-6 clusters, and 60-72% at a mean of 0.97. Capped, it
covers >= 88% at nominal 90% from 2 clusters upward for per-request means up to 0.9 (the grid in
tests/stats/test_acceptance_ci.py; the table in docs/performance.md, which also states the limit:
means of 0.97 at concentration 3 need about 24 clusters). The cap is not applied when no cluster
accepted anything: that is a void head (the positive control in evidence/controls.py), not a
skewed sample, and its upper bound stays the binomial one.

With fewer than MIN_CLUSTERS requests or windows no interval covers: one cluster says nothing of how
requests vary. The result then carries `too_small` (the reason) and stats/acceptance.py reports the
rate without bounds, so a rule that needs a bound finds it missing (collect more windows). The
draft rounds of the pooled counters are still computed as clusters (the histogram of accepted
lengths follows from them, labelled `round`) for callers that ask for rounds; with no per-position
counters a round of k tokens counts as one trial (the largest design effect a chain of k can have).

Per-position rates (accepted at position i / drafts) are proportions over rounds: clustered the same
way, and exact Clopper-Pearson over rounds when rounds are the unit. The bounds feed
`min_last_position_rate` (lower bound of the last position) and the void check (upper bound of the rate).

The linearised variance is a few lines of numpy written here so the coverage simulation can run on
thousands of campaigns at once; a test checks it against statsmodels' cluster-robust standard error of
the weighted mean. The Clopper-Pearson step is statsmodels' `proportion_confint(method="beta")`, taken
from scipy.special directly (stats/tdist.py; identical numbers, without importing scipy.stats).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt
import pandas as pd

from mtpverdict.stats import tdist

Array = npt.NDArray[np.float64]

MIN_CLUSTERS = 2  # a between-cluster variance needs two clusters; fewer is too small for an interval
CLUSTER_CAP = 0.5  # effective trials at most CLUSTER_CAP * clusters^2 (module docstring) ...
UNCAPPED_CLUSTERS = 12  # ... below this many clusters; from it on, the estimated design effect holds
TOO_SMALL = "one {unit}: how acceptance varies between requests is not measured; collect more windows"


class ClusterUnit(StrEnum):
    """What one replicate of acceptance is."""

    REQUEST = "request"
    WINDOW = "window"
    BOOT = "boot"
    ROUND = "round"  # draft rounds of pooled per-position counters: rounds taken as independent
    ROUND_BOUND = "round_bound"  # no per-position counters: a round of k tokens counted as one trial


@dataclass(frozen=True, slots=True)
class AcceptanceCounts:
    """Counts of one cluster (a request, a window or a boot)."""

    drafts: int | None  # draft rounds
    draft_tokens: int
    accepted: int
    accepted_per_position: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RateInterval:
    """A rate with its two-sided (1 - alpha) interval and what it rests on."""

    rate: float
    low: float
    high: float
    numerator: int
    denominator: int
    clusters: int
    unit: ClusterUnit
    design_effect: float  # between-cluster variance over the binomial variance (>= 1)
    effective_n: float


@dataclass(frozen=True, slots=True)
class ChainedAcceptance:
    """The acceptance rate and per-position rates of one arm (or cell), with covering intervals."""

    overall: RateInterval
    per_position: tuple[RateInterval, ...]  # accepted at position i / drafts; empty when not counted
    alpha: float
    too_small: str | None = None  # why no interval covers (a single request or window), else None

    @property
    def last_position(self) -> RateInterval | None:
        return self.per_position[-1] if self.per_position else None


def ratio_interval(
    numerator: Array, denominator: Array, alpha: float
) -> tuple[Array, Array, Array, Array, Array]:
    """Korn-Graubard interval of sum(numerator) / sum(denominator) over clusters (last axis).

    Returns rate, low, high, design effect and effective sample size, each over the leading axes.
    Clusters with a zero denominator carry no information and count for nothing.
    """
    a = np.asarray(numerator, dtype=float)
    d = np.asarray(denominator, dtype=float)
    used = d > 0
    n = used.sum(axis=-1)
    total_a, total_d = a.sum(axis=-1), d.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = total_a / total_d
        resid = np.where(used, a - rate[..., None] * d, 0.0)
        var = n / (n - 1) * (resid**2).sum(axis=-1) / total_d**2
        binomial = rate * (1 - rate) / total_d
        deff = np.where(binomial > 0, np.maximum(1.0, var / binomial), 1.0)
        n_eff = total_d / deff
        tokens_t = tdist.t_ppf(1 - alpha / 2, np.maximum(total_d - 1, 1))
        cluster_t = tdist.t_ppf(1 - alpha / 2, np.maximum(n - 1, 1))
        n_eff = np.minimum(total_d, n_eff * (tokens_t / cluster_t) ** 2)
        capped = np.minimum(n_eff, CLUSTER_CAP * n.astype(float) ** 2)
        n_eff = np.where((total_a > 0) & (n < UNCAPPED_CLUSTERS), capped, n_eff)  # module docstring
    low, high = tdist.clopper_pearson(rate * n_eff, n_eff, alpha)
    return rate, np.asarray(low, dtype=float), np.asarray(high, dtype=float), deff, n_eff


def round_histogram(drafts: int, accepted_per_position: Sequence[int]) -> npt.NDArray[np.int64]:
    """Rounds that accepted exactly 0..k tokens, from pooled per-position counters (chained acceptance)."""
    reach = [drafts, *accepted_per_position, 0]
    counts = np.array([reach[j] - reach[j + 1] for j in range(len(reach) - 1)], dtype=np.int64)
    if (counts < 0).any():
        raise ValueError(
            f"per-position counts {list(accepted_per_position)} over {drafts} drafts are not a chain "
            "(a later position accepted more often than an earlier one)"
        )
    return counts


def _clustered(counts: Sequence[AcceptanceCounts], unit: ClusterUnit, alpha: float) -> ChainedAcceptance:
    a = np.array([c.accepted for c in counts], dtype=float)
    d = np.array([c.draft_tokens for c in counts], dtype=float)
    rate, low, high, deff, n_eff = ratio_interval(a, d, alpha)
    n = int((d > 0).sum())
    overall = RateInterval(
        float(rate), float(low), float(high), int(a.sum()), int(d.sum()), n, unit, float(deff), float(n_eff)
    )
    positions: list[RateInterval] = []
    per_pos = [c.accepted_per_position for c in counts]
    rounds = [c.drafts for c in counts]
    if (
        all(p is not None for p in per_pos)
        and all(r is not None for r in rounds)
        and len({len(p or ()) for p in per_pos}) == 1
    ):
        matrix = np.array(per_pos, dtype=float)
        drafts = np.array(rounds, dtype=float)
        for i in range(matrix.shape[1]):
            r, lo, hi, de, ne = ratio_interval(matrix[:, i], drafts, alpha)
            positions.append(
                RateInterval(
                    float(r),
                    float(lo),
                    float(hi),
                    int(matrix[:, i].sum()),
                    int(drafts.sum()),
                    n,
                    unit,
                    float(de),
                    float(ne),
                )
            )
    return ChainedAcceptance(overall, tuple(positions), alpha)


def _by_rounds(counts: Sequence[AcceptanceCounts], alpha: float) -> ChainedAcceptance | None:
    """Pooled counters: draft rounds as clusters (from the per-position histogram), or a round bound."""
    if any(c.drafts is None for c in counts):
        return None
    accepted = sum(c.accepted for c in counts)
    tokens = sum(c.draft_tokens for c in counts)
    drafts = sum(c.drafts or 0 for c in counts)
    per_pos = [c.accepted_per_position for c in counts]
    if drafts == 0:
        return None
    if any(p is None for p in per_pos) or len({len(p or ()) for p in per_pos}) != 1:
        k = tokens / drafts
        low, high = tdist.clopper_pearson(accepted / k, drafts, alpha)
        overall = RateInterval(
            accepted / tokens,
            float(low),
            float(high),
            accepted,
            tokens,
            drafts,
            ClusterUnit.ROUND_BOUND,
            k,
            drafts,
        )
        return ChainedAcceptance(overall, (), alpha)
    pooled = np.sum(np.array(per_pos, dtype=np.int64), axis=0)
    hist = round_histogram(drafts, [int(x) for x in pooled])
    lengths = np.repeat(np.arange(hist.size, dtype=float), hist)
    rate, low, high, deff, n_eff = ratio_interval(lengths, np.full(lengths.size, float(hist.size - 1)), alpha)
    overall = RateInterval(
        float(rate),
        float(low),
        float(high),
        accepted,
        tokens,
        drafts,
        ClusterUnit.ROUND,
        float(deff),
        float(n_eff),
    )
    positions = []
    for hits in (int(x) for x in pooled):
        lo, hi = tdist.clopper_pearson(hits, drafts, alpha)
        positions.append(
            RateInterval(
                hits / drafts, float(lo), float(hi), hits, drafts, drafts, ClusterUnit.ROUND, 1.0, drafts
            )
        )
    return ChainedAcceptance(overall, tuple(positions), alpha)


def counts_from_rows(rows: pd.DataFrame) -> tuple[list[AcceptanceCounts], ClusterUnit]:
    """The acceptance records of one surface (an arm's, or a cell's) as clusters, and their unit.

    Each ok record with counts is one cluster: a request when every record is scoped to a request,
    a window (a run's /metrics delta or a log window) otherwise.
    """
    ok = rows[(rows["status"] == "ok") & rows["draft_tokens"].notna() & rows["accepted_tokens"].notna()]
    counts = [
        AcceptanceCounts(
            drafts=None if drafts is None or drafts != drafts else int(drafts),
            draft_tokens=int(tokens),
            accepted=int(accepted),
            accepted_per_position=tuple(int(x) for x in pos) if isinstance(pos, tuple | list) else None,
        )
        for drafts, tokens, accepted, pos in zip(
            ok["drafts"], ok["draft_tokens"], ok["accepted_tokens"], ok["accepted_per_position"], strict=True
        )
    ]
    request = len(ok) > 0 and bool((ok["scoped"] == "request").all())
    return counts, ClusterUnit.REQUEST if request else ClusterUnit.WINDOW


def acceptance_intervals(
    counts: Sequence[AcceptanceCounts], *, unit: ClusterUnit, alpha: float
) -> ChainedAcceptance | None:
    """Covering intervals for an arm's acceptance from its clusters' counts (module docstring).

    None when nothing was drafted. Raises ValueError on negative counts or more accepted than drafted.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), not {alpha}")
    for i, c in enumerate(counts):
        if c.draft_tokens < 0 or c.accepted < 0 or c.accepted > c.draft_tokens:
            raise ValueError(f"cluster {i}: {c.accepted} accepted of {c.draft_tokens} drafted tokens")
    if sum(c.draft_tokens for c in counts) == 0:
        return None
    if unit in (ClusterUnit.ROUND, ClusterUnit.ROUND_BOUND):
        return _by_rounds(counts, alpha)
    if sum(1 for c in counts if c.draft_tokens > 0) >= MIN_CLUSTERS:
        return _clustered(counts, unit, alpha)
    rounds = _by_rounds(counts, alpha)
    if rounds is None:
        return None
    return ChainedAcceptance(rounds.overall, rounds.per_position, alpha, TOO_SMALL.format(unit=unit.value))
