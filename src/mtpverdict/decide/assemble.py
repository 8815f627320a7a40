"""The evidence as the decision file states it: cells, comparisons, floors, acceptance, KV, inputs."""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from typing import Any, cast

from mtpverdict import plan
from mtpverdict._logscale import change, ratio
from mtpverdict._version import __version__
from mtpverdict.decide import regime
from mtpverdict.engines import registry
from mtpverdict.evidence import controls as ctl
from mtpverdict.evidence.comparisons import FamilyRun
from mtpverdict.evidence.latency import ArmKey
from mtpverdict.evidence.model import Evidence, NoiseHistory
from mtpverdict.evidence.weighted import weighted_runs
from mtpverdict.formats.decision import (
    RESULTS_PLACEHOLDER,
    RULES_PLACEHOLDER,
    AcceptanceSummary,
    ArmOutcomeResult,
    BreakEvenCell,
    BreakEvenSummary,
    CampaignSummary,
    CategoryResult,
    CellResult,
    ComparisonResult,
    ControlResult,
    ControlStatus,
    FloorResult,
    HistoryInput,
    Inputs,
    KvSummary,
    LatencyResult,
    MissingnessResult,
    PolicySummary,
    RefusalResult,
    Resolution,
    SelectedArm,
    SurfaceSummary,
    WeightedResult,
    WorkloadAcceptance,
    finite,
)
from mtpverdict.formats.policy import SelectionMode
from mtpverdict.formats.results import Arm
from mtpverdict.stats.acceptance import Surface
from mtpverdict.stats.breakeven import BreakEven, Interval, conservative_bound
from mtpverdict.stats.missingness import AFFECTED_METRICS
from mtpverdict.stats.percentiles import LATENCY_METRICS
from mtpverdict.stats.procedure import ArmOutcome, FamilyOutcome, Outcome, VarianceMethod

# cells compared by the policy's fallback: no planning model applies to them
UNKNOWN_VARIANCE_FALLBACKS = (VarianceMethod.ASSUMED, VarianceMethod.WITHIN_BOOT)


def _ratio(log_value: float) -> float | None:
    return finite(ratio(log_value)) if math.isfinite(log_value) else None


def _gain(log_value: float | None) -> float | None:
    return None if log_value is None or not math.isfinite(log_value) else finite(change(log_value))


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
        unit=s.unit,
        per_position_low=s.per_position_low,
        per_position_high=s.per_position_high,
        too_small=s.too_small,
    )


def acceptance(evidence: Evidence, arm: Arm) -> AcceptanceSummary | None:
    acc = evidence.acceptance.get(arm.name)
    if acc is None or acc.primary is None:
        return None
    return AcceptanceSummary(
        primary=surface(acc.primary),
        surfaces=tuple(surface(s) for s in acc.surfaces),
        wasted_fraction=finite(acc.wasted_fraction),
        workloads=tuple(WorkloadAcceptance(w, c, surface(s)) for (w, c), s in acc.cells),
    )


def _ends(value: Interval | None) -> tuple[float | None, float | None, float | None]:
    if value is None:
        return None, None, None
    return finite(value.value), finite(value.low), finite(value.high)


def _break_even_cell(workload: str, concurrency: int, b: BreakEven) -> BreakEvenCell:
    cost, cost_low, cost_high = _ends(b.step_cost)
    rate, rate_low, rate_high = _ends(b.rate)
    length, length_low, length_high = _ends(b.measured_length)
    acc, acc_low, acc_high = _ends(b.measured_rate)
    return BreakEvenCell(
        workload=workload,
        concurrency=concurrency,
        drafted_per_step=finite(b.drafted_per_step),
        step_cost=b.step_cost.value,
        step_cost_low=cost_low,
        step_cost_high=cost_high,
        break_even_rate=rate,
        break_even_rate_low=rate_low,
        break_even_rate_high=rate_high,
        mean_acceptance_length=b.measured_length.value,
        mean_acceptance_length_low=length_low,
        mean_acceptance_length_high=length_high,
        acceptance_rate=acc,
        acceptance_rate_low=acc_low,
        acceptance_rate_high=acc_high,
        margin=b.margin,
        conservative_margin=b.conservative_margin,
    )


