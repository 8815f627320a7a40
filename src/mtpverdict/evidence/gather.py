"""Gathering evidence: from a loaded results directory and a policy to the typed values the rules read."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from mtpverdict.evidence.model import (
    BootInfo,
    CellKey,
    CoherenceCase,
    Evidence,
    FamilyFloor,
    NoiseHistory,
    Tables,
)
from mtpverdict.formats.policy import FloorMode, Policy
from mtpverdict.formats.results import Campaign
from mtpverdict.formats.results_io import Results
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

BootRow = tuple[str, int, float]  # (arm, boot, log value)
BootIndex = dict[CellKey, list[BootRow]]
RunIndex = dict[CellKey, tuple[list[float], bool]]


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


def gather(results: Results, policy: Policy, history: Sequence[NoiseHistory] = ()) -> Evidence:
    """Compute every statistic the rules need; pure apart from reading the loaded tables."""
    campaign = results.campaign
    runs = run_table(results.requests)
    values = values_table(runs, results.summaries)
    boots = boot_statistics(values, policy.include_cold)
    cells = {
        (c.arm, c.workload, c.concurrency, c.metric): c for c in cell_summaries(values, policy.include_cold)
    }
    counted = values if policy.include_cold else values[~values["cold"].astype(bool)]
    index = _boot_index(boots)
    families = _Families(campaign, policy, tuple(history), index, _run_index(counted))
    comparisons, bootstraps, floors = families.compare_all()
    boot_info = _boot_info(results)
    outputs = _Outputs.of(results)
    return Evidence(
        campaign=campaign,
        policy=policy,
        tables=Tables(results=results, runs=runs, values=values, boots=boots),
        cells=cells,
        comparisons=comparisons,
        floors=tuple(floors),
        acceptance=_acceptance(results, policy),
        kv=_kv(campaign, boot_info),
        history=tuple(history),
        hashes=outputs.hashes,
        distinct_outputs=_distinct_outputs(results),
        coherence=_coherence(results),
        likelihood=_likelihood(results),
        boots=boot_info,
        request_counts=outputs.counts,
        bootstraps=bootstraps,
        arm_cell_index=_arm_cell_index(campaign, cells),
        floor_index={(f.family, f.workload, f.concurrency, f.metric): f for f in floors},
        arm_comparison_index=_arm_comparison_index(comparisons),
        boot_index={key: tuple(v for _, _, v in rows) for key, rows in index.items()},
    )


# ---------------------------------------------------------------------------------------------------
# comparisons and floors, per family and cell


def _boot_index(boots: pd.DataFrame) -> BootIndex:
    """Per (arm, workload, concurrency, metric): (arm, boot, log value) rows, in boot order."""
    out: BootIndex = {}
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
        key = (str(arm), str(workload), int(conc), str(metric))
        out.setdefault(key, []).append((str(arm), int(boot), float(log_value)))
    return out


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


@dataclass(frozen=True, slots=True)
class _Cell:
    """One family at one (workload, concurrency, metric): its control rows and its candidates' values."""

    family: str
    workload: str
    concurrency: int
    metric: str
    control_rows: list[BootRow]
    controls: list[str]
    arms: dict[str, npt.NDArray[np.float64]]

    @property
    def base(self) -> npt.NDArray[np.float64]:
        return np.array([v for _, _, v in self.control_rows])


