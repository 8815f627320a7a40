"""Evidence: everything the rules read, computed once from a results directory by the stats core."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mtpverdict.results.model import Campaign, Results
from mtpverdict.rules.policy import Policy
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.acceptance import ArmAcceptance, arm_acceptance
from mtpverdict.stats.capacity import KvCeiling, kv_ceiling
from mtpverdict.stats.runs import (
    HIGHER_IS_BETTER,
    CellSummary,
    boot_statistics,
    cell_summaries,
    run_table,
    values_table,
)

CellKey = tuple[str, str, int, str]  # (arm, workload, concurrency, metric)


@dataclass(frozen=True, slots=True)
class FamilyFloor:
    """The sensitivity floor of one family at one cell: what its comparisons can resolve."""

    family: str
    workload: str
    concurrency: int
    metric: str
    df: int
    s: float  # boot-level sd of log statistics (nan when unknown)
    floor: float  # log effect (nan when unknown)
    multiplier_vs_pair: float | None  # floor / |off_B - off_A| when one pair is the only source
    pair_difference: float | None  # log(off_B / off_A) when the family has exactly two control boots
    sources: tuple[str, ...]
    n_candidates: int


@dataclass(frozen=True, slots=True)
class NoiseHistory:
    """Archived A/A control boots of the same seat, per (workload, concurrency, metric)."""

    label: str
    sha256: str
    cells: tuple[tuple[tuple[str, int, str], float, int], ...]  # ((workload, conc, metric), s2, df)

    def lookup(self, workload: str, concurrency: int, metric: str) -> tuple[float, int] | None:
        for key, s2, df in self.cells:
            if key == (workload, concurrency, metric):
                return s2, df
        return None


@dataclass(frozen=True, slots=True)
class Evidence:
    """Per-cell spread, comparisons, floors, acceptance and KV for every arm of a campaign."""

    campaign: Campaign
    results: Results
    policy: Policy
    runs: pd.DataFrame
    values: pd.DataFrame
    boots: pd.DataFrame
    cells: dict[CellKey, CellSummary]
    comparisons: dict[CellKey, cmp.Comparison]
    floors: tuple[FamilyFloor, ...]
    acceptance: dict[str, ArmAcceptance]
    kv: dict[str, KvCeiling]
    history: tuple[NoiseHistory, ...]

    def cell(self, arm: str, workload: str, concurrency: int, metric: str) -> CellSummary | None:
        return self.cells.get((arm, workload, concurrency, metric))

    def comparison(self, arm: str, workload: str, concurrency: int, metric: str) -> cmp.Comparison | None:
        return self.comparisons.get((arm, workload, concurrency, metric))

    def arm_cells(self, arm: str, metric: str) -> list[CellSummary]:
        """An arm's cells for one metric, in the campaign's workload order, then by concurrency."""
        order = {w.id: i for i, w in enumerate(self.campaign.workloads)}
        cells = [c for (a, _w, _c, m), c in self.cells.items() if a == arm and m == metric]
        return sorted(cells, key=lambda c: (order.get(c.workload, len(order)), c.workload, c.concurrency))

    def floor(self, family: str, workload: str, concurrency: int, metric: str) -> FamilyFloor | None:
        for f in self.floors:
            if (f.family, f.workload, f.concurrency, f.metric) == (family, workload, concurrency, metric):
                return f
        return None


def history_from(results: Results, include_cold: bool, label: str) -> NoiseHistory:
    """Boot-level variance of an archived campaign's control arms, per cell (A/A degrees of freedom)."""
    values = values_table(run_table(results.requests), results.summaries)
    boots = boot_statistics(values, include_cold)
    controls = [a.name for a in results.campaign.arms if a.is_control]
    cells: list[tuple[tuple[str, int, str], float, int]] = []
    sub = boots[boots["arm"].isin(controls)]
    for (workload, conc, metric), group in sub.groupby(["workload", "concurrency", "metric"], sort=True):
        var = cmp.pooled_variance([("history", group["log_value"].to_numpy(dtype=float))])
        if var.known:
            cells.append(((str(workload), int(conc), str(metric)), var.s2, var.df))
    return NoiseHistory(label=label, sha256=results.records_sha256, cells=tuple(cells))


def _log_values(frame: pd.DataFrame, arms: Sequence[str]) -> np.ndarray:
    return frame[frame["arm"].isin(arms)]["log_value"].to_numpy(dtype=float)