def break_even(evidence: Evidence, arm: Arm) -> BreakEvenSummary | None:
    """The arm's break-even per decode-rate cell and its most demanding conservative bound."""
    cells = evidence.break_even.get(arm.name, ())
    worst = conservative_bound([b for _, _, b in cells])
    if worst is None:
        return None
    at = next((w, c) for w, c, b in cells if b is worst)
    bound = worst.conservative_bound
    k_bar = worst.drafted_per_step
    return BreakEvenSummary(
        cells=tuple(_break_even_cell(w, c, b) for w, c, b in cells),
        bound_workload=at[0],
        bound_concurrency=at[1],
        bound_length=bound,
        bound_rate=None if k_bar is None else (bound - 1.0) / k_bar,
    )


def kv(evidence: Evidence, arm: Arm) -> KvSummary:
    found = evidence.kv[arm.name]
    return KvSummary(
        kv_cache_tokens=found.kv_cache_tokens,
        window_tokens=found.window_tokens,
        ceiling=finite(found.ceiling),
        ratio_to_control=finite(found.ratio_to_control),
    )


def missingness(evidence: Evidence) -> tuple[MissingnessResult, ...]:
    """Streams completed and kept per arm, boot and cell."""
    return tuple(
        MissingnessResult(r.arm, r.boot, r.workload, r.concurrency, r.streams, r.kept, r.burst, r.timing)
        for r in evidence.missing
    )


def refused(evidence: Evidence) -> tuple[RefusalResult, ...]:
    """The (arm, cell) pairs not compared for missingness, with the shares and the reason."""
    return tuple(
        RefusalResult(r.arm, r.workload, r.concurrency, r.share, r.versus, r.reason, finite(r.p_value))
        for r in evidence.refused
    )


def categories(evidence: Evidence) -> tuple[CategoryResult, ...]:
    """Each candidate on each dataset category: the category's acceptance (every concurrency pooled)
    and the family procedure over its cells alone, at the selection metric."""
    campaign = evidence.campaign
    metric = str(evidence.policy.selection.metric)
    out = []
    for workload in campaign.workloads:
        if workload.category is None:
            continue
        # the category's design cells: every concurrency any arm was compared at on this workload
        cells = tuple(
            sorted({(w, c) for (_, w, c, m) in evidence.comparisons if w == workload.id and m == metric})
        )
        for arm in campaign.candidates():
            acc = evidence.acceptance.get(arm.name)
            pooled = None if acc is None else acc.cell(workload.id, 0)
            found = evidence.arm_outcome(arm.name, metric, cells=cells) if cells else None
            weakest = None if found is None else found.cell(found.worst_cell)
            out.append(
                CategoryResult(
                    arm=arm.name,
                    category=workload.category,
                    workload=workload.id,
                    acceptance_rate=None if pooled is None else finite(pooled.rate),
                    ci_low=None if pooled is None else finite(pooled.ci_low),
                    ci_high=None if pooled is None else finite(pooled.ci_high),
                    accepted_tokens=None if pooled is None else pooled.accepted_tokens,
                    draft_tokens=None if pooled is None else pooled.draft_tokens,
                    metric=metric,
                    outcome=None if found is None else str(found.outcome),
                    ratio=None if weakest is None else _ratio(weakest.estimate),
                    ratio_low=None if weakest is None else _ratio(weakest.ci_low),
                    ratio_high=None if weakest is None else _ratio(weakest.ci_high),
                )
            )
    return tuple(out)


def weighted(evidence: Evidence) -> tuple[WeightedResult, ...]:
    """Each candidate on the policy's traffic mix ([workloads.weights]; none without weights)."""
    out = []
    for found in weighted_runs(evidence.campaign, evidence.policy, evidence.values):
        for arm in evidence.campaign.candidates(found.family):
            outcome = None if found.run is None else found.run.arm(arm.name)
            weakest = None if outcome is None else outcome.cell(outcome.worst_cell)
            out.append(
                WeightedResult(
                    arm=arm.name,
                    family=found.family,
                    metric=found.metric,
                    shares=found.shares,
                    missing=found.missing,
                    outcome=None if outcome is None else str(outcome.outcome),
                    concurrency=None if weakest is None else weakest.cell[1],
                    ratio=None if weakest is None else _ratio(weakest.estimate),
                    ratio_low=None if weakest is None else _ratio(weakest.ci_low),
                    ratio_high=None if weakest is None else _ratio(weakest.ci_high),
                )
            )
    return tuple(out)


