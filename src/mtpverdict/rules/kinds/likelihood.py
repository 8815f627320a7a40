"""likelihood: teacher-forced NLL under speculation stays within a bound of the control's."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Located, Nonneg
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a likelihood rule (max_delta, max_delta_vs_spread or both)."""

    max_delta: Nonneg | None = None
    max_delta_vs_spread: Nonneg | None = None


@dataclass(frozen=True, slots=True)
class LikelihoodFinding(Finding):
    """Median NLL delta against the control, the control's own spread and the bounds it broke."""

    spread: float | None
    control_runs: int
    above_delta: bool
    above_spread: bool


class Likelihood(RuleKind[Params, LikelihoodFinding]):
    """|median NLL delta| within max_delta, and within max_delta_vs_spread x the control's run spread."""

    name = "likelihood"
    params_type = Params
    summary = "teacher-forced likelihood under speculation matches the control's within a bound"

    def contradictions(self, params: Params) -> list[Located]:
        if params.max_delta is None and params.max_delta_vs_spread is None:
            return [(None, "sets no threshold; give max_delta or max_delta_vs_spread")]
        return []

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> LikelihoodFinding:
        mine = evidence.likelihood.get(arm.name, ())
        theirs = [v for c in evidence.control_names(arm.family) for v in evidence.likelihood.get(c, ())]
        if not mine or not theirs:
            return LikelihoodFinding(RuleStatus.MISSING, None, None, None, 0, False, False)
        delta = float(statistics.median(mine) - statistics.median(theirs))
        spread = max(theirs) - min(theirs) if len(theirs) >= 2 else None
        thresholds = {"max_delta": params.max_delta, "max_delta_vs_spread": params.max_delta_vs_spread}
        above_delta = params.max_delta is not None and abs(delta) > params.max_delta
        k = params.max_delta_vs_spread
        above_spread = k is not None and spread is not None and abs(delta) > k * spread
        if k is not None and spread is None and not above_delta and abs(delta) > 0:
            status = RuleStatus.MISSING  # one control run: its spread, and so the bound, is unknown
        else:
            status = RuleStatus.FAIL if above_delta or above_spread else RuleStatus.PASS
        return LikelihoodFinding(status, delta, thresholds, spread, len(theirs), above_delta, above_spread)

    def render(self, finding: LikelihoodFinding, arm: Arm) -> str:
        if finding.value is None:
            return f"{arm.name}: no teacher-forced likelihood for the arm and its control"
        detail = f"{arm.name}: mean NLL delta {finding.value:+.5f} nats vs the control"
        if finding.spread is not None:
            detail += f" (control spread {finding.spread:.5f} over {finding.control_runs} runs)"
        else:
            detail += " (control spread unknown: one run)"
        thresholds = finding.threshold
        assert isinstance(thresholds, dict)
        failures = []
        if finding.above_delta:
            failures.append(f"|delta| above {thresholds['max_delta']}")
        if finding.above_spread:
            failures.append(f"|delta| above {thresholds['max_delta_vs_spread']} x the control spread")
        return detail + ("; " + "; ".join(failures) if failures else "")


KIND = Likelihood()
