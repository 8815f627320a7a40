"""The context envelope of a promotion: the prompt depths at which a promoted arm holds against off.

No engine schedules by context, so a promotion that holds at 4K prompt tokens and loses from 32K is
stated with its envelope, and `gate` refuses a serve config whose context reaches the depth where it
stops holding (unless the policy's `[gate] outside_envelope = "accept"`). The envelope is read from the
arm's context_regime rules: their profile of the ratio to off by prompt depth (every workload with a
known prompt length). A depth holds when every point measured there is better, equivalent or not worse
beyond the margin (non-inferiority); `holds_to` is the deepest depth with every shallower one holding,
`fails_from` the shallowest depth that does not hold (none when every depth measured holds).
"""

from __future__ import annotations

from collections.abc import Sequence

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import ArmDecision, ContextEnvelope, Verdict
from mtpverdict.formats.policy import Outside, Severity
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kinds.context_regime import HOLDS, KIND, Params
from mtpverdict.stats.economics import RegimePoint


def _bounds(profile: Sequence[RegimePoint]) -> tuple[int | None, int | None, str]:
    """(holds_to, fails_from, the depths as words) over the points with a known prompt length."""
    depths: dict[int, list[RegimePoint]] = {}
    for p in profile:
        if p.prompt_tokens is not None:
            depths.setdefault(p.prompt_tokens, []).append(p)
    holds_to = fails_from = None
    words = []
    for tokens in sorted(depths):
        points = depths[tokens]
        holds = all(p.outcome in HOLDS for p in points)
        words.append(f"{tokens:,} ({', '.join(sorted({p.outcome for p in points}))})")
        if fails_from is None:
            if holds:
                holds_to = tokens
            else:
                fails_from = tokens
    return holds_to, fails_from, "; ".join(words)


def _of_arm(evidence: Evidence, arm: Arm, accepted: bool) -> list[ContextEnvelope]:
    """The arm's envelope under each context_regime rule that applies to it."""
    out = []
    for rule in evidence.policy.rules:
        if rule.kind != KIND.name or not rule.applies_to(arm.name, arm.family):
            continue
        assert isinstance(rule.params, Params)
        finding = KIND.evaluate(evidence, arm, rule.params)
        holds_to, fails_from, words = _bounds(finding.profile)
        if holds_to is None and fails_from is None:
            continue  # no workload with a known prompt length: nothing bounds the context
        if fails_from is None:
            detail = f"{arm.name} holds at every prompt depth measured, up to {holds_to:,} tokens: {words}"
        elif holds_to is None:
            detail = f"{arm.name} does not hold even at the shallowest prompt measured: {words}"
        else:
            detail = (
                f"{arm.name} holds only below {fails_from:,} prompt tokens (shown up to {holds_to:,}; "
                f"not between): {words}"
            )
        out.append(ContextEnvelope(arm.name, rule.id, holds_to, fails_from, accepted, detail))
    return out


def envelopes(evidence: Evidence, promoted: Sequence[Arm]) -> tuple[ContextEnvelope, ...]:
    """The envelope of each promoted arm under each context_regime rule that applies to it."""
    accepted = evidence.policy.gate.outside_envelope is Outside.ACCEPT
    return tuple(e for arm in promoted for e in _of_arm(evidence, arm, accepted))


def _only_context_vetoes(d: ArmDecision) -> set[str]:
    """The context_regime vetoes that reject the arm when they are all that does (else none)."""
    blocking = [r for r in d.rules if r.severity is Severity.VETO and r.passed is not True]
    if d.is_control or d.verdict is not Verdict.REJECTED or any(r.kind != KIND.name for r in blocking):
        return set()
    return {r.rule for r in blocking if r.passed is False}


def vetoed(evidence: Evidence, decisions: Sequence[ArmDecision]) -> list[str]:
    """A reason per arm rejected by context_regime vetoes alone though it holds at shallower prompts:
    the envelope in which it could be promoted, had the policy made those rules warnings."""
    accepted = evidence.policy.gate.outside_envelope is Outside.ACCEPT
    out = []
    for d in decisions:
        fired = _only_context_vetoes(d)
        found = _of_arm(evidence, evidence.campaign.arm(d.name), accepted) if fired else []
        out += [
            f"context envelope ({e.rule}): {e.detail}; the rule is a veto and the only one {d.name} "
            f'fails, so it is rejected; with severity = "warn" it could be promoted within this envelope, '
            + (
                "the policy accepting serving beyond it"
                if accepted
                else f"gate refusing serve configs that allow prompts of {e.fails_from:,} tokens or more"
            )
            for e in found
            if e.rule in fired and e.holds_to is not None and e.fails_from is not None
        ]
    return out
