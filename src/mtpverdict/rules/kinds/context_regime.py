"""context_regime: speculation must not lose to off at the long-context workloads the rule names."""

from __future__ import annotations

import math
from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Located, PositiveInt
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm, Metric
from mtpverdict.rules.kind import Finding, RuleKind
from mtpverdict.stats import compare as cmp
from mtpverdict.stats.economics import RegimePoint, crossing


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a context_regime rule."""

    workloads: tuple[str, ...]
    metric: Metric = Metric.DECODE_TPS
    concurrency: tuple[PositiveInt, ...] | None = None


@dataclass(frozen=True, slots=True)
class RegimeFinding(Finding):
    """The ratio to off at every context depth measured, the listed ones checked, and the crossing."""

    metric: str
    profile: tuple[RegimePoint, ...]  # every depth, by prompt tokens
    losing: tuple[str, ...]  # listed workloads where the arm is worse than off
    crossing: str | None  # the first workload from which the ratio stays below 1


class ContextRegime(RuleKind[Params, RegimeFinding]):
    """Worse than off at any listed workload fails; better or equivalent at all of them passes."""

    name = "context_regime"
    params_type = Params
    summary = "the arm does not lose to off at the long-context workloads named (the context envelope)"

    def contradictions(self, params: Params) -> list[Located]:
        if params.metric is Metric.TTFT_MS:
            return [("metric", "ttft_ms is lower-is-better; use a ttft rule for latency")]
        return []

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> RegimeFinding:
        metric = str(params.metric)
        points = [
            _point(evidence, workload, comp)
            for workload, conc, comp in evidence.comparisons_of(arm.name, metric)
            if params.concurrency is None or conc in params.concurrency
        ]
        checked = [p for p in points if p.workload in params.workloads]
        profile = tuple(sorted(points, key=lambda p: (p.prompt_tokens or 0, p.workload)))
        if not checked:
            return RegimeFinding(RuleStatus.MISSING, None, params.workloads, metric, profile, (), None)
        losing = tuple(p.workload for p in profile if p in checked and p.outcome == cmp.WORSE)
        worst = min(p.ratio for p in checked)
        if losing:
            status = RuleStatus.FAIL
        elif all(p.outcome in (cmp.BETTER, cmp.EQUIVALENT) for p in checked):
            status = RuleStatus.PASS
        else:
            status = RuleStatus.INCONCLUSIVE
        return RegimeFinding(status, worst, params.workloads, metric, profile, losing, crossing(points))

    def render(self, finding: RegimeFinding, arm: Arm) -> str:
        if finding.value is None:
            listed = finding.threshold
            assert isinstance(listed, tuple)
            return f"{arm.name}: no {finding.metric} comparison at {', '.join(listed)}"
        profile = ", ".join(f"{p.workload} {p.ratio:.3f}x ({p.outcome})" for p in finding.profile)
        detail = f"{arm.name}: ratio to off by depth: {profile}"
        if finding.crossing is not None:
            detail += f"; loses from {finding.crossing} onward"
        if finding.losing:
            detail += f"; loses at {', '.join(finding.losing)}"
        return detail


def _point(evidence: Evidence, workload: str, comp: cmp.Comparison) -> RegimePoint:
    return RegimePoint(
        workload=workload,
        prompt_tokens=evidence.campaign.workload(workload).prompt_tokens,
        ratio=comp.ratio,
        ci_low=math.exp(comp.ci_low) if math.isfinite(comp.ci_low) else None,
        ci_high=math.exp(comp.ci_high) if math.isfinite(comp.ci_high) else None,
        outcome=comp.outcome,
    )


KIND = ContextRegime()
