"""(1) Evidence and (2) support: which arm measured the proposal, and whether the decision selects it."""

from __future__ import annotations

from collections.abc import Sequence

from mtpverdict.gate.evidence import ArmEvidence, GateEvidence
from mtpverdict.gate.proposal import Proposal
from mtpverdict.serveconfig import ServeSpec, SpecRefusal, extract_spec, settings_differences

__all__ = ["SUPPORTING", "no_evidence", "mismatch", "support"]

SUPPORTING = ("promote", "keep_reference")  # decisions that select a speculative arm
SHOWN_ARMS = 3  # matching arms whose own rules a refusal lists
SHOWN_MEASURED = 12  # measured configurations listed when there is no evidence


def mismatch(arm: ArmEvidence, proposal: Proposal) -> str | None:
    """Why an arm did not measure the proposed configuration; None when it did."""
    if proposal.off:
        return None if arm.control else "speculates"
    if arm.control or arm.k != proposal.k or proposal.method not in (None, arm.method):
        return "another method or depth"
    measured = None if arm.argv is None else extract_spec(arm.argv)
    if isinstance(measured, ServeSpec) and measured.schedule:
        return "it ran a per-batch-size schedule, not one depth at every batch size"
    if proposal.serve is None or measured is None:
        return None  # method and depth are all either side shows (freshness then needs the argv)
    if isinstance(measured, SpecRefusal):
        return f"its speculative flags cannot be read ({measured.reasons[0]})"
    differences = settings_differences(measured, proposal.serve)
    return f"other speculative settings ({'; '.join(differences)})" if differences else None


def support(evidence: GateEvidence, proposal: Proposal) -> tuple[bool, list[str], ArmEvidence | None]:
    """Whether the decision supports the proposal, the reasons, and the arm that measured it."""
    kind = evidence.decision
    selected = evidence.arm(evidence.selected)
    if proposal.off:
        control = next((a for a in evidence.arms if a.control), None)
        if kind == "keep_mtp_disabled":
            return True, ["the decision keeps speculation disabled"], control
        chosen = f" (selected {selected.name}: {selected.label})" if selected else ""
        return (
            False,
            [
                f"proposing speculation off, but the decision is {kind}{chosen}; "
                "keeping speculation off needs evidence too"
            ],
            control,
        )
    matched = [a for a in evidence.arms if mismatch(a, proposal) is None]
    if not matched:
        return False, no_evidence(evidence, proposal), None
    if selected in matched and kind in SUPPORTING:
        assert selected is not None
        return True, [f"the decision ({kind}) selects {selected.name}: {selected.label}"], selected
    return False, _refusal(evidence, proposal, matched), matched[0]


def no_evidence(evidence: GateEvidence, proposal: Proposal) -> list[str]:
    candidates = [a for a in evidence.arms if not a.control]
    measured = ", ".join(f"{a.name} ({a.label})" for a in candidates[:SHOWN_MEASURED])
    more = len(candidates) - SHOWN_MEASURED
    reasons = [
        f"no evidence for this configuration: {proposal.label} was never measured; the campaign measured "
        + (measured or "no speculative arm")
        + (f" and {more} more" if more > 0 else "")
    ]
    for arm in candidates:
        why = mismatch(arm, proposal)
        if why and why != "another method or depth":
            reasons.append(f"{arm.name} ({arm.label}) ran {why}")
    return reasons


def _refusal(evidence: GateEvidence, proposal: Proposal, matched: Sequence[ArmEvidence]) -> list[str]:
    kind = evidence.decision
    selected = evidence.arm(evidence.selected)
    if kind in SUPPORTING and selected is not None:
        head = (
            f"proposing {proposal.label}, but the decision ({kind}) selects {selected.name} "
            f"with k={selected.k}"
        )
    else:
        head = f"proposing {proposal.label}, but the decision is {kind}: no depth is supported"
    reasons = [head]
    for arm in matched[:SHOWN_ARMS]:
        if not arm.failing:
            reasons.append(f"{arm.name} ({arm.label}): {arm.verdict}; it fails none of its rules")
            continue
        reasons.append(f"{arm.name} ({arm.label}): {arm.verdict}, by its own rules:")
        reasons += [f"  {r.rule} ({r.severity}, {r.status}): {r.detail}" for r in arm.failing]
    return reasons
