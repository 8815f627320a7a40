"""Gathering evidence: from a loaded results directory and a policy to the typed values the rules read."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mtpverdict.evidence.comparisons import BootKey, BootValues, FamilyRun, flatten, run_family
from mtpverdict.evidence.latency import gather_latencies
from mtpverdict.evidence.model import (
    BootInfo,
    CellKey,
    CoherenceCase,
    Evidence,
    FamilyFloor,
    NoiseHistory,
    PartialBoot,
    Tables,
)
from mtpverdict.formats.policy import PartialBoots, Policy, SetAside
from mtpverdict.formats.results import Campaign
from mtpverdict.formats.results_io import Results
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.acceptance import ArmAcceptance, Surface, arm_acceptance
from mtpverdict.stats.blocked import DeviceBootValue
from mtpverdict.stats.breakeven import BreakEven, Interval, break_even, length_interval
from mtpverdict.stats.capacity import KvCeiling, kv_ceiling, kv_pool
from mtpverdict.stats.missingness import AFFECTED_METRICS, MissingRow, Refusal, missing_rows, refusals
from mtpverdict.stats.procedure import ArchivedVariance, CellComparison
from mtpverdict.stats.runs import (
    CellSummary,
    boot_statistics,
    cell_summaries,
    run_table,
    values_table,
)

PARTIAL_STATUSES = ("failed", "interrupted")  # boots that did not run their plan to the end


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


SEAT_SCOPE = ("engine", "engine_version", "device", "model")  # campaign.json scope keys naming the seat
# serve flags that address the server, not what it serves: a history on another port is the same seat
SEAT_NEUTRAL_FLAGS = frozenset({"--port", "--host"})


def _seat_argv(results: Results) -> set[tuple[str, ...]]:
    """The control arms' non-speculative serve arguments (address flags and their values left out)."""
    from mtpverdict.serveconfig import is_speculative_flag

    out = set()
    for arm in results.campaign.arms:
        if not arm.is_control or arm.serve_argv is None:
            continue
        kept: list[str] = []
        args = list(arm.serve_argv)
        i = 0
        while i < len(args):
            flag = args[i].split("=", 1)[0]
            if flag in SEAT_NEUTRAL_FLAGS:
                i += 1 if "=" in args[i] else 2
                continue
            if not is_speculative_flag(flag):
                kept.append(args[i])
            i += 1
        out.add(tuple(kept))
    return out


def _boot_versions(results: Results) -> set[str]:
    b = results.boots
    if "engine_version" not in b:
        return set()
    return {str(v) for v in b["engine_version"] if isinstance(v, str)}


def seat_differences(current: Results, archived: Results) -> list[str]:
    """How an archive's seat differs from the campaign's: engine, version, device, model (campaign.json
    scope), the engine version its boots report, and the controls' non-speculative serve arguments."""
    out = []
    for key in SEAT_SCOPE:
        mine, theirs = getattr(current.campaign.scope, key), getattr(archived.campaign.scope, key)
        if mine != theirs:
            out.append(f"{key} {theirs!r} (the campaign's: {mine!r})")
    mine_v, theirs_v = _boot_versions(current), _boot_versions(archived)
    if mine_v and theirs_v and mine_v != theirs_v:
        out.append(f"boots report engine version {sorted(theirs_v)} (the campaign's: {sorted(mine_v)})")
    mine_a, theirs_a = _seat_argv(current), _seat_argv(archived)
    if mine_a and theirs_a and mine_a != theirs_a:
        theirs_text = "; ".join(" ".join(a) for a in sorted(theirs_a))
        mine_text = "; ".join(" ".join(a) for a in sorted(mine_a))
        out.append(f"control serve arguments {theirs_text!r} (the campaign's: {mine_text!r})")
    return out