@dataclass(frozen=True, slots=True)
class _Families:
    """Every family's comparisons with its controls, cell by cell, and the floor each cell can resolve."""

    campaign: Campaign
    policy: Policy
    history: tuple[NoiseHistory, ...]
    index: BootIndex
    runs: RunIndex

    def compare_all(
        self,
    ) -> tuple[dict[CellKey, cmp.Comparison], dict[CellKey, tuple[float, float]], list[FamilyFloor]]:
        comparisons: dict[CellKey, cmp.Comparison] = {}
        bootstraps: dict[CellKey, tuple[float, float]] = {}
        floors: list[FamilyFloor] = []
        for cell in self._cells():
            variance = self._variance(cell)
            raw = [self._compare(cell, arm, values, variance) for arm, values in cell.arms.items()]
            for arm, comp in zip(cell.arms, _classify_by_method(raw, self.policy.alpha), strict=True):
                key = (arm, cell.workload, cell.concurrency, cell.metric)
                comparisons[key] = comp
                interval = self._bootstrap(cell.arms[arm], cell.base, len(bootstraps))
                if interval is not None:
                    bootstraps[key] = interval
            floors.append(self._floor(cell, variance))
        return comparisons, bootstraps, floors

    def _cells(self) -> Iterator[_Cell]:
        for family in self.campaign.families:
            controls = [a.name for a in self.campaign.controls(family)]
            candidates = [a.name for a in self.campaign.candidates(family)]
            if not controls or not candidates:
                continue
            members = set(controls) | set(candidates)
            triples = sorted({(w, c, m) for (a, w, c, m) in self.index if a in members})
            for workload, conc, metric in triples:
                rows = [row for a in controls for row in self.index.get((a, workload, conc, metric), [])]
                arms = {
                    c: np.array([v for _, _, v in self.index[(c, workload, conc, metric)]])
                    for c in candidates
                    if (c, workload, conc, metric) in self.index
                }
                if rows and arms:
                    yield _Cell(family, workload, conc, metric, rows, controls, arms)

    def _variance(self, cell: _Cell) -> cmp.Variance:
        extra = []
        for h in self.history:
            found = h.lookup(cell.workload, cell.concurrency, cell.metric)
            if found is not None:
                extra.append((f"history:{h.label}", found[0], found[1]))
        groups: list[tuple[str, Any]] = [("controls", cell.base), *cell.arms.items()]
        return cmp.pooled_variance(groups, extra)

    def _compare(
        self, cell: _Cell, arm: str, values: npt.NDArray[np.float64], variance: cmp.Variance
    ) -> cmp.Comparison:
        policy = self.policy
        higher = HIGHER_IS_BETTER[cell.metric]
        if not variance.known and policy.floor.when_unknown is FloorMode.WITHIN_BOOT:
            return self._within_boot(cell, arm, higher)
        if (
            not variance.known
            and policy.floor.when_unknown is FloorMode.ASSUME
            and policy.floor.assumed is not None
        ):
            return cmp.compare_assumed(
                values, cell.base, assumed_floor=policy.floor.assumed, higher_is_better=higher
            )
        return cmp.compare_boots(
            values,
            cell.base,
            variance,
            alpha=policy.alpha,
            family_size=len(cell.arms),
            equivalence_margin=policy.equivalence_margin,
            higher_is_better=higher,
        )

    def _within_boot(self, cell: _Cell, arm: str, higher: bool) -> cmp.Comparison:
        key = (cell.workload, cell.concurrency, cell.metric)
        arm_logs, arm_known = self.runs.get((arm, *key), ([], False))
        base_logs: list[float] = []
        base_known = True
        for c in cell.controls:
            logs, known = self.runs.get((c, *key), ([], True))
            base_logs += logs
            base_known = base_known and known
        if not (arm_known and base_known):
            arm_logs, base_logs = [], []
        return cmp.compare_within_boot(
            arm_logs,
            base_logs,
            alpha=self.policy.alpha,
            family_size=len(cell.arms),
            equivalence_margin=self.policy.equivalence_margin,
            higher_is_better=higher,
        )

    def _bootstrap(
        self, values: npt.NDArray[np.float64], base: npt.NDArray[np.float64], seq: int
    ) -> tuple[float, float] | None:
        if min(values.size, base.size) < cmp.MIN_BOOTSTRAP_BOOTS:
            return None
        rng = np.random.default_rng([self.policy.seed, seq])  # per cell, from the policy: reruns agree
        return cmp.bootstrap_interval(values, base, confidence=1 - 2 * self.policy.alpha, rng=rng)

    def _floor(self, cell: _Cell, variance: cmp.Variance) -> FamilyFloor:
        policy = self.policy
        base = cell.base
        n_arm = min(v.size for v in cell.arms.values())
        floor = math.nan
        if variance.known:
            floor = cmp.compare_boots(
                np.zeros(n_arm),
                np.zeros(base.size),
                variance,
                alpha=policy.alpha,
                family_size=len(cell.arms),
                equivalence_margin=policy.equivalence_margin,
            ).floor
        pair = None
        if len(cell.control_rows) == 2:
            order_of = {a.name: a.order for a in self.campaign.arms}
            first, last = sorted(cell.control_rows, key=lambda r: (order_of[r[0]], r[1]))
            pair = last[2] - first[2]
        multiplier = None
        if variance.known and variance.sources == ("controls",) and base.size == 2:
            multiplier = cmp.pair_multiplier(variance.df, n_arm, base.size, policy.alpha, len(cell.arms))
        return FamilyFloor(
            family=cell.family,
            workload=cell.workload,
            concurrency=cell.concurrency,
            metric=cell.metric,
            df=variance.df,
            s=math.sqrt(variance.s2) if variance.known else math.nan,
            floor=floor,
            multiplier_vs_pair=multiplier,
            pair_difference=pair,
            sources=variance.sources,
            n_candidates=len(cell.arms),
        )


def _classify_by_method(raw: list[cmp.Comparison], alpha: float) -> list[cmp.Comparison]:
    """Holm within each method (between-boot and within-boot tests are never mixed in one family)."""
    out: list[cmp.Comparison | None] = [None] * len(raw)
    for method in sorted({c.method for c in raw}):
        idx = [i for i, c in enumerate(raw) if c.method == method]
        for i, c in zip(idx, cmp.classify([raw[i] for i in idx], alpha=alpha), strict=True):
            out[i] = c
    return [c for c in out if c is not None]


