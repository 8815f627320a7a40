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
    distinct: int  # most distinct outputs of the arm and the control together on one prompt
    prompts: int = 1  # prompts compared (a dataset workload sends several)
    differing: int = 0  # prompts on which the outputs were not one and the same


@dataclass(frozen=True, slots=True)
class CoherenceFinding(Finding):
    """Cases passed, cases whose output differs from the control's, workloads compared."""

    graded: int
    passed: int
    failed_cases: tuple[str, ...]
    compared_cases: int  # distinct cases compared with the control (0 when not checked)
    differing_cases: tuple[str, ...]
    workloads: tuple[WorkloadIdentity, ...]
    unstable_cases: tuple[str, ...] = ()  # cases where the controls themselves gave several outputs


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
        found = _Against()
        workloads: tuple[WorkloadIdentity, ...] = ()
        if params.identical_outputs:
            found = _cases_against_control(evidence, arm)
            workloads = _workloads_against_control(evidence, arm)
        checked = found.compared > 0 or bool(workloads)
        if not graded and not checked and not found.unstable:
            return CoherenceFinding(RuleStatus.MISSING, None, params.min_pass_rate, 0, 0, (), 0, (), ())
        bad = bool(failed) or bool(found.differing) or any(not w.identical for w in workloads)
        status = RuleStatus.FAIL if bad else RuleStatus.PASS
        if not bad and not graded and not checked:
            status = RuleStatus.INCONCLUSIVE  # only cases the control itself did not repeat: nothing settled
        return CoherenceFinding(
            status,
            value,
            params.min_pass_rate,
            len(graded),
            passed,
            failed,
            found.compared,
            found.differing,
            workloads,
            found.unstable,
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
        if finding.unstable_cases:
            parts.append(
                f"identity not established on {', '.join(finding.unstable_cases)}: the control itself gave "
                "several outputs"
            )
        for w in finding.workloads:
            where = f"on {w.workload}" if w.prompts == 1 else f"on {w.workload}'s {w.prompts} prompts"
            if w.identical:
                parts.append(f"output {where} byte-identical to the control")
            else:
                some = "" if w.prompts == 1 else f" on {w.differing} of them"
                parts.append(
                    f"output {where} differs from the control{some} ({w.distinct} distinct outputs "
                    "where greedy decoding must give one)"
                )
        return f"{arm.name}: " + "; ".join(parts)


@dataclass(frozen=True, slots=True)
class _Against:
    """Cases compared with the control's output, those that differ, and those the control varied on."""

    compared: int = 0
    differing: tuple[str, ...] = ()
    unstable: tuple[str, ...] = ()


def _cases_against_control(evidence: Evidence, arm: Arm) -> _Against:
    """The arm's case outputs against the controls'; a case the controls disagree on settles nothing."""
    theirs: dict[str, set[str]] = {}
    for control in evidence.control_names(arm.family):
        for row in evidence.coherence.get(control, ()):
            if row.output_sha256 is not None:
                theirs.setdefault(row.case, set()).add(row.output_sha256)
    mine = [
        r for r in evidence.coherence.get(arm.name, ()) if r.output_sha256 is not None and r.case in theirs
    ]
    stable = [r for r in mine if len(theirs[r.case]) == 1]
    differing = tuple(sorted(r.case for r in stable if {r.output_sha256} != theirs[r.case]))
    unstable = tuple(sorted({r.case for r in mine if len(theirs[r.case]) > 1}))
    return _Against(len({r.case for r in stable}), differing, unstable)


def _workloads_against_control(evidence: Evidence, arm: Arm) -> tuple[WorkloadIdentity, ...]:
    """Each expect_identical workload's outputs against the controls', prompt by prompt (a dataset
    workload sends several prompts: each must give one output, the same on the arm and the controls)."""
    out = []
    for wl in evidence.campaign.workloads:
        if not wl.expect_identical:
            continue
        match = evidence.output_match(arm.name, wl.id)
        if match is not None:
            prompts = match.compared + match.unstable
            out.append(
                WorkloadIdentity(
                    wl.id, match.identical, match.distinct, prompts, match.differing + match.unstable
                )
            )
    return tuple(out)


KIND = Coherence()
