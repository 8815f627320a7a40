"""The traffic-weighted comparison: each candidate against off on the policy's mix of dataset categories.

A policy's `[workloads.weights]` gives each dataset category its share of the seat's traffic (its share
of the tokens decoded); a category two dataset workloads share splits its weight equally between them.
Per boot and concurrency, an arm's weighted statistic is the seat's own on that mix: for a rate (tokens
per second) the tokens over the time they take, 1 / sum(w / rate), the weighted harmonic mean; for a
time (TTFT ms) the weighted arithmetic mean. The ratio of two arms' weighted rates is then
sum(w / off) / sum(w / spec), the seat's speed-up, where a weighted geometric mean of the categories'
ratios is not. A boot that did not measure every weighted workload has none, so the boot stays the
replication unit: the same boots measured every category, and a boot's shift moves all of them. The
family procedure then runs on these weighted cells (one per concurrency) exactly as on measured ones:
intersection-union over the concurrencies, Holm across the family's arms. Weights are divided by the
largest first, so weights near the float range's end are normalised without overflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from mtpverdict.evidence.comparisons import BootValues, FamilyRun, run_family
from mtpverdict.formats.policy import Policy
from mtpverdict.formats.results import Campaign
from mtpverdict.stats.blocked import DeviceBootValue
from mtpverdict.stats.runs import HIGHER_IS_BETTER

WEIGHTED = "(weighted)"  # the weighted cells' workload: not a name a campaign can give a workload


@dataclass(frozen=True, slots=True)
class WeightedRun:
    """One family's procedure on the weighted cells, and the mix it was run on."""

    family: str
    metric: str
    # (label, normalised share) per weighted workload: its category, or its workload id where two
    # workloads share the category (each gets an equal part of the category's weight)
    shares: tuple[tuple[str, float], ...]
    missing: tuple[str, ...]  # weighted categories the campaign has no workload for
    run: FamilyRun | None


def weighted_runs(campaign: Campaign, policy: Policy, values: BootValues) -> tuple[WeightedRun, ...]:
    """The weighted comparison per family at the selection metric (none without weights)."""
    weights = policy.workloads.weights
    if not weights:
        return ()
    by_category: dict[str, list[str]] = {}
    for w in campaign.workloads:
        if w.category is not None:
            by_category.setdefault(w.category, []).append(w.id)
    missing = tuple(sorted(c for c in weights if c not in by_category))
    measured = {c: weights[c] for c in sorted(weights) if c in by_category}
    top = max(measured.values(), default=0.0)
    scaled = {c: w / top for c, w in measured.items()} if top > 0 else {}  # the largest first: no overflow
    parts = {
        (c if len(by_category[c]) == 1 else wid): (wid, share / len(by_category[c]))
        for c, share in scaled.items()
        for wid in by_category[c]
    }
    total = sum(share for _, share in parts.values())
    shares = tuple((label, share / total) for label, (_, share) in parts.items()) if total > 0 else ()
    workload_of = {label: wid for label, (wid, _) in parts.items()}
    metric = str(policy.selection.metric)
    out = []
    for family in campaign.families:
        run = None
        if shares and not missing:
            cells, boots = _weighted_boots(campaign, family, metric, values, dict(shares), workload_of)
            if cells:
                run = run_family(
                    campaign,
                    policy,
                    BootValues(boots=boots, runs={}),
                    {},
                    family=family,
                    metric=metric,
                    cells=cells,
                )
        out.append(WeightedRun(family, metric, shares, missing, run))
    return tuple(out)


def _weighted_boots(
    campaign: Campaign,
    family: str,
    metric: str,
    values: BootValues,
    shares: Mapping[str, float],
    workloads: Mapping[str, str],
) -> tuple[tuple[tuple[str, int], ...], dict[tuple[str, str, int, str], tuple[DeviceBootValue, ...]]]:
    """The weighted cells (one per concurrency every category was measured at) and each arm's boots."""
    ids = {workloads[c] for c in shares}
    concurrencies = sorted({c for (_, w, c, m) in values.boots if m == metric and w in ids})
    arms = [a.name for a in (*campaign.controls(family), *campaign.candidates(family))]
    boots: dict[tuple[str, str, int, str], tuple[DeviceBootValue, ...]] = {}
    for conc in concurrencies:
        for arm in arms:
            per = {c: {v.boot: v for v in values.of(arm, (workloads[c], conc), metric)} for c in shares}
            common = sorted(set.intersection(*(set(b) for b in per.values())))
            found = []
            weights = np.array(list(shares.values()))
            for boot in common:
                first = per[next(iter(shares))][boot]
                logs = np.array([per[c][boot].log_value for c in shares])
                log = _mix(logs, weights, HIGHER_IS_BETTER[metric])
                if math.isfinite(log):
                    found.append(DeviceBootValue(arm, boot, first.order, first.device, log))
            if found:
                boots[(arm, WEIGHTED, conc, metric)] = tuple(found)
    cells = tuple((WEIGHTED, c) for c in concurrencies)
    return cells, boots


def _mix(logs: np.ndarray, weights: np.ndarray, rate: bool) -> float:
    """The log of the mix's statistic from the workloads' log statistics and shares (summing to 1): a
    rate's weighted harmonic mean (tokens over their time), a time's weighted arithmetic mean."""
    if not np.isfinite(logs).all():
        return math.nan
    if rate:
        return -float(logsumexp(-logs, b=weights))
    return float(logsumexp(logs, b=weights))