def gather(results: Results, policy: Policy, history: Sequence[NoiseHistory] = ()) -> Evidence:
    """Compute every statistic the rules need; pure apart from reading the loaded tables."""
    campaign = results.campaign
    requests, partial = counted_requests(results, policy)
    runs = run_table(requests)
    missing = missing_rows(runs, policy.include_cold)
    refused = _refusals(campaign, missing, policy)
    differing: tuple[Refusal, ...] = ()
    if policy.runs.set_aside is SetAside.COMPARE_KEPT:  # compared on the streams kept, the difference stated
        refused, differing = (), refused
    measured = values_table(runs, results.summaries)
    values, withheld = _withhold(measured, refused)
    boots = boot_statistics(values, policy.include_cold)
    cells = {
        (c.arm, c.workload, c.concurrency, c.metric): c for c in cell_summaries(values, policy.include_cold)
    }
    counted = values if policy.include_cold else values[~values["cold"].astype(bool)]
    by_boot = _boot_values(boots, results)
    # the controls are reported on every boot measured, refused cells included (evidence/controls.py)
    every = by_boot if not withheld else _boot_values(boot_statistics(measured, policy.include_cold), results)
    boot_values = BootValues(boots=by_boot, runs=_run_index(counted), withheld=withheld, measured=every)
    archived = _archived(history)
    family_runs = _family_runs(campaign, policy, boot_values, archived)
    comparisons = flatten(family_runs)
    floors = _floors(family_runs, boot_values, campaign)
    boot_info = _boot_info(results)
    outputs = _Outputs.of(results)
    windows = _Windows.of(results, policy, runs)
    return Evidence(
        campaign=campaign,
        policy=policy,
        tables=Tables(results=results, runs=runs, values=values, boots=boots),
        cells=cells,
        values=boot_values,
        archived=archived,
        runs=family_runs,
        comparisons=comparisons,
        floors=floors,
        acceptance=windows.acceptance,
        void_acceptance=windows.void,
        kv=_kv(campaign, boot_info),
        history=tuple(history),
        hashes=outputs.hashes,
        prompt_hashes=outputs.by_prompt,
        distinct_outputs=_distinct_outputs(results),
        coherence=_coherence(results),
        likelihood=_likelihood(results),
        boots=boot_info,
        request_counts=outputs.counts,
        arm_cell_index=_arm_cell_index(campaign, cells),
        floor_index={(f.family, f.workload, f.concurrency, f.metric): f for f in floors},
        arm_comparison_index=_arm_comparison_index(comparisons),
        missing=missing,
        refused=refused,
        break_even=_break_even(campaign, windows, comparisons),
        differing=differing,
        partial=partial,
        latency=gather_latencies(campaign, requests, runs, policy.include_cold, policy.alpha),
    )


def counted_requests(results: Results, policy: Policy) -> tuple[pd.DataFrame, tuple[PartialBoot, ...]]:
    """The request records whose runs count, and the failed or interrupted boots that measured any: their
    runs count only when the policy says `[runs] partial_boots = "include"` (docs/statistics.md)."""
    requests, b = results.requests, results.boots
    if requests.empty or b.empty:
        return requests, ()
    status = {
        (str(arm), int(boot)): str(s)
        for arm, boot, s in zip(b["arm"], b["boot"], b["status"], strict=True)
        if s in PARTIAL_STATUSES
    }
    if not status:
        return requests, ()
    keys = [(str(a), int(n)) for a, n in zip(requests["arm"], requests["boot"], strict=True)]
    hit = pd.Series([k in status for k in keys], index=requests.index)
    measured = hit & ~requests["warmup"].astype(bool)
    counts: dict[tuple[str, int], int] = {}
    for key, m in zip(keys, measured, strict=True):
        if m:
            counts[key] = counts.get(key, 0) + 1
    include = policy.runs.partial_boots is PartialBoots.INCLUDE
    partial = tuple(PartialBoot(a, n, status[(a, n)], c, include) for (a, n), c in sorted(counts.items()))
    return (requests if include else requests[~hit].reset_index(drop=True)), partial


def _refusals(campaign: Campaign, missing: Sequence[MissingRow], policy: Policy) -> tuple[Refusal, ...]:
    """The (arm, cell) pairs refused for missingness, family by family against the family's controls."""
    out: list[Refusal] = []
    gap, level = policy.runs.max_missing_gap, policy.runs.missing_alpha
    for family in dict.fromkeys(a.family for a in campaign.arms):
        members = {a.name for a in campaign.arms if a.family == family}
        controls = frozenset(a.name for a in campaign.arms if a.family == family and a.is_control)
        out.extend(refusals([r for r in missing if r.arm in members], controls, gap, level))
    return tuple(out)


