"""boot_ok: the arm was measured as asked: its boots served, its requests succeeded, its k was in force."""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Count, Fraction
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a boot_ok rule."""

    max_failed_boots: Count = 0
    max_error_rate: Fraction = 0.0
    check_observed_k: bool = True


@dataclass(frozen=True, slots=True)
class BootFinding(Finding):
    """Boots that failed (and why), request errors, and a depth seen in force other than the arm's."""

    boots: int
    ready: int
    failed_errors: tuple[str, ...]
    requests: int
    errors: int
    wrong_k: int | None
    too_many_failed: bool
    too_many_errors: bool


class BootOk(RuleKind[Params, BootFinding]):
    """At most max_failed_boots failed boots, an error rate within max_error_rate, the arm's k in force."""

    name = "boot_ok"
    params_type = Params
    summary = "boots served, requests succeeded and the server ran the depth the arm asks for"
    reported_for_controls = True

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> BootFinding:
        mine = evidence.boots.get(arm.name, ())
        failed = [b for b in mine if b.status == "failed"]
        n_requests, errors = evidence.request_counts.get(arm.name, (0, 0))
        if not mine and not n_requests:
            return BootFinding(RuleStatus.MISSING, None, None, 0, 0, (), 0, 0, None, False, False)
        rate = errors / n_requests if n_requests else 0.0
        wrong = None
        if params.check_observed_k and arm.spec.k is not None:
            seen = sorted(
                {b.observed_k for b in mine if b.observed_k is not None and b.observed_k != arm.spec.k}
            )
            wrong = seen[0] if seen else None
        too_many_failed = len(failed) > params.max_failed_boots
        too_many_errors = rate > params.max_error_rate
        bad = too_many_failed or too_many_errors or wrong is not None
        return BootFinding(
            RuleStatus.FAIL if bad else RuleStatus.PASS,
            len(failed),
            params.max_failed_boots,
            len(mine),
            sum(1 for b in mine if b.status == "ready"),
            tuple(sorted({str(b.error) for b in failed})),
            n_requests,
            errors,
            wrong,
            too_many_failed,
            too_many_errors,
        )

    def render(self, finding: BootFinding, arm: Arm) -> str:
        if finding.status is RuleStatus.MISSING:
            return f"{arm.name}: no boot or request records"
        failures = []
        if finding.too_many_failed:
            failures.append(
                f"{finding.value} of {finding.boots} boots failed ({'; '.join(finding.failed_errors)})"
            )
        if finding.too_many_errors:
            rate = finding.errors / finding.requests if finding.requests else 0.0
            failures.append(f"{finding.errors} of {finding.requests} requests failed ({rate * 100:.1f}%)")
        if finding.wrong_k is not None:
            failures.append(f"the server ran k={finding.wrong_k} where the arm asks for k={arm.spec.k}")
        if failures:
            return f"{arm.name}: " + "; ".join(failures)
        return f"{arm.name}: {finding.ready}/{finding.boots} boots ready, {finding.errors} request errors"


KIND = BootOk()