def weighted_reasons(found: tuple[WeightedResult, ...]) -> tuple[str, ...]:
    """A reason per family whose traffic mix was not compared because a weighted category is absent."""
    out: dict[str, str] = {}
    for w in found:
        if w.missing and w.family not in out:
            names = ", ".join(repr(c) for c in w.missing)
            out[w.family] = (
                f"the traffic mix of family {w.family} was not compared: [workloads.weights] names {names}, "
                "which no dataset workload of the campaign has as its category"
            )
    return tuple(out.values())


def latency(evidence: Evidence) -> tuple[LatencyResult, ...]:
    """The latency percentiles per arm (campaign order), per cell (workload order) and over every cell."""
    found = evidence.latency
    order = {w.id: i for i, w in enumerate(evidence.campaign.workloads)}
    arms = {a.name: i for i, a in enumerate(evidence.campaign.arms)}
    metrics = {m: i for i, m in enumerate(LATENCY_METRICS)}

    def place(key: ArmKey) -> tuple[int, int, int, int]:
        arm, workload, conc, metric = key
        cell = (-1, -1) if workload is None else (order.get(workload, len(order)), conc or 0)
        return arms.get(arm, len(arms)), *cell, metrics[metric]

    return tuple(
        LatencyResult(
            arm=arm,
            workload=workload,
            concurrency=conc,
            metric=cast(Any, metric),
            n=v.n,
            n_boots=v.n_boots,
            p50=v.p50,
            p90=v.p90,
            p99=v.p99,
            boot_median=v.boot_median,
            boot_median_low=finite(v.boot_median_low),
            boot_median_high=finite(v.boot_median_high),
            timing=found.timing or "client",
        )
        for (arm, workload, conc, metric), v in sorted(found.arms.items(), key=lambda kv: place(kv[0]))
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
    for (arm, workload, conc, metric), c in sorted(evidence.comparisons.items()):
        out.append(
            ComparisonResult(
                arm=arm,
                workload=workload,
                concurrency=conc,
                metric=metric,
                ratio=_ratio(c.estimate),
                ci_low=_ratio(c.ci_low),
                ci_high=_ratio(c.ci_high),
                variance=str(c.variance),
                variance_reason=c.variance_reason,
                df=finite(c.df),
                n_arm_boots=c.n_arm,
                n_base_boots=c.n_control,
                p_better=finite(c.p_better),
                p_worse=finite(c.p_worse),
                p_equivalent=finite(c.p_equivalent),
                p_below_min_effect=finite(c.p_below_min_effect),
                floor=_gain(c.floor_first),
                floor_last=_gain(c.floor_last),
                loo_p=finite(c.loo_p),
                loo_boot=c.loo_boot,
                outcome=str(c.cell_outcome),
            )
        )
    return tuple(out)


def outcomes(evidence: Evidence) -> tuple[ArmOutcomeResult, ...]:
    """Each candidate's combined outcome per metric over its family's design (min_effect at the margin)."""
    return tuple(_outcome(run, arm) for run in evidence.runs for arm in run.arms)


def _outcome(run: FamilyRun, arm: ArmOutcome) -> ArmOutcomeResult:
    family = run.outcome.family
    return ArmOutcomeResult(
        arm=arm.arm,
        family=run.family,
        metric=run.metric,
        outcome=str(arm.outcome),
        why=str(arm.why),
        min_effect=family.min_effect,
        p_better=finite(arm.p_better),
        p_better_holm=finite(arm.p_better_holm),
        p_equivalent_holm=finite(arm.p_equivalent_holm),
        p_worse_holm=finite(arm.p_worse_holm),
        p_below_min_effect_holm=finite(arm.p_below_min_effect_holm),
        loo_p=finite(arm.loo_p),
        loo_boot=arm.loo_boot,
        missing_cells=arm.missing_cells,
        unknown_cells=arm.unknown_cells,
        floor=_gain(arm.floor_first),
        floor_last=_gain(arm.floor_last),
        resolution=_resolution(arm, family),
    )


def _resolution(arm: ArmOutcome, family: FamilyOutcome) -> Resolution | None:
    """What an unresolved arm lacks and the boots per arm likely to settle it (the planning model)."""
    if arm.outcome is not Outcome.INCONCLUSIVE or any(
        c.variance in UNKNOWN_VARIANCE_FALLBACKS for c in arm.cells
    ):
        return None
    found = plan.resolution(arm, family)
    return Resolution(
        missing=found.missing,
        boots_per_arm=found.boots_per_arm,
        likely=found.likely,
        probability=finite(found.probability) if found.boots_per_arm is not None else None,
        assumptions=found.assumptions,
    )


def _schedule_reading(evidence: Evidence, results_dir: str, policy: str) -> str:
    """The next step of a schedule's confirmation arm decided under a single-depth policy: a what-if
    reading in schedule mode (a decision under another policy is one more look at what this one left),
    then a campaign decided under a schedule policy from its first look."""
    read = (
        shlex.join(["mtpverdict", "decide", results_dir, "--rules", regime.SCHEDULE_POLICY, "--what-if"])
        if evidence.policy.name == "default"
        else f'decide --what-if with [selection] mode = "schedule" in a copy of {policy}'
    )
    return (
        "read the schedule its confirmation arm confirms (a what-if: a decision under another policy "
        "is one more look, at what this one left of alpha; a confirmation campaign decided under a "
        f"schedule policy from its first look decides it): {read}"
    )


def next_step(
    evidence: Evidence,
    results: Sequence[ArmOutcomeResult],
    controls: Sequence[ControlResult] = (),
    blockers: Sequence[str] = (),
    *,
    resumable: bool = True,
    interim: bool = False,
) -> str:
    """What to run next when the decision is inconclusive: always a command, whatever the reason.

    In order: no evidence yet (collect it); the controls that block the decision (drift, a blind
    harness); no candidate; streams set aside by arm at the selection metric (the server's clock or a
    quieter client); more boots, as many as the planning model says would settle the unresolved arms,
    else a round more; a schedule's confirmation arm (decide in schedule mode); every arm void.
    resumable: the campaign was collected with --until-resolved and has alpha left after this look
    (decide/looks.py); otherwise more boots are a new campaign. interim: a fixed campaign decided
    before every arm has its planned boots (decide/looks.py): finish it. Paths are placeholders (RESULTS,
    NEW_RESULTS, RULES.toml) so the decision does not depend on how a path was typed.
    """
    results_dir = RESULTS_PLACEHOLDER
    policy = evidence.policy.name if evidence.policy.shipped else RULES_PLACEHOLDER
    fresh = shlex.join(["mtpverdict", "collect", "CAMPAIGN.toml", "--out", plan.NEW_RESULTS])
    again = _measured_again(results_dir, resumable=resumable)
    failing = {c.name for c in controls if c.status is ControlStatus.FAIL and c.detail in blockers}
    metric = str(evidence.policy.selection.metric)
    candidates = [a for a in evidence.campaign.arms if not a.is_control]
    if not evidence.tables.results.measured_records or interim:
        what = "finish the campaign's planned boots" if interim else "collect the campaign's measurements"
        return f"{what}: " + shlex.join(
            ["mtpverdict", "collect", "CAMPAIGN.toml", "--out", results_dir, "--resume"]
        )
    if "drift" in failing:
        return (
            "the controls drifted: re-run on a machine nothing else loads (or with more boots, so that "
            f"the drift can be blocked out), into a new results directory {again}"
        )
    if "blind" in failing:
        return (
            "the harness cannot see batching: lower the client's load (nothing else on its cores) and "
            "check the concurrency levels reach the server, then collect into a new results directory "
            f"{again}"
        )
    if not candidates:
        return f'add a candidate arm ([[arms]] role = "candidate") to CAMPAIGN.toml, then: {fresh}'
    live = {a.name for a in candidates if ctl.void_reason(evidence, a) is None}
    if not live:
        return (
            "every candidate is void (a draft head that accepts nothing: an uninitialised or mismatched "
            f"head, a wrong speculative setting): fix the arms' serve_args in CAMPAIGN.toml, then: {fresh}"
        )
    if metric in AFFECTED_METRICS and any(r.arm in live for r in evidence.refused):
        return (
            "streams were set aside by arm (read in a burst by the client's clock): re-run on the server's "
            f"clock ({server_clock(evidence.campaign.scope.engine)}) or with the client's load lowered, into "
            f"a new results directory {again}"
        )
    boots = [
        r.resolution.boots_per_arm
        for r in results
        if r.arm in live
        and r.metric == metric
        and r.resolution is not None
        and r.resolution.boots_per_arm is not None
    ]
    if boots or any(r.arm in live and r.metric == metric and r.outcome == "inconclusive" for r in results):
        more = max(boots) if boots else _boots_per_arm(evidence) + 1
        return _more_boots(evidence, results_dir, policy, more, resumable=resumable)
    if evidence.policy.selection.mode is not SelectionMode.SCHEDULE and regime.schedule_arms(evidence):
        return _schedule_reading(evidence, results_dir, policy)
    return (
        "no candidate could be judged on what was measured (a rule found no evidence, or the schedule "
        "could not be built): add the evidence the reasons above name, or more boots: "
        + _more_boots(evidence, results_dir, policy, _boots_per_arm(evidence) + 1, resumable=resumable)
    )


def _more_boots(evidence: Evidence, results_dir: str, policy: str, boots: int, *, resumable: bool) -> str:
    """The command that collects `boots` per arm (at least 2); a resume keeps at least the looks the
    campaign was planned with, since collect refuses fewer."""
    planned = evidence.campaign.sequential_looks if resumable else 0
    return plan.until_resolved_command(
        "CAMPAIGN.toml", results_dir, policy, max(boots, 2, planned), resume=resumable
    )


def _measured_again(results_dir: str, *, resumable: bool) -> str:
    """The tail of a next step that measures the same arms again in a new results directory: it
    continues this campaign (`collect --continues`), so the alpha this campaign's looks spent stays
    counted; said plainly when none is left."""
    command = shlex.join(
        ["mtpverdict", "collect", "CAMPAIGN.toml", "--out", plan.NEW_RESULTS, "--continues", results_dir]
    )
    if resumable:
        return f"that continues this one, its looks counted: {command}"
    return (
        "that continues this one, its looks counted (they have spent this campaign's alpha, so it "
        f"cannot promote an arm): {command}"
    )


def _boots_per_arm(evidence: Evidence) -> int:
    """The most boots any arm finished: a round more is the least more boots could be."""
    ready = [sum(1 for b in infos if b.status == "ready") for infos in evidence.boots.values()]
    return max(ready, default=1)


def floors(evidence: Evidence) -> tuple[FloorResult, ...]:
    return tuple(
        FloorResult(
            family=f.family,
            workload=f.workload,
            concurrency=f.concurrency,
            metric=f.metric,
            df=finite(f.df),
            boot_sd=finite(f.s),
            floor=_gain(f.floor),
            floor_last=_gain(f.floor_last),
            pair_difference=_gain(f.pair_difference),
            variance_sources=f.sources,
            candidates=f.n_candidates,
            pair=f.pair,
        )
        for f in evidence.floors
    )


def selected(arm: Arm | None) -> SelectedArm | None:
    return None if arm is None else SelectedArm(arm=arm.name, spec=arm.spec, serve_argv=arm.serve_argv)


def policy_summary(evidence: Evidence) -> PolicySummary:
    policy = evidence.policy
    return PolicySummary(
        name=policy.name,
        file=f"{policy.name}.toml" if policy.shipped else policy.source.replace("\\", "/").rsplit("/", 1)[-1],
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


def server_clock(engine: str | None) -> str:
    """How the campaign's engine reports each request's own clock ("vLLM >= 0.32: <flag>, which collect
    adds when [scope] engine_version says 0.32 or later"; "llama.cpp reports its timings"), or that it
    reports none; only that engine's, so another engine in the registry leaves the text alone."""
    parts = registry.get(engine) if engine is not None and engine in registry.ENGINES else None
    fields = registry.present(parts.server_fields) if parts is not None else None
    if parts is None:
        return "[scope] engine names no engine whose per-request clock collect reads"
    if fields is None:
        return f"{parts.title} reports no per-request clock collect reads"
    if fields.clock_flag is None or fields.clock_since is None:
        return f"{parts.title} reports its timings"
    since = ".".join(str(n) for n in fields.clock_since)
    return (
        f"{parts.title} >= {since}: {fields.clock_flag}, which collect adds when [scope] engine_version "
        f"says {since} or later"
    )