def _withhold(values: pd.DataFrame, refused: Sequence[Refusal]) -> tuple[pd.DataFrame, frozenset[BootKey]]:
    """Drop the decode and TTFT values of refused (arm, cell) pairs; name the keys dropped."""
    if not refused or values.empty:
        return values, frozenset()
    keys = {(r.arm, r.workload, r.concurrency) for r in refused}
    cell = list(zip(values["arm"], values["workload"], values["concurrency"], strict=True))
    hit = pd.Series([(str(a), str(w), int(c)) in keys for a, w, c in cell], index=values.index)
    drop = hit & values["metric"].isin(AFFECTED_METRICS)
    withheld = frozenset((a, w, c, m) for a, w, c in keys for m in AFFECTED_METRICS)
    return values[~drop].reset_index(drop=True), withheld


# ---------------------------------------------------------------------------------------------------
# per-boot values, and the family procedure over each family's design


def _boot_values(boots: pd.DataFrame, results: Results) -> dict[CellKey, tuple[DeviceBootValue, ...]]:
    """Per (arm, workload, concurrency, metric): each boot's log statistic with its order and device."""
    recorded = {
        (str(a), int(b)): (int(o), "" if not isinstance(d, str) else d)
        for a, b, o, d in zip(
            results.boots["arm"],
            results.boots["boot"],
            results.boots["order"],
            _devices(results.boots),
            strict=True,
        )
    }
    arm_order = {a.name: a.order for a in results.campaign.arms}
    out: dict[CellKey, list[DeviceBootValue]] = {}
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
        order, device = recorded.get((str(arm), int(boot)), (arm_order.get(str(arm), 0), ""))
        key = (str(arm), str(workload), int(conc), str(metric))
        out.setdefault(key, []).append(DeviceBootValue(str(arm), int(boot), order, device, float(log_value)))
    return {k: tuple(v) for k, v in out.items()}


def _devices(boots: pd.DataFrame) -> list[object]:
    return list(boots["device"]) if "device" in boots else [None] * len(boots)


def _run_index(values: pd.DataFrame) -> dict[CellKey, tuple[tuple[float, ...], bool]]:
    """Per cell and metric: run-level log values and whether every run is known (not a lone median)."""
    out: dict[CellKey, tuple[list[float], bool]] = {}
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
    return {k: (tuple(v[0]), v[1]) for k, v in out.items()}


def _archived(history: Sequence[NoiseHistory]) -> dict[tuple[str, int, str], ArchivedVariance]:
    """Archived A/A variance per (workload, concurrency, metric), pooled over the histories given."""
    pooled: dict[tuple[str, int, str], tuple[float, int, list[str]]] = {}
    for h in history:
        for key, s2, df in h.cells:
            ss, total, labels = pooled.get(key, (0.0, 0, []))
            pooled[key] = (ss + s2 * df, total + df, [*labels, h.label])
    return {
        k: ArchivedVariance(ss / df, df, "+".join(labels)) for k, (ss, df, labels) in pooled.items() if df > 0
    }


def _family_runs(
    campaign: Campaign,
    policy: Policy,
    values: BootValues,
    archived: dict[tuple[str, int, str], ArchivedVariance],
) -> tuple[FamilyRun, ...]:
    metrics = sorted({m for (_, _, _, m) in values.boots})
    runs = []
    for family in campaign.families:
        for metric in metrics:
            history = {(w, c): h for (w, c, m), h in archived.items() if m == metric}
            found = run_family(campaign, policy, values, history, family=family, metric=metric)
            if found is not None:
                runs.append(found)
    return tuple(runs)


def _floors(runs: Sequence[FamilyRun], values: BootValues, campaign: Campaign) -> tuple[FamilyFloor, ...]:
    """Each family's floor per cell: the largest any of its arms must show (Holm's first step)."""
    out = []
    for run in runs:
        controls = [a.name for a in campaign.controls(run.family)]
        for cell in run.cells:
            at = [c for arm in run.arms for c in arm.cells if c.cell == cell]
            if not at:
                continue
            control_boots = sorted(
                (v for c in controls for v in values.of(c, cell, run.metric)), key=lambda v: v.order
            )
            floors = [c.floor_first for c in at]
            dfs = [c.df for c in at if math.isfinite(c.df)]
            out.append(
                FamilyFloor(
                    family=run.family,
                    workload=cell[0],
                    concurrency=cell[1],
                    metric=run.metric,
                    df=min(dfs) if dfs else math.nan,
                    s=max((c.sd_control for c in at), default=math.nan),
                    floor=math.nan if any(math.isnan(f) for f in floors) else max(floors),
                    floor_last=max((c.floor_last for c in at), default=math.nan),
                    pair_difference=(
                        control_boots[-1].log_value - control_boots[0].log_value
                        if len(control_boots) == 2
                        else None
                    ),
                    sources=tuple(sorted({str(c.variance) for c in at})),
                    n_candidates=len(run.arms),
                    pair=(
                        f"{control_boots[-1].arm} boot {control_boots[-1].boot} vs "
                        f"{control_boots[0].arm} boot {control_boots[0].boot}"
                        if len(control_boots) == 2
                        else None
                    ),
                )
            )
    return tuple(out)


