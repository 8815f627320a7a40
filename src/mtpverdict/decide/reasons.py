"""The reasons a decision states, in order: the headline, the controls, each arm, then the caveats."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import (
    ArmDecision,
    ArmOutcomeResult,
    ControlResult,
    ControlStatus,
    DecisionKind,
    RuleResult,
    RuleStatus,
    Schedule,
    Verdict,
)
from mtpverdict.formats.policy import Severity
from mtpverdict.formats.results import Arm

# controls whose detail is a reason of its own (and WARN_CONTROLS when they warn)
STATED_CONTROLS = ("floor", "drift", "blind", "failed_boots", "history", "partial_boots")
# stated only when they warn (missingness: cells refused; host_state: arms' boots began differently)
WARN_CONTROLS = ("harness", "missingness", "host_state")
SPEED_KINDS = ("beats_target", "faster_than_off")  # what an eligible arm's reason cites


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the decision became and what blocked it (the inputs of the reasons)."""

    decision: DecisionKind
    selected: Arm | None
    selection_note: str
    blockers: tuple[str, ...]
    provisional: bool
    schedule: Schedule | None = None  # [selection] mode = "schedule": the depth per batch-size range
    selection_lines: tuple[str, ...] = ()  # the schedule's reasons, one per range


def reasons(
    evidence: Evidence,
    outcome: Outcome,
    arms: Sequence[ArmDecision],
    controls: Sequence[ControlResult],
    outcomes: Sequence[ArmOutcomeResult] = (),
    next_step: str | None = None,
    looks: Sequence[str] | None = None,
) -> tuple[str, ...]:
    """Every reason of the decision, headline first; what would settle unresolved arms last.

    `looks` are the looks' lines (decide/looks.py) when the recorded looks are known; without them the
    planned looks' Bonferroni line is said."""
    out = [_headline(evidence, outcome)]
    if outcome.selection_note:
        out.append(outcome.selection_note)
    out.extend(outcome.selection_lines)
    out.extend(
        c.detail
        for c in controls
        if (c.name in STATED_CONTROLS or (c.name in WARN_CONTROLS and c.status is ControlStatus.WARN))
        and not (c.status is ControlStatus.FAIL and c.detail in outcome.blockers)
    )
    for arm in arms:
        out.extend(_control_lines(arm) if arm.is_control else _arm_lines(arm))
    out.extend(_unrecorded(arms))
    out.extend(_caveats(evidence, outcome, looks))
    out.extend(_way_out(evidence, arms, outcomes, next_step))
    return tuple(out)


def _way_out(
    evidence: Evidence,
    arms: Sequence[ArmDecision],
    outcomes: Sequence[ArmOutcomeResult],
    next_step: str | None,
) -> list[str]:
    """For each unresolved candidate: what is missing and the boots per arm likely to settle it."""
    metric = str(evidence.policy.selection.metric)
    unresolved = {a.name for a in arms if a.verdict is Verdict.INCONCLUSIVE}
    out = []
    for found in outcomes:
        if found.arm not in unresolved or found.metric != metric or found.resolution is None:
            continue
        r = found.resolution
        missing = "; ".join(r.missing) or "nothing is missing but precision"
        if r.boots_per_arm is not None:
            settle = (
                f"about {r.boots_per_arm} boots per arm would likely settle it ({r.likely}, probability "
                f"{(r.probability or 0):.2f} under the planning model)"
            )
        else:
            settle = "no number of boots within the planning limit would likely settle it"
        out.append(f"{found.arm} needs: {missing}; {settle}")
    if next_step:
        out.append(f"next: {next_step}")
    return out


