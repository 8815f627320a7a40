"""The traffic-weighted comparison: each candidate against off on the policy's mix of dataset categories.

A policy's `[workloads.weights]` gives each dataset category its share of the seat's traffic. Per boot
and concurrency, an arm's weighted statistic is the weighted mean of its log statistics over the
categories (a boot that did not measure every weighted category has none), so the boot stays the
replication unit: the same boots measured every category, and a boot's shift moves all of them. The
family procedure then runs on these weighted cells (one per concurrency) exactly as on measured ones:
intersection-union over the concurrencies, Holm across the family's arms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from mtpverdict.evidence.comparisons import BootValues, FamilyRun, run_family
from mtpverdict.formats.policy import Policy
from mtpverdict.formats.results import Campaign
from mtpverdict.stats.blocked import DeviceBootValue

WEIGHTED = "(weighted)"  # the weighted cells' workload: not a name a campaign can give a workload


@dataclass(frozen=True, slots=True)
class WeightedRun:
    """One family's procedure on the weighted cells, and the mix it was run on."""

    family: str
    metric: str
    shares: tuple[tuple[str, float], ...]  # (category, normalised share) of the categories measured
    missing: tuple[str, ...]  # weighted categories the campaign has no workload for
    run: FamilyRun | None


def weighted_runs(campaign: Campaign, policy: Policy, values: BootValues) -> tuple[WeightedRun, ...]:
    """The weighted comparison per family at the selection metric (none without weights)."""
    weights = policy.workloads.weights
    if not weights:
        return ()
    by_category = {w.category: w.id for w in campaign.workloads if w.category is not None}
    missing = tuple(sorted(c for c in weights if c not in by_category))
    measured = {c: weights[c] for c in sorted(weights) if c in by_category}
    total = sum(measured.values())
    shares = tuple((c, w / total) for c, w in measured.items()) if total > 0 else ()
    metric = str(policy.selection.metric)
    out = []
    for family in campaign.families:
        run = None
        if shares and not missing:
            cells, boots = _weighted_boots(campaign, family, metric, values, dict(shares), by_category)
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
            for boot in common:
                first = per[next(iter(shares))][boot]
                log = sum(share * per[c][boot].log_value for c, share in shares.items())
                if math.isfinite(log):
                    found.append(DeviceBootValue(arm, boot, first.order, first.device, log))
            if found:
                boots[(arm, WEIGHTED, conc, metric)] = tuple(found)
    cells = tuple((WEIGHTED, c) for c in concurrencies)
    return cells, boots