# ---------------------------------------------------------------------------------------------------
# acceptance, KV, outputs, quality


@dataclass(frozen=True, slots=True)
class _Windows:
    """Each candidate's acceptance windows (per-request ones included), the cold runs left out of them,
    and the acceptance pooled per arm."""

    by_arm: dict[str, pd.DataFrame]
    cold: dict[str, list[tuple[int, str, int, int]]]
    alpha: float  # two-sided: the intervals are 1 - 2 alpha, as the comparisons'
    acceptance: dict[str, ArmAcceptance]
    void: dict[str, ArmAcceptance]  # at 1 - 2 keep_off_level (the void check only keeps arms off)

    @classmethod
    def of(cls, results: Results, policy: Policy, runs: pd.DataFrame) -> _Windows:
        """The windows of cold runs count only when the policy counts cold runs."""
        cold: dict[str, list[tuple[int, str, int, int]]] = {}
        if not policy.include_cold and len(runs):
            for arm, boot, workload, conc, rep in runs.loc[
                runs["cold"].astype(bool), ["arm", "boot", "workload", "concurrency", "rep"]
            ].itertuples(index=False):
                cold.setdefault(str(arm), []).append((int(boot), str(workload), int(conc), int(rep)))
        windows = with_request_windows(results.acceptance, results.requests)
        # each arm's windows split off once: filtering the whole table per arm grew as arms x windows
        by_arm = (
            {str(name): rows for name, rows in windows.groupby("arm", sort=False)} if len(windows) else {}
        )
        empty = windows.iloc[:0]
        alpha = 2 * policy.alpha
        by_arm = {a.name: by_arm.get(a.name, empty) for a in results.campaign.arms if not a.is_control}
        acceptance = {
            name: arm_acceptance(rows, name, alpha, cold.get(name, ())) for name, rows in by_arm.items()
        }
        off = 2 * policy.keep_off_level
        void = (
            acceptance
            if off == alpha
            else {name: arm_acceptance(rows, name, off, cold.get(name, ())) for name, rows in by_arm.items()}
        )
        return cls(by_arm, cold, alpha, acceptance, void)

    def cell_surface(self, arm: str, workload: str, concurrency: int) -> Surface | None:
        """The primary surface of the windows that name the cell, else its workload's, else the arm's:
        the first of them with a mean acceptance length."""
        rows = self.by_arm.get(arm)
        pooled = self.acceptance.get(arm)
        if rows is None or pooled is None or pooled.primary is None:
            return None  # no window counted at all: no subset of them has a length either
        known = pooled.cell(workload, concurrency)  # run-scoped windows: pooled per cell already
        if known is not None and known.mean_acceptance_length:
            return known
        mine = rows[rows["workload"] == workload]
        for subset in (mine[mine["concurrency"] == concurrency], mine):
            if len(subset) == len(rows):
                break  # every window names this cell: the arm's pool is the cell's
            if len(subset):
                found = arm_acceptance(subset, arm, self.alpha, self.cold.get(arm, ())).primary
                if found is not None and found.mean_acceptance_length:
                    return found
        primary = pooled.primary
        return primary if primary.mean_acceptance_length else None


DECODE = "decode_tps"  # the model is about decode steps: break-even reads the decode-rate comparisons


def _break_even(
    campaign: Campaign, windows: _Windows, comparisons: dict[CellKey, CellComparison]
) -> dict[str, tuple[tuple[str, int, BreakEven], ...]]:
    """Per candidate and decode-rate comparison cell: the step cost and break-even acceptance."""
    out: dict[str, list[tuple[str, int, BreakEven]]] = {}
    for (arm, workload, conc, metric), comp in sorted(comparisons.items()):
        surface = windows.cell_surface(arm, workload, conc) if metric == DECODE else None
        if surface is None or surface.mean_acceptance_length is None:
            continue
        k_bar = (
            surface.draft_tokens / surface.drafts
            if surface.drafts and surface.draft_tokens is not None
            else campaign.arm(arm).spec.k
        )
        low, high = (None, None) if surface.too_small else (surface.ci_low, surface.ci_high)
        rate = None if surface.rate is None else Interval(surface.rate, low, high)
        found = break_even(
            length_interval(rate, surface.mean_acceptance_length, k_bar),
            None if k_bar is None else float(k_bar),
            comp.estimate,
            comp.ci_low,
            comp.ci_high,
            rate,
        )
        if found is not None:
            out.setdefault(arm, []).append((workload, conc, found))
    return {arm: tuple(cells) for arm, cells in out.items()}