def _headline(evidence: Evidence, outcome: Outcome) -> str:
    name = evidence.policy.name
    arm = outcome.selected
    if outcome.decision is DecisionKind.PROMOTE and outcome.schedule is not None:
        ranges = ", ".join(
            ("off" if r.k == 0 else f"{r.arm} (k={r.k})") + f" at batch sizes {r.start}-{r.end}"
            for r in outcome.schedule.ranges
        )
        return f"promote a per-batch-size schedule under policy {name}: {ranges}"
    if outcome.decision is DecisionKind.PROMOTE and arm is not None:
        return f"promote {arm.name} ({arm.spec.label()}) under policy {name}"
    if outcome.decision is DecisionKind.KEEP_REFERENCE and arm is not None:
        return f"keep the reference {arm.name} ({arm.spec.label()}) under policy {name}"
    if outcome.decision is DecisionKind.KEEP_MTP_DISABLED:
        return f"keep speculation disabled under policy {name}: every candidate arm was rejected or void"
    return f"inconclusive under policy {name}: " + "; ".join(outcome.blockers)


def _control_lines(arm: ArmDecision) -> list[str]:
    return [f"{r.detail} (control, {r.rule})" for r in arm.rules if r.kind == "beats_target"]


def _vetoes(arm: ArmDecision, passed: bool | None) -> list[RuleResult]:
    return [r for r in arm.rules if r.severity is Severity.VETO and r.passed is passed]


def _arm_lines(arm: ArmDecision) -> list[str]:
    out = []
    if arm.verdict is Verdict.VOID:
        out.append(f"{arm.name} void: {arm.void_reason}")
    out.extend(f"{arm.name} rejected by {r.rule}: {r.detail}" for r in _vetoes(arm, False))
    if arm.verdict is Verdict.INCONCLUSIVE:  # what is unresolved matters only when nothing rejected the arm
        out.extend(f"{arm.name} unresolved on {r.rule}: {r.detail}" for r in _vetoes(arm, None))
    if arm.verdict is not Verdict.VOID:
        out.extend(
            f"warning ({r.rule}): {r.detail}"
            for r in arm.rules
            if r.severity is Severity.WARN and r.passed is not True and r.status is not RuleStatus.MISSING
        )
    out.extend(
        f"{arm.name} passes {r.rule} without evidence, as the policy allows: {r.detail}"
        for r in arm.rules
        if r.status is RuleStatus.MISSING and r.passed is True
    )
    if arm.verdict is Verdict.ELIGIBLE:
        out.extend(f"{arm.name} eligible: {r.detail}" for r in arm.rules if r.kind in SPEED_KINDS)
    return out


def _unrecorded(arms: Sequence[ArmDecision]) -> list[str]:
    """Warn-rules that found no evidence, one line per rule naming the arms."""
    missing: dict[str, list[str]] = {}
    for arm in arms:
        if arm.verdict not in (Verdict.ELIGIBLE, Verdict.INCONCLUSIVE):
            continue
        for r in arm.rules:
            if r.severity is Severity.WARN and r.status is RuleStatus.MISSING and r.passed is None:
                missing.setdefault(r.rule, []).append(arm.name)
    return [
        f"warning ({rule}): no evidence recorded for {', '.join(names)}"
        for rule, names in sorted(missing.items())
    ]


def _caveats(evidence: Evidence, outcome: Outcome, looks: Sequence[str] | None = None) -> list[str]:
    out = []
    campaign = evidence.campaign
    summaries = evidence.tables.results.summaries
    if not summaries.empty:
        arms = sorted({str(a) for a in summaries["arm"]})
        out.append(
            f"summary records only (raw runs lost) for {', '.join(arms)}: weaker evidence, "
            "spread known only where min and max were kept"
        )
    if outcome.provisional and outcome.decision is not DecisionKind.INCONCLUSIVE:
        out.append(
            "provisional: fewer than 3 degrees of freedom for boot-to-boot variance; "
            "more boots per arm (or archived A/A pairs) would firm this up"
        )
    planned = campaign.sequential_looks
    if looks is not None:
        out.extend(line for line in looks if not (outcome.blockers and line == outcome.blockers[0]))
    elif planned > 1:
        out.append(
            f"sequential design: up to {planned} looks (collect --until-resolved), each at alpha "
            f"{evidence.policy.alpha:.4g} = the policy's alpha / {planned} (Bonferroni), so the "
            "false-promotion rate over every look stays at the policy's alpha"
        )
    if campaign.synthetic:
        out.append("synthetic campaign: generated, not measured")
    return out
