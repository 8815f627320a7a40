"""context_regime: speculation must not lose to off at the long-context workloads the rule names."""

from __future__ import annotations

import math
from dataclasses import dataclass

from msgspec import Struct

from mtpverdict._logscale import ratio
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Located, PositiveInt
from mtpverdict.formats.decision import RuleStatus, finite
from mtpverdict.formats.results import Arm, Metric
from mtpverdict.rules.kind import Finding, RuleKind
from mtpverdict.stats.economics import RegimePoint, crossing
from mtpverdict.stats.procedure import CellComparison, Outcome


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
    unmeasured: tuple[str, ...] = ()  # listed workloads with no comparison: they settle nothing
    concurrency: tuple[int, ...] = ()  # each profile point's concurrency, when several were measured


NOT_WORSE = "not_worse"  # a profile point not told apart from off whose interval excludes a loss
HOLDS = (str(Outcome.BETTER), str(Outcome.EQUIVALENT), NOT_WORSE)


class ContextRegime(RuleKind[Params, RegimeFinding]):
    """Worse than off at any listed workload fails; not worse beyond the margin at all of them passes.

    "Not worse" is non-inferiority: the 1 - 2 alpha interval's low end lies above -log(1 + margin), a
    one-sided test at alpha at each depth. The rule needs it at every listed depth (intersection-union),
    so no multiplicity correction applies; better and equivalent imply it.
    """

    name = "context_regime"
    params_type = Params
    summary = "the arm does not lose to off at the long-context workloads named (the context envelope)"

    def contradictions(self, params: Params) -> list[Located]:
        if params.metric is Metric.TTFT_MS:
            return [("metric", "ttft_ms is lower-is-better; use a ttft rule for latency")]
        return []

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> RegimeFinding:
        metric = str(params.metric)
        margin = math.log1p(evidence.policy.equivalence_margin)
        measured = sorted(
            (
                (_point(evidence, workload, comp, margin), conc)
                for workload, conc, comp in evidence.comparisons_of(arm.name, metric)
                if params.concurrency is None or conc in params.concurrency
            ),
            key=lambda pc: (pc[0].prompt_tokens or 0, pc[0].workload, pc[1]),
        )
        profile = tuple(p for p, _ in measured)
        checked = [p for p in profile if p.workload in params.workloads]
        if not checked:
            return RegimeFinding(RuleStatus.MISSING, None, params.workloads, metric, profile, (), None)
        losing = tuple(dict.fromkeys(p.workload for p in checked if p.outcome == str(Outcome.WORSE)))
        unmeasured = tuple(w for w in params.workloads if not any(p.workload == w for p in checked))
        if losing:
            status = RuleStatus.FAIL
        elif not unmeasured and all(p.outcome in HOLDS for p in checked):
            status = RuleStatus.PASS
        else:
            status = RuleStatus.INCONCLUSIVE
        several = len({c for _, c in measured}) > 1
        return RegimeFinding(
            status=status,
            value=min(p.ratio for p in checked),
            threshold=params.workloads,
            metric=metric,
            profile=profile,
            losing=losing,
            crossing=crossing(list(profile)),
            unmeasured=unmeasured,
            concurrency=tuple(c for _, c in measured) if several else (),
        )

    def render(self, finding: RegimeFinding, arm: Arm) -> str:
        if finding.value is None:
            listed = finding.threshold
            assert isinstance(listed, tuple)
            return f"{arm.name}: no {finding.metric} comparison at {', '.join(listed)}"
        labels = [p.workload for p in finding.profile]
        if finding.concurrency:
            labels = [f"{w} c={c}" for w, c in zip(labels, finding.concurrency, strict=True)]
        points = zip(labels, finding.profile, strict=True)
        profile = ", ".join(f"{label} {p.ratio:.3f}x ({p.outcome})" for label, p in points)
        detail = f"{arm.name}: ratio to off by depth: {profile}"
        if finding.crossing is not None:
            detail += f"; loses from {finding.crossing} onward"
        if finding.losing:
            detail += f"; loses at {', '.join(finding.losing)}"
        if finding.unmeasured:
            detail += f"; no comparison at {', '.join(finding.unmeasured)}"
        return detail


def _point(evidence: Evidence, workload: str, comp: CellComparison, margin: float) -> RegimePoint:
    outcome = str(comp.cell_outcome)
    if comp.cell_outcome in (Outcome.INCONCLUSIVE, Outcome.BELOW_MIN_EFFECT) and comp.ci_low > -margin:
        outcome = NOT_WORSE  # NaN (no interval) compares false: nothing is shown
    return RegimePoint(
        workload=workload,
        prompt_tokens=evidence.campaign.workload(workload).prompt_tokens,
        ratio=math.exp(comp.estimate),
        ci_low=ratio(comp.ci_low) if math.isfinite(comp.ci_low) else None,
        ci_high=finite(ratio(comp.ci_high)) if math.isfinite(comp.ci_high) else None,
        outcome=outcome,
    )


KIND = ContextRegime()