REQUEST_SPEC = {
    "spec_steps": "drafts",
    "spec_draft_tokens": "draft_tokens",
    "spec_accepted_tokens": "accepted_tokens",
}


def with_request_windows(acceptance: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """The acceptance windows plus one `response` window per measured request that carried its own
    acceptance (vLLM --per-request-spec-decode-metrics, llama.cpp timings.draft_n): the per-request
    surface, clustered by request. An arm whose windows already hold `response` rows (an import of the
    same responses) keeps those instead, so nothing is counted twice."""
    if requests.empty or "spec_draft_tokens" not in requests:
        return acceptance
    measured = requests[
        ~requests["warmup"].astype(bool)
        & (requests["status"] == "ok")
        & requests["spec_draft_tokens"].notna()
        & requests["spec_accepted_tokens"].notna()
    ]
    imported = set(acceptance.loc[acceptance["source"] == "response", "arm"]) if len(acceptance) else set()
    measured = measured[~measured["arm"].isin(imported)]
    if measured.empty:
        return acceptance
    rows = pd.DataFrame(
        {
            **{k: measured[k].to_numpy() for k in ("arm", "boot", "workload", "concurrency", "rep")},
            **{dst: measured[src].to_numpy() for src, dst in REQUEST_SPEC.items()},
            "accepted_per_position": [
                tuple(p) if isinstance(p, (tuple, list)) else None
                for p in measured["spec_accepted_per_position"]
            ],
            "source": "response",
            "scoped": "request",
            "status": "ok",
        }
    )
    if acceptance.empty:
        return rows.reindex(columns=list(dict.fromkeys([*acceptance.columns, *rows.columns])))
    return pd.concat([acceptance, rows], ignore_index=True)


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
    by_prompt: dict[tuple[str, str], dict[int, frozenset[str]]]  # dataset workloads, by prompt index

    @classmethod
    def of(cls, results: Results) -> _Outputs:
        req = results.requests
        hashes: dict[tuple[str, str], set[str]] = {}
        by_prompt: dict[tuple[str, str], dict[int, set[str]]] = {}
        counts: dict[str, list[int]] = {a.name: [0, 0] for a in results.campaign.arms}
        indices = req["prompt_index"] if "prompt_index" in req else [None] * len(req)
        for arm, workload, status, digest, warmup, nonce, index in zip(
            req["arm"],
            req["workload"],
            req["status"],
            req["output_sha256"],
            req["warmup"],
            req["nonce"],
            indices,
            strict=True,
        ):
            if status == "ok" and isinstance(digest, str) and not isinstance(nonce, str):
                # only un-nonced prompts are the same prompt across arms, so only their outputs can match
                hashes.setdefault((str(arm), str(workload)), set()).add(digest)
                if index is not None and index == index:  # a dataset prompt (NaN where absent)
                    key = (str(arm), str(workload))
                    by_prompt.setdefault(key, {}).setdefault(int(index), set()).add(digest)
            if warmup:
                continue
            counts[str(arm)][0] += 1
            if status != "ok":
                counts[str(arm)][1] += 1
        return cls(
            {k: frozenset(v) for k, v in hashes.items()},
            {k: (v[0], v[1]) for k, v in counts.items()},
            {k: {i: frozenset(d) for i, d in v.items()} for k, v in by_prompt.items()},
        )


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
    comparisons: dict[CellKey, CellComparison],
) -> dict[tuple[str, str], tuple[tuple[str, int, CellComparison], ...]]:
    grouped: dict[tuple[str, str], list[tuple[str, int, CellComparison]]] = {}
    for (arm, workload, conc, metric), comp in sorted(comparisons.items()):
        grouped.setdefault((arm, metric), []).append((workload, conc, comp))
    return {key: tuple(group) for key, group in grouped.items()}
