"""The decision engine: controls, per-arm verdicts from the policy's rules, selection, stated reasons."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mtpverdict.decide import assemble, envelope, regime, schedule
from mtpverdict.decide.looks import LookPlan, look_lines, plan_look
from mtpverdict.decide.reasons import Outcome, reasons
from mtpverdict.decide.select import select
from mtpverdict.evidence import controls as ctl
from mtpverdict.evidence.gather import gather
from mtpverdict.evidence.model import Evidence, NoiseHistory
from mtpverdict.formats.decision import (
    DECISION_FORMAT,
    ArmDecision,
    ContextEnvelope,
    ControlResult,
    ControlStatus,
    Decision,
    DecisionKind,
    RuleResult,
    Verdict,
)
from mtpverdict.formats.looks import LookLog, history_digest
from mtpverdict.formats.policy import ControlAction, Policy, SelectionMode, Severity
from mtpverdict.formats.results import Arm
from mtpverdict.formats.results_io import Results
from mtpverdict.rules.registry import KINDS, evaluate

MIN_FIRM_DF = 3  # below this many degrees of freedom for the boot variance a decision is provisional


SPENT_ALPHA = 1e-9  # the comparisons' alpha once a campaign's alpha is spent (the decision is inconclusive)


def _look_policy(
    results: Results, policy: Policy, history: Sequence[NoiseHistory], looks: LookLog | None
) -> tuple[LookPlan | None, Policy]:
    """This decision's look and the policy it decides under: promotions at the look's alpha, what
    only keeps arms off at the policy's own (Policy.keep_off_alpha), a spent look's too."""
    if looks is None and results.campaign.continues is not None:
        looks = LookLog()  # what the continued campaign spent counts without a directory too
    if looks is not None:
        digest = history_digest([h.sha256 for h in history])
        look = plan_look(results, policy.alpha, looks, policy_sha256=policy.sha256, history_sha256=digest)
        alpha = max(look.look.alpha, SPENT_ALPHA)
        return look, dataclasses.replace(policy, alpha=alpha, keep_off_alpha=policy.alpha)
    if results.campaign.sequential_looks > 1:  # Bonferroni over the planned looks
        alpha = policy.alpha / results.campaign.sequential_looks
        return None, dataclasses.replace(policy, alpha=alpha, keep_off_alpha=policy.alpha)
    return None, policy


def decide(
    results: Results, policy: Policy, history: Sequence[NoiseHistory] = (), looks: LookLog | None = None
) -> Decision:
    """Turn a results directory and a policy into a decision with stated reasons.

    `looks` is the directory's recorded looks (formats/looks.py): the decision is the next look and
    spends what stats/looks.py allows. None (no directory) keeps Bonferroni over the planned looks.
    """
    policy_alpha = policy.alpha
    look, policy = _look_policy(results, policy, history, looks)
    evidence = gather(results, policy, history)
    controls = campaign_controls(evidence)
    arms = tuple(_arm_decision(evidence, arm) for arm in evidence.campaign.arms)
    void = _void_control(evidence, arms)
    if void is not None:
        controls.append(void)
    outcome = _outcome(evidence, arms, controls)
    look_text = None if look is None else look_lines(look, policy_alpha)
    if look is not None and look.exhausted and outcome.decision is not DecisionKind.KEEP_MTP_DISABLED:
        # a spent alpha can promote nothing; keeping every arm off spends none, so it stands
        outcome = Outcome(DecisionKind.INCONCLUSIVE, None, "", (look_text[-1] if look_text else "",), True)
    arm_outcomes = assemble.outcomes(evidence)
    undecided = outcome.decision is DecisionKind.INCONCLUSIVE
    # a campaign with looks left and alpha left to spend on them (a continued campaign may have none)
    resumable = results.campaign.sequential_looks > 0 and (
        look is None or (look.look.look < look.look.planned and not look.exhausted)
    )
    interim = look is not None and bool(look.interim)
    next_step = (
        assemble.next_step(
            evidence, arm_outcomes, controls, outcome.blockers, resumable=resumable, interim=interim
        )
        if undecided
        else None
    )
    envelopes = envelope.envelopes(evidence, _promoted(evidence, outcome))
    regime_map = regime.regime_map(
        evidence, {a.name: a.void_reason or "" for a in arms if a.verdict is Verdict.VOID}
    )
    promoted = outcome.decision in (DecisionKind.PROMOTE, DecisionKind.KEEP_REFERENCE)
    weighted = assemble.weighted(evidence)
    return Decision(
        format=DECISION_FORMAT,
        decision=outcome.decision,
        selected=assemble.selected(outcome.selected),
        provisional=outcome.provisional or (look is not None and bool(look.tampered or look.unavailable)),
        reasons=(
            *reasons(evidence, outcome, arms, controls, arm_outcomes, next_step, look_text),
            *envelope_lines(envelopes),
            *envelope.vetoed(evidence, arms),
            *(() if promoted else regime.crossover_hint(evidence, regime_map)),
            *assemble.weighted_reasons(weighted),
        ),
        policy=assemble.policy_summary(evidence),
        arms=arms,
        controls=tuple(controls),
        floors=assemble.floors(evidence),
        comparisons=assemble.comparisons(evidence),
        outcomes=arm_outcomes,
        cells=assemble.cells(evidence),
        campaign=assemble.campaign_summary(evidence),
        inputs=assemble.inputs(evidence, policy.sha256, history),
        next_step=next_step,
        missingness=assemble.missingness(evidence),
        refused=assemble.refused(evidence),
        categories=assemble.categories(evidence),
        weighted=weighted,
        latency=assemble.latency(evidence),
        regime=regime_map,
        schedule=outcome.schedule,
        envelopes=envelopes,
    )


def _promoted(evidence: Evidence, outcome: Outcome) -> list[Arm]:
    """The arms the decision runs: the selected one, or every depth of the schedule."""
    if outcome.decision not in (DecisionKind.PROMOTE, DecisionKind.KEEP_REFERENCE):
        return []
    if outcome.schedule is not None:
        names = dict.fromkeys(r.arm for r in outcome.schedule.ranges if r.arm is not None)
        return [evidence.campaign.arm(n) for n in names]
    return [] if outcome.selected is None else [outcome.selected]


def envelope_lines(found: Sequence[ContextEnvelope]) -> list[str]:
    """A reason per bounded envelope: where the promotion holds, and what gate does beyond it."""
    out = []
    for e in found:
        if e.fails_from is None:
            continue
        beyond = (
            "the policy accepts serving beyond it"
            if e.accepted
            else f"gate refuses a serve config allowing prompts of {e.fails_from:,} tokens or more"
        )
        out.append(f"context envelope ({e.rule}): {e.detail}; {beyond}")
    return out


def campaign_controls(evidence: Evidence) -> list[ControlResult]:
    """The floor, drift, blind-harness, disturbed-harness, missingness, failed-boot and partial-boot
    controls, in that order."""
    found: list[ControlResult | None] = [
        *ctl.floor_checks(evidence),
        *ctl.drift_checks(evidence),
        *ctl.position_checks(evidence),
        *ctl.duplicate_checks(evidence),
        *ctl.history_checks(evidence),
        ctl.blind_check(evidence),
        ctl.harness_check(evidence),
        ctl.missingness_check(evidence),
        ctl.failed_boots_check(evidence),
        ctl.partial_boots_check(evidence),
        ctl.host_state_check(evidence),
    ]
    return [c for c in found if c is not None]


def _arm_decision(evidence: Evidence, arm: Arm) -> ArmDecision:
    rules = [r for r in evidence.policy.rules if r.applies_to(arm.name, arm.family)]
    if arm.is_control:
        rules = [r for r in rules if KINDS[r.kind].reported_for_controls]
    outcomes = tuple(evaluate(evidence, arm, r) for r in rules)
    void = None if arm.is_control else ctl.void_reason(evidence, arm)
    return ArmDecision(
        name=arm.name,
        role=str(arm.role),
        family=arm.family,
        spec=arm.spec,
        verdict=_verdict(arm, outcomes, void),
        void_reason=void,
        rules=outcomes,
        acceptance=assemble.acceptance(evidence, arm),
        kv=assemble.kv(evidence, arm),
        break_even=assemble.break_even(evidence, arm),
    )


def _verdict(arm: Arm, outcomes: Sequence[RuleResult], void: str | None) -> Verdict:
    if arm.is_control:
        return Verdict.CONTROL
    if void:
        return Verdict.VOID
    vetoes = [o for o in outcomes if o.severity is Severity.VETO]
    if any(o.passed is False for o in vetoes):
        return Verdict.REJECTED
    if any(o.passed is None for o in vetoes):
        return Verdict.INCONCLUSIVE
    return Verdict.ELIGIBLE


def _void_control(evidence: Evidence, arms: Sequence[ArmDecision]) -> ControlResult | None:
    voids = [a for a in arms if a.verdict is Verdict.VOID]
    if voids:
        detail = "void arms (acceptance ~0): " + "; ".join(f"{a.name}: {a.void_reason}" for a in voids)
        return ControlResult("void", ControlStatus.FAIL, detail, None)
    if not any(not a.is_control for a in evidence.campaign.arms):
        return None
    detail = "every candidate with counted acceptance accepts drafts (positive control)"
    return ControlResult("void", ControlStatus.PASS, detail, None)


def _blockers(evidence: Evidence, controls: Sequence[ControlResult]) -> tuple[str, ...]:
    """Failed controls the policy treats as making the campaign undecidable.

    Confounded control positions and duplicated control boots always do: no policy can make a slow
    device end into an effect, or one boot recorded twice into two.
    """
    policy = evidence.policy.controls
    acts = {
        "blind": policy.on_blind,
        "drift": policy.on_drift,
        "positions": ControlAction.INCONCLUSIVE,
        "duplicates": ControlAction.INCONCLUSIVE,
    }
    return tuple(
        c.detail
        for c in controls
        if c.status is ControlStatus.FAIL and acts.get(c.name) is ControlAction.INCONCLUSIVE
    )


def _outcome(evidence: Evidence, arms: Sequence[ArmDecision], controls: Sequence[ControlResult]) -> Outcome:
    provisional = not any(f.known and f.df >= MIN_FIRM_DF for f in evidence.floors)

    def undecided(*why: str) -> Outcome:
        return Outcome(DecisionKind.INCONCLUSIVE, None, "", why, provisional)

    blockers = _blockers(evidence, controls)
    candidates = [a for a in arms if not a.is_control]
    if not evidence.tables.results.measured_records:
        return undecided(
            "no measured evidence: the results directory holds no request, summary or acceptance record, "
            "so neither speculation nor keeping it off is supported"
        )
    if blockers:
        return undecided(*blockers)
    if not candidates:
        return undecided("the campaign has no candidate arm")
    if evidence.policy.selection.mode is SelectionMode.SCHEDULE:
        built = schedule.build(evidence, arms)
        return Outcome(
            built.decision,
            built.selected,
            built.note,
            built.blockers,
            provisional,
            built.schedule,
            built.lines,
        )
    scheduled = regime.schedule_arms(evidence)
    eligible = [
        evidence.campaign.arm(a.name)
        for a in candidates
        if a.verdict is Verdict.ELIGIBLE and a.name not in scheduled
    ]
    if eligible:
        found = select(evidence, eligible, evidence.policy.selection.mode)
        return Outcome(found.decision, found.arm, found.note, (), provisional)
    unresolved = [a for a in candidates if a.verdict is Verdict.INCONCLUSIVE]
    confirming = [a for a in candidates if a.verdict is Verdict.ELIGIBLE and a.name in scheduled]
    if unresolved or confirming:
        return undecided(
            *(f"{a.name} could not be judged" for a in unresolved),
            *(
                f"{a.name} ran a per-batch-size schedule, so it is no single depth: it is promoted only "
                'as the confirmation of a schedule ([selection] mode = "schedule")'
                for a in confirming
            ),
        )
    if all(a.verdict is Verdict.VOID for a in candidates):
        return undecided("every candidate arm is void: the campaign measured broken heads, not speculation")
    return Outcome(DecisionKind.KEEP_MTP_DISABLED, None, "", (), provisional)