def gather(results: Results, policy: Policy, history: Sequence[NoiseHistory] = ()) -> Evidence:
    """Compute every statistic the rules need; pure apart from reading the loaded tables."""
    campaign = results.campaign
    runs = run_table(results.requests)
    values = values_table(runs, results.summaries)
    boots = boot_statistics(values, policy.include_cold)
    cells = {(c.arm, c.workload, c.concurrency, c.metric): c
             for c in cell_summaries(values, policy.include_cold)}
    comparisons: dict[CellKey, cmp.Comparison] = {}
    floors: list[FamilyFloor] = []
    include_cold = policy.include_cold
    counted_runs = values if include_cold else values[~values["cold"].astype(bool)]
    for family in campaign.families:
        controls = [a.name for a in campaign.controls(family)]
        candidates = [a.name for a in campaign.candidates(family)]
        if not controls or not candidates:
            continue
        fam = boots[boots["arm"].isin(controls + candidates)]
        for (workload, conc, metric), group in fam.groupby(["workload", "concurrency", "metric"],
                                                           sort=True):
            base = _log_values(group, controls)
            present = [c for c in candidates if (group["arm"] == c).any()]
            if base.size == 0 or not present:
                continue
            extra = []
            for h in history:
                found = h.lookup(str(workload), int(conc), str(metric))
                if found is not None:
                    extra.append((f"history:{h.label}", found[0], found[1]))
            groups = [("controls", base)] + [(c, _log_values(group, [c])) for c in present]
            variance = cmp.pooled_variance(groups, extra)
            higher = HIGHER_IS_BETTER[str(metric)]
            family_size = len(present)
            raw: list[cmp.Comparison] = []
            for cand in present:
                arm_vals = _log_values(group, [cand])
                if variance.known:
                    comp = cmp.compare_boots(arm_vals, base, variance, alpha=policy.alpha,
                                             family_size=family_size,
                                             equivalence_margin=policy.equivalence_margin,
                                             higher_is_better=higher)
                elif policy.floor_when_unknown == "within_boot":
                    comp = _within_boot(counted_runs, cand, controls, str(workload), int(conc),
                                        str(metric), policy, family_size, higher)
                elif policy.floor_when_unknown == "assume" and policy.floor_assumed is not None:
                    comp = cmp.compare_assumed(arm_vals, base, assumed_floor=policy.floor_assumed,
                                               higher_is_better=higher)
                else:
                    comp = cmp.compare_boots(arm_vals, base, variance, alpha=policy.alpha,
                                             family_size=family_size,
                                             equivalence_margin=policy.equivalence_margin,
                                             higher_is_better=higher)
                raw.append(comp)
            for cand, comp in zip(present, _classify_by_method(raw, policy.alpha), strict=True):
                comparisons[(cand, str(workload), int(conc), str(metric))] = comp
            n_arm = min(_log_values(group, [c]).size for c in present)
            floor = math.nan
            s = math.sqrt(variance.s2) if variance.known else math.nan
            if variance.known:
                floor = cmp.compare_boots(np.zeros(n_arm), np.zeros(base.size), variance,
                                          alpha=policy.alpha, family_size=family_size,
                                          equivalence_margin=policy.equivalence_margin).floor
            pair = None
            control_group = group[group["arm"].isin(controls)]
            if len(control_group) == 2:
                ordered = control_group.sort_values(["arm", "boot"])
                order_of = {a.name: a.order for a in campaign.arms}
                ordered = ordered.assign(o=[order_of[a] for a in ordered["arm"]]).sort_values("o")
                pair = float(ordered["log_value"].iloc[1] - ordered["log_value"].iloc[0])
            multiplier = None
            if variance.known and variance.sources == ("controls",) and base.size == 2:
                multiplier = cmp.pair_multiplier(variance.df, n_arm, base.size, policy.alpha, family_size)
            floors.append(FamilyFloor(
                family=family, workload=str(workload), concurrency=int(conc), metric=str(metric),
                df=variance.df, s=s, floor=floor, multiplier_vs_pair=multiplier, pair_difference=pair,
                sources=variance.sources, n_candidates=family_size,
            ))
    acceptance = {a.name: arm_acceptance(results.acceptance, a.name, 2 * policy.alpha)
                  for a in campaign.arms if not a.is_control}
    kv: dict[str, KvCeiling] = {}
    for arm in campaign.arms:
        controls_t = tuple(c.name for c in campaign.controls(arm.family))
        kv[arm.name] = kv_ceiling(results.boots, arm.name, controls_t, campaign.window_tokens)
    return Evidence(campaign=campaign, results=results, policy=policy, runs=runs, values=values,
                    boots=boots, cells=cells, comparisons=comparisons, floors=tuple(floors),
                    acceptance=acceptance, kv=kv, history=tuple(history))


def _within_boot(values: pd.DataFrame, cand: str, controls: list[str], workload: str, conc: int,
                 metric: str, policy: Policy, family_size: int, higher: bool) -> cmp.Comparison:
    sel = values[(values["workload"] == workload) & (values["concurrency"] == conc)
                 & (values["metric"] == metric)]
    arm_rows = sel[sel["arm"] == cand]
    base_rows = sel[sel["arm"].isin(controls)]
    if not (arm_rows["runs_known"].all() and base_rows["runs_known"].all()):
        return cmp.compare_within_boot([], [], alpha=policy.alpha, family_size=family_size,
                                       equivalence_margin=policy.equivalence_margin)
    return cmp.compare_within_boot(
        np.log(arm_rows["value"].to_numpy(dtype=float)), np.log(base_rows["value"].to_numpy(dtype=float)),
        alpha=policy.alpha, family_size=family_size, equivalence_margin=policy.equivalence_margin,
        higher_is_better=higher,
    )


def _classify_by_method(raw: list[cmp.Comparison], alpha: float) -> list[cmp.Comparison]:
    """Holm within each method (between-boot and within-boot tests are never mixed in one family)."""
    out: list[cmp.Comparison | None] = [None] * len(raw)
    for method in sorted({c.method for c in raw}):
        idx = [i for i, c in enumerate(raw) if c.method == method]
        for i, c in zip(idx, cmp.classify([raw[i] for i in idx], alpha=alpha), strict=True):
            out[i] = c
    return [c for c in out if c is not None]