# ---------------------------------------------------------------------------------------------------
# acceptance, KV, outputs, quality


def _acceptance(results: Results, policy: Policy) -> dict[str, ArmAcceptance]:
    return {
        a.name: arm_acceptance(results.acceptance, a.name, 2 * policy.alpha)
        for a in results.campaign.arms
        if not a.is_control
    }


def _boot_info(results: Results) -> dict[str, tuple[BootInfo, ...]]:
    out: dict[str, list[BootInfo]] = {a.name: [] for a in results.campaign.arms}
    b = results.boots
    for arm, boot, order, status, error, observed, kv in zip(
        b["arm"],
        b["boot"],
        b["order"],
        b["status"],
        b["error"],
        b["observed_k"],
        b["kv_cache_tokens"],
        strict=True,
    ):
        out[str(arm)].append(
            BootInfo(
                boot=int(boot),
                order=int(order),
                status=str(status),
                error=None if _absent(error) else str(error),
                observed_k=None if _absent(observed) else int(observed),
                kv_cache_tokens=None if _absent(kv) else int(kv),
            )
        )
    return {k: tuple(v) for k, v in out.items()}


def _absent(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _kv(campaign: Campaign, boots: dict[str, tuple[BootInfo, ...]]) -> dict[str, KvCeiling]:
    pools = {name: kv_pool(recs) for name, recs in boots.items()}
    return {
        arm.name: kv_ceiling(
            arm.name,
            pools[arm.name],
            [pools[c.name][0] for c in campaign.controls(arm.family)],
            campaign.window_tokens,
        )
        for arm in campaign.arms
    }


@dataclass(frozen=True, slots=True)
class _Outputs:
    """Output hashes of un-nonced requests per (arm, workload), and measured requests and errors per arm."""

    hashes: dict[tuple[str, str], frozenset[str]]
    counts: dict[str, tuple[int, int]]

    @classmethod
    def of(cls, results: Results) -> _Outputs:
        req = results.requests
        hashes: dict[tuple[str, str], set[str]] = {}
        counts: dict[str, list[int]] = {a.name: [0, 0] for a in results.campaign.arms}
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
        return cls({k: frozenset(v) for k, v in hashes.items()}, {k: (v[0], v[1]) for k, v in counts.items()})


def _distinct_outputs(results: Results) -> dict[tuple[str, str], int]:
    """The largest distinct-output count an imported summary recorded, per (arm, workload)."""
    s = results.summaries
    out: dict[tuple[str, str], int] = {}
    if s.empty:
        return out
    for arm, workload, distinct in zip(s["arm"], s["workload"], s["distinct_outputs"], strict=True):
        if not _absent(distinct):
            key = (str(arm), str(workload))
            out[key] = max(out.get(key, 0), int(distinct))
    return out


def _coherence(results: Results) -> dict[str, tuple[CoherenceCase, ...]]:
    out: dict[str, list[CoherenceCase]] = {}
    coh = results.coherence
    for arm, case, passed, digest in zip(
        coh["arm"], coh["case"], coh["passed"], coh["output_sha256"], strict=True
    ):
        out.setdefault(str(arm), []).append(
            CoherenceCase(str(case), bool(passed), digest if isinstance(digest, str) else None)
        )
    return {k: tuple(v) for k, v in out.items()}


def _likelihood(results: Results) -> dict[str, tuple[float, ...]]:
    out: dict[str, list[float]] = {}
    lik = results.likelihood
    for arm, value in zip(lik["arm"], lik["mean_nll"], strict=True):
        out.setdefault(str(arm), []).append(float(value))
    return {k: tuple(v) for k, v in out.items()}


# ---------------------------------------------------------------------------------------------------
# indexes (lookups in constant time: decide stays linear in the number of arms)


def _arm_cell_index(
    campaign: Campaign, cells: dict[CellKey, CellSummary]
) -> dict[tuple[str, str], tuple[CellSummary, ...]]:
    order = {w.id: i for i, w in enumerate(campaign.workloads)}
    grouped: dict[tuple[str, str], list[CellSummary]] = {}
    for (arm, _w, _c, metric), cell in cells.items():
        grouped.setdefault((arm, metric), []).append(cell)
    return {
        key: tuple(
            sorted(group, key=lambda c: (order.get(c.workload, len(order)), c.workload, c.concurrency))
        )
        for key, group in grouped.items()
    }


def _arm_comparison_index(
    comparisons: dict[CellKey, cmp.Comparison],
) -> dict[tuple[str, str], tuple[tuple[str, int, cmp.Comparison], ...]]:
    grouped: dict[tuple[str, str], list[tuple[str, int, cmp.Comparison]]] = {}
    for (arm, workload, conc, metric), comp in sorted(comparisons.items()):
        grouped.setdefault((arm, metric), []).append((workload, conc, comp))
    return {key: tuple(group) for key, group in grouped.items()}
