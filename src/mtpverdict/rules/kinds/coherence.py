"""coherence: speculation changes speed, not semantics: cases pass and greedy output matches the control."""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Fraction
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind

IDENTITY_CASE_PREFIX = "identity-"  # coherence records of un-nonced greedy probes: compared, not graded


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a coherence rule."""

    min_pass_rate: Fraction = 1.0
    identical_outputs: bool = True


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    """Greedy output of an expect_identical workload against the control's."""

    workload: str
    identical: bool
    distinct: int  # distinct outputs of the arm and the control together


@dataclass(frozen=True, slots=True)
class CoherenceFinding(Finding):
    """Cases passed, cases whose output differs from the control's, workloads compared."""

    graded: int
    passed: int
    failed_cases: tuple[str, ...]
    compared_cases: int  # distinct cases compared with the control (0 when not checked)
    differing_cases: tuple[str, ...]
    workloads: tuple[WorkloadIdentity, ...]


class Coherence(RuleKind[Params, CoherenceFinding]):
    """Graded cases pass at min_pass_rate; with identical_outputs, outputs equal the control's."""

    name = "coherence"
    params_type = Params
    summary = "coherence cases pass and greedy outputs are identical to the control's"
    reported_for_controls = True

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> CoherenceFinding:
        rows = evidence.coherence.get(arm.name, ())
        graded = [r for r in rows if not r.case.startswith(IDENTITY_CASE_PREFIX)]
        passed = sum(1 for r in graded if r.passed)
        value = passed / len(graded) if graded else None
        failed = (
            tuple(sorted(r.case for r in graded if not r.passed))
            if value is not None and value < params.min_pass_rate
            else ()
        )
        compared: int = 0
        differing: tuple[str, ...] = ()
        workloads: tuple[WorkloadIdentity, ...] = ()
        if params.identical_outputs:
            compared, differing = _cases_against_control(evidence, arm)
            workloads = _workloads_against_control(evidence, arm)
        checked = compared > 0 or bool(workloads)
        if not graded and not checked:
            return CoherenceFinding(RuleStatus.MISSING, None, params.min_pass_rate, 0, 0, (), 0, (), ())
        bad = bool(failed) or bool(differing) or any(not w.identical for w in workloads)
        status = RuleStatus.FAIL if bad else RuleStatus.PASS
        return CoherenceFinding(
            status, value, params.min_pass_rate, len(graded), passed, failed, compared, differing, workloads
        )

    def render(self, finding: CoherenceFinding, arm: Arm) -> str:
        if finding.status is RuleStatus.MISSING:
            return f"{arm.name}: no coherence cases or output hashes recorded"
        parts = []
        if finding.graded:
            text = f"{finding.passed}/{finding.graded} coherence checks passed"
            if finding.failed_cases:
                text += f" (failed: {', '.join(finding.failed_cases)})"
            parts.append(text)
        if finding.compared_cases:
            if finding.differing_cases:
                parts.append(
                    f"greedy output differs from the control's on {', '.join(finding.differing_cases)}"
                )
            else:
                parts.append(f"greedy output identical to the control's on {finding.compared_cases} prompts")
        for w in finding.workloads:
            if w.identical:
                parts.append(f"output on {w.workload} byte-identical to the control")
            else:
                parts.append(
                    f"output on {w.workload} differs from the control ({w.distinct} distinct outputs "
                    "where greedy decoding must give one)"
                )
        return f"{arm.name}: " + "; ".join(parts)


def _cases_against_control(evidence: Evidence, arm: Arm) -> tuple[int, tuple[str, ...]]:
    """(distinct cases compared, cases whose output differs) against the family's controls."""
    theirs: dict[str, set[str]] = {}
    for control in evidence.control_names(arm.family):
        for row in evidence.coherence.get(control, ()):
            if row.output_sha256 is not None:
                theirs.setdefault(row.case, set()).add(row.output_sha256)
    mine = [
        r for r in evidence.coherence.get(arm.name, ()) if r.output_sha256 is not None and r.case in theirs
    ]
    differing = tuple(sorted(r.case for r in mine if {r.output_sha256} != theirs[r.case]))
    return len({r.case for r in mine}), differing


def _workloads_against_control(evidence: Evidence, arm: Arm) -> tuple[WorkloadIdentity, ...]:
    controls = evidence.control_names(arm.family)
    out = []
    for wl in evidence.campaign.workloads:
        if not wl.expect_identical:
            continue
        mine = evidence.outputs([arm.name], wl.id)
        theirs = evidence.outputs(controls, wl.id)
        if mine and theirs:
            out.append(WorkloadIdentity(wl.id, mine == theirs and len(mine) == 1, len(mine | theirs)))
    return tuple(out)


KIND = Coherence()
