"""identity: greedy output of the arm equals the control's, prompt by prompt, where the control is stable."""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of an identity rule."""

    workloads: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """One workload: identical, different, or not established (the control itself varied)."""

    workload: str
    state: str  # identical | differs | unstable_control
    control_distinct: int | None


@dataclass(frozen=True, slots=True)
class IdentityFinding(Finding):
    """Each compared workload's state."""

    workloads: tuple[WorkloadIdentity, ...]


class Identity(RuleKind[Params, IdentityFinding]):
    """Identical to the control on every workload compared; a control with several outputs settles nothing."""

    name = "identity"
    params_type = Params
    summary = "long greedy generations are byte-identical to the control's (where the control is stable)"

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> IdentityFinding:
        controls = evidence.control_names(arm.family)
        status = RuleStatus.MISSING
        found: list[WorkloadIdentity] = []
        for wid in params.workloads or [w.id for w in evidence.campaign.workloads]:
            match = evidence.output_match(arm.name, wid)
            theirs = evidence.outputs_by_prompt(controls, wid)  # per prompt: a dataset sends several
            distinct: int | None = max(len(v) for v in theirs.values()) if theirs else None
            if distinct is None:
                recorded = [
                    evidence.distinct_outputs[(c, wid)]
                    for c in controls
                    if (c, wid) in evidence.distinct_outputs
                ]
                distinct = max(recorded) if recorded else None
            if match is None or match.compared == 0:  # nothing compared: the control may still have varied
                if distinct is not None and distinct > 1:
                    found.append(WorkloadIdentity(wid, "unstable_control", distinct))
                    status = RuleStatus.INCONCLUSIVE if status is not RuleStatus.FAIL else status
                continue
            if match.differing:  # a prompt on which the control gave one output and the arm another
                found.append(WorkloadIdentity(wid, "differs", distinct))
                status = RuleStatus.FAIL
            elif match.unstable:  # the rest agreed, but on some prompts the control itself varied
                found.append(WorkloadIdentity(wid, "unstable_control", distinct))
                status = RuleStatus.INCONCLUSIVE if status is not RuleStatus.FAIL else status
            else:
                found.append(WorkloadIdentity(wid, "identical", distinct))
                status = RuleStatus.PASS if status is RuleStatus.MISSING else status
        return IdentityFinding(status, None, None, tuple(found))

    def render(self, finding: IdentityFinding, arm: Arm) -> str:
        if not finding.workloads:
            return f"{arm.name}: no output hashes to compare"
        texts = {
            "identical": "identical to the control on {w}",
            "differs": "differs from the control on {w}",
            "unstable_control": "identity on {w} not established: "
            "the control itself gave {n} distinct outputs",
        }
        parts = [texts[w.state].format(w=w.workload, n=w.control_distinct) for w in finding.workloads]
        return f"{arm.name}: " + "; ".join(parts)


KIND = Identity()
