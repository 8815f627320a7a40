"""Evidence: everything the rules read, computed once from a results directory by the stats core."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mtpverdict.formats.results import Campaign
from mtpverdict.formats.results_io import Results
from mtpverdict.rules.policy import Policy
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.acceptance import ArmAcceptance, arm_acceptance
from mtpverdict.stats.capacity import KvCeiling, kv_ceiling, kv_pool
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
    hashes: dict[tuple[str, str], frozenset[str]]  # (arm, workload) -> output hashes of un-nonced ok requests
    coherence: dict[str, tuple[tuple[str, bool, str | None], ...]]  # arm -> (case, passed, output hash)
    likelihood: dict[str, tuple[float, ...]]  # arm -> mean NLL per run
    boot_records: dict[str, tuple[dict[str, Any], ...]]  # arm -> its boot records
    request_counts: dict[str, tuple[int, int]]  # arm -> (measured requests, errors)
    bootstraps: dict[CellKey, tuple[float, float]]  # BCa interval of the log ratio, many boots only

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
    key: Any
    for key, group in sub.groupby(["workload", "concurrency", "metric"], sort=True):
        workload, conc, metric = key
        var = cmp.pooled_variance([("history", group["log_value"].to_numpy(dtype=float))])
        if var.known:
            cells.append(((str(workload), int(conc), str(metric)), var.s2, var.df))
    return NoiseHistory(label=label, sha256=results.records_sha256, cells=tuple(cells))


def _index(boots: pd.DataFrame) -> dict[CellKey, list[tuple[str, int, float]]]:
    """Per (arm, workload, concurrency, metric): (arm, boot, log value) rows, in boot order."""
    out: dict[CellKey, list[tuple[str, int, float]]] = {}
    columns = zip(
        boots["arm"],
        boots["boot"],
        boots["workload"],
        boots["concurrency"],
        boots["metric"],
        boots["log_value"],
        strict=True,
    )
    for arm, boot, workload, conc, metric, log_value in columns:
        out.setdefault((str(arm), str(workload), int(conc), str(metric)), []).append(
            (str(arm), int(boot), float(log_value))
        )
    return out


def gather(results: Results, policy: Policy, history: Sequence[NoiseHistory] = ()) -> Evidence:
    """Compute every statistic the rules need; pure apart from reading the loaded tables."""
    campaign = results.campaign
    runs = run_table(results.requests)
    values = values_table(runs, results.summaries)
    boots = boot_statistics(values, policy.include_cold)
    cells = {
        (c.arm, c.workload, c.concurrency, c.metric): c for c in cell_summaries(values, policy.include_cold)
    }
    index = _index(boots)
    run_logs = _run_index(values if policy.include_cold else values[~values["cold"].astype(bool)])
    order_of = {a.name: a.order for a in campaign.arms}
    comparisons: dict[CellKey, cmp.Comparison] = {}
    bootstraps: dict[CellKey, tuple[float, float]] = {}
    floors: list[FamilyFloor] = []
    for family in campaign.families:
        controls = [a.name for a in campaign.controls(family)]
        candidates = [a.name for a in campaign.candidates(family)]
        if not controls or not candidates:
            continue
        members = set(controls) | set(candidates)
        triples = sorted({(w, c, m) for (a, w, c, m) in index if a in members})
        for workload, conc, metric in triples:
            control_rows = [row for a in controls for row in index.get((a, workload, conc, metric), [])]
            base = np.array([v for _, _, v in control_rows])
            present = [c for c in candidates if (c, workload, conc, metric) in index]
            if base.size == 0 or not present:
                continue
            arm_logs = {c: np.array([v for _, _, v in index[(c, workload, conc, metric)]]) for c in present}
            extra = []
            for h in history:
                found = h.lookup(workload, conc, metric)
                if found is not None:
                    extra.append((f"history:{h.label}", found[0], found[1]))
            groups: list[tuple[str, Any]] = [("controls", base), *arm_logs.items()]
            variance = cmp.pooled_variance(groups, extra)
            higher = HIGHER_IS_BETTER[metric]
            family_size = len(present)
            raw: list[cmp.Comparison] = []
            for cand in present:
                arm_vals = arm_logs[cand]
                if not variance.known and policy.floor_when_unknown == "within_boot":
                    comp = _within_boot(
                        run_logs, cand, controls, (workload, conc, metric), policy, family_size, higher
                    )
                elif (
                    not variance.known
                    and policy.floor_when_unknown == "assume"
                    and (policy.floor_assumed is not None)
                ):
                    comp = cmp.compare_assumed(
                        arm_vals, base, assumed_floor=policy.floor_assumed, higher_is_better=higher
                    )
                else:
                    comp = cmp.compare_boots(
                        arm_vals,
                        base,
                        variance,
                        alpha=policy.alpha,
                        family_size=family_size,
                        equivalence_margin=policy.equivalence_margin,
                        higher_is_better=higher,
                    )
                raw.append(comp)
            for cand, comp in zip(present, _classify_by_method(raw, policy.alpha), strict=True):
                comparisons[(cand, workload, conc, metric)] = comp
                if min(arm_logs[cand].size, base.size) >= cmp.MIN_BOOTSTRAP_BOOTS:
                    # a generator per cell, seeded from the policy: reruns give identical intervals
                    rng = np.random.default_rng([policy.seed, len(bootstraps)])
                    found_ci = cmp.bootstrap_interval(
                        arm_logs[cand], base, confidence=1 - 2 * policy.alpha, rng=rng
                    )
                    if found_ci is not None:
                        bootstraps[(cand, workload, conc, metric)] = found_ci
            n_arm = min(v.size for v in arm_logs.values())
            floor = math.nan
            s = math.sqrt(variance.s2) if variance.known else math.nan
            if variance.known:
                floor = cmp.compare_boots(
                    np.zeros(n_arm),
                    np.zeros(base.size),
                    variance,
                    alpha=policy.alpha,
                    family_size=family_size,
                    equivalence_margin=policy.equivalence_margin,
                ).floor
            pair = None
            if len(control_rows) == 2:
                first, last = sorted(control_rows, key=lambda r: (order_of[r[0]], r[1]))
                pair = last[2] - first[2]
            multiplier = None
            if variance.known and variance.sources == ("controls",) and base.size == 2:
                multiplier = cmp.pair_multiplier(variance.df, n_arm, base.size, policy.alpha, family_size)
            floors.append(
                FamilyFloor(
                    family=family,
                    workload=workload,
                    concurrency=conc,
                    metric=metric,
                    df=variance.df,
                    s=s,
                    floor=floor,
                    multiplier_vs_pair=multiplier,
                    pair_difference=pair,
                    sources=variance.sources,
                    n_candidates=family_size,
                )
            )
    acceptance = {
        a.name: arm_acceptance(results.acceptance, a.name, 2 * policy.alpha)
        for a in campaign.arms
        if not a.is_control
    }
    boot_records: dict[str, list[dict[str, Any]]] = {a.name: [] for a in campaign.arms}
    for rec in results.boots.to_dict("records"):
        boot_records[str(rec["arm"])].append({str(k): v for k, v in rec.items()})
    pools = {name: kv_pool(recs) for name, recs in boot_records.items()}
    kv = {
        arm.name: kv_ceiling(
            arm.name,
            pools[arm.name],
            [pools[c.name][0] for c in campaign.controls(arm.family)],
            campaign.window_tokens,
        )
        for arm in campaign.arms
    }
    req = results.requests
    hashes: dict[tuple[str, str], set[str]] = {}
    counts: dict[str, list[int]] = {a.name: [0, 0] for a in campaign.arms}
    for arm, workload, status, digest, warmup, nonce in zip(
        req["arm"],
        req["workload"],
        req["status"],
        req["output_sha256"],
        req["warmup"],
        req["nonce"],
        strict=True,
    ):
        if status == "ok" and isinstance(digest, str) and not isinstance(nonce, str):
            # only un-nonced prompts are the same prompt across arms, so only their outputs can match
            hashes.setdefault((str(arm), str(workload)), set()).add(digest)
        if warmup:
            continue
        counts[str(arm)][0] += 1
        if status != "ok":
            counts[str(arm)][1] += 1
    coherence: dict[str, list[tuple[str, bool, str | None]]] = {}
    coh = results.coherence
    for arm, case, passed, digest in zip(
        coh["arm"], coh["case"], coh["passed"], coh["output_sha256"], strict=True
    ):
        coherence.setdefault(str(arm), []).append(
            (str(case), bool(passed), digest if isinstance(digest, str) else None)
        )
    nll: dict[str, list[float]] = {}
    lik = results.likelihood
    for arm, value in zip(lik["arm"], lik["mean_nll"], strict=True):
        nll.setdefault(str(arm), []).append(float(value))
    return Evidence(
        campaign=campaign,
        results=results,
        policy=policy,
        runs=runs,
        values=values,
        boots=boots,
        cells=cells,
        comparisons=comparisons,
        floors=tuple(floors),
        acceptance=acceptance,
        kv=kv,
        history=tuple(history),
        hashes={k: frozenset(v) for k, v in hashes.items()},
        coherence={k: tuple(v) for k, v in coherence.items()},
        likelihood={k: tuple(v) for k, v in nll.items()},
        boot_records={k: tuple(v) for k, v in boot_records.items()},
        bootstraps=bootstraps,
        request_counts={k: (v[0], v[1]) for k, v in counts.items()},
    )


RunIndex = dict[CellKey, tuple[list[float], bool]]


def _run_index(values: pd.DataFrame) -> RunIndex:
    """Per cell and metric: run-level log values and whether every run is known (not a lone median)."""
    out: RunIndex = {}
    columns = zip(
        values["arm"],
        values["workload"],
        values["concurrency"],
        values["metric"],
        values["value"],
        values["runs_known"],
        strict=True,
    )
    for arm, workload, conc, metric, value, known in columns:
        key = (str(arm), str(workload), int(conc), str(metric))
        logs, all_known = out.get(key, ([], True))
        logs.append(math.log(float(value)))
        out[key] = (logs, all_known and bool(known))
    return out


def _within_boot(
    run_logs: RunIndex,
    cand: str,
    controls: list[str],
    cell: tuple[str, int, str],
    policy: Policy,
    family_size: int,
    higher: bool,
) -> cmp.Comparison:
    workload, conc, metric = cell
    arm_logs, arm_known = run_logs.get((cand, workload, conc, metric), ([], False))
    base_logs: list[float] = []
    base_known = True
    for c in controls:
        logs, known = run_logs.get((c, workload, conc, metric), ([], True))
        base_logs += logs
        base_known = base_known and known
    if not (arm_known and base_known):
        arm_logs, base_logs = [], []
    return cmp.compare_within_boot(
        arm_logs,
        base_logs,
        alpha=policy.alpha,
        family_size=family_size,
        equivalence_margin=policy.equivalence_margin,
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
