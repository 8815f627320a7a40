"""The evidence as the decision file states it: cells, comparisons, floors, acceptance, KV, inputs."""

from __future__ import annotations

import math
from collections.abc import Sequence

from mtpverdict._version import __version__
from mtpverdict.evidence.model import Evidence, NoiseHistory
from mtpverdict.formats.decision import (
    AcceptanceSummary,
    CampaignSummary,
    CellResult,
    ComparisonResult,
    FloorResult,
    HistoryInput,
    Inputs,
    KvSummary,
    PolicySummary,
    SelectedArm,
    SurfaceSummary,
    finite,
)
from mtpverdict.formats.results import Arm
from mtpverdict.stats.acceptance import Surface


def _ratio(log_value: float) -> float | None:
    return finite(math.exp(log_value)) if math.isfinite(log_value) else None


def _gain(log_value: float | None) -> float | None:
    return None if log_value is None or not math.isfinite(log_value) else math.expm1(log_value)


def surface(s: Surface) -> SurfaceSummary:
    return SurfaceSummary(
        source=s.source,
        scoped=s.scoped,
        windows=s.windows,
        drafts=s.drafts,
        draft_tokens=s.draft_tokens,
        accepted_tokens=s.accepted_tokens,
        acceptance_rate=finite(s.rate),
        ci_low=finite(s.ci_low),
        ci_high=finite(s.ci_high),
        mean_acceptance_length=finite(s.mean_acceptance_length),
        per_position_rate=s.per_position_rate,
        void_windows=s.void_windows,
    )


def acceptance(evidence: Evidence, arm: Arm) -> AcceptanceSummary | None:
    acc = evidence.acceptance.get(arm.name)
    if acc is None or acc.primary is None:
        return None
    return AcceptanceSummary(
        primary=surface(acc.primary),
        surfaces=tuple(surface(s) for s in acc.surfaces),
        wasted_fraction=finite(acc.wasted_fraction),
    )


def kv(evidence: Evidence, arm: Arm) -> KvSummary:
    found = evidence.kv[arm.name]
    return KvSummary(
        kv_cache_tokens=found.kv_cache_tokens,
        window_tokens=found.window_tokens,
        ceiling=finite(found.ceiling),
        ratio_to_control=finite(found.ratio_to_control),
    )


def cells(evidence: Evidence) -> tuple[CellResult, ...]:
    return tuple(
        CellResult(
            arm=c.arm,
            workload=c.workload,
            concurrency=c.concurrency,
            metric=c.metric,
            n=c.n,
            n_boots=c.n_boots,
            n_cold=c.n_cold,
            median=c.median,
            min=c.minimum,
            max=c.maximum,
            iqr=c.iqr,
            runs_known=c.runs_known,
            origin=c.origin,
        )
        for _, c in sorted(evidence.cells.items())
    )


def comparisons(evidence: Evidence) -> tuple[ComparisonResult, ...]:
    out = []
    for key, c in sorted(evidence.comparisons.items()):
        arm, workload, conc, metric = key
        boot_ci = evidence.bootstraps.get(key)
        out.append(
            ComparisonResult(
                arm=arm,
                workload=workload,
                concurrency=conc,
                metric=metric,
                ratio=_ratio(c.estimate),
                ci_low=_ratio(c.ci_low),
                ci_high=_ratio(c.ci_high),
                method=c.method,
                df=c.df,
                n_arm_boots=c.n_arm,
                n_base_boots=c.n_base,
                p_better=finite(c.p_better),
                p_better_holm=finite(c.p_better_adjusted),
                p_worse=finite(c.p_worse),
                p_equivalent=finite(c.p_equivalent),
                floor=_gain(c.floor),
                outcome=c.outcome,
                bootstrap_ci=None if boot_ci is None else (_ratio(boot_ci[0]), _ratio(boot_ci[1])),
            )
        )
    return tuple(out)


def floors(evidence: Evidence) -> tuple[FloorResult, ...]:
    return tuple(
        FloorResult(
            family=f.family,
            workload=f.workload,
            concurrency=f.concurrency,
            metric=f.metric,
            df=f.df,
            boot_sd=finite(f.s),
            floor=_gain(f.floor),
            multiplier_vs_pair=finite(f.multiplier_vs_pair),
            pair_difference=_gain(f.pair_difference),
            variance_sources=f.sources,
            candidates=f.n_candidates,
        )
        for f in evidence.floors
    )


def selected(arm: Arm | None) -> SelectedArm | None:
    return None if arm is None else SelectedArm(arm=arm.name, spec=arm.spec, serve_argv=arm.serve_argv)


def policy_summary(evidence: Evidence) -> PolicySummary:
    policy = evidence.policy
    return PolicySummary(
        name=policy.name,
        file=policy.source.replace("\\", "/").rsplit("/", 1)[-1],
        alpha=policy.alpha,
        selection=str(policy.selection.mode),
    )


def campaign_summary(evidence: Evidence) -> CampaignSummary:
    campaign = evidence.campaign
    return CampaignSummary(
        id=campaign.id,
        title=campaign.title,
        synthetic=campaign.synthetic,
        claim=campaign.scope.claim,
        device=campaign.scope.device,
        engine=campaign.scope.engine,
        engine_version=campaign.scope.engine_version,
        model=campaign.scope.model,
    )


def inputs(evidence: Evidence, rules_sha256: str, history: Sequence[NoiseHistory]) -> Inputs:
    results = evidence.tables.results
    return Inputs(
        campaign_sha256=results.campaign_sha256,
        records_sha256=results.records_sha256,
        rules_sha256=rules_sha256,
        noise_history=tuple(HistoryInput(label=h.label, records_sha256=h.sha256) for h in history),
        tool_version=__version__,
    )
