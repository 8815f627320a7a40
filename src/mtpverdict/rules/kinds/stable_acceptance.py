"""stable_acceptance: an arm's acceptance is a proportion with a sample size, per workload, not a point."""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Count, Fraction, Located
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind
from mtpverdict.stats.acceptance import ArmAcceptance, Surface

CHECKS = (
    "min_drafted_tokens",
    "min_rate",
    "min_lower_bound",
    "min_last_position_rate",
    "max_wasted_fraction",
)
LABELS = {
    "min_drafted_tokens": "drafted tokens",
    "min_rate": "acceptance rate",
    "min_lower_bound": "acceptance lower bound",
    "min_last_position_rate": "last-position rate",
    "max_wasted_fraction": "wasted-draft fraction",
}


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a stable_acceptance rule (at least one threshold)."""

    min_drafted_tokens: Count | None = None
    min_rate: Fraction | None = None
    min_lower_bound: Fraction | None = None
    min_last_position_rate: Fraction | None = None
    max_wasted_fraction: Fraction | None = None


@dataclass(frozen=True, slots=True)
class Check:
    """One threshold against a surface's number (None when the number is not recorded).

    passed is None when the number is not recorded or the sample cannot settle it: too few drafted
    tokens, a single request or window (no interval covers), or a lower bound or last-position rate
    below the minimum whose interval still reaches it.
    """

    key: str
    threshold: float
    value: float | None
    passed: bool | None
    where: str = ""  # "" for the arm's pooled acceptance, else the workload
    too_small: str | None = None  # a bound missing because the sample is too small for an interval


@dataclass(frozen=True, slots=True)
class AcceptanceFinding(Finding):
    """The primary surface's rate, its interval and sample, and each threshold's check (per workload)."""

    surface: Surface | None
    per_position_rate: tuple[float, ...] | None
    checks: tuple[Check, ...]


class StableAcceptance(RuleKind[Params, AcceptanceFinding]):
    """Acceptance with enough drafted tokens and above its bounds, pooled and in every workload.

    A workload's acceptance is judged on its own (repetitive prompts can lift the pooled figure); too
    small a sample is missing evidence, not a failing rate; a last-position rate fails only when its
    interval lies wholly below the minimum.
    """

    name = "stable_acceptance"
    params_type = Params
    summary = "acceptance has a sample size and clears minimum rates, lower bound and last-position rate"

    def contradictions(self, params: Params) -> list[Located]:
        out: list[Located] = []
        if all(getattr(params, k) is None for k in CHECKS):
            out.append((None, f"sets no threshold; give at least one of {', '.join(CHECKS)}"))
        rate, wasted = params.min_rate, params.max_wasted_fraction
        if rate is not None and wasted is not None and 1.0 - wasted < rate - 1e-12:
            message = f"max_wasted_fraction {wasted} allows less than min_rate {rate} does; they contradict"
            out.append(("max_wasted_fraction", message))
        return out

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> AcceptanceFinding:
        acc = evidence.acceptance.get(arm.name)
        if acc is None or acc.primary is None:
            return AcceptanceFinding(RuleStatus.MISSING, None, None, None, None, ())
        checks = list(_checks(params, acc.primary, "", acc))
        workloads = acc.workloads()
        if len(workloads) > 1:
            for workload, surface in workloads:
                checks += [c for c in _checks(params, surface, workload) if c.key != "min_drafted_tokens"]
        thresholds = {c.key: getattr(params, c.key) for c in checks if not c.where}
        if any(c.passed is False for c in checks):
            status = RuleStatus.FAIL
        elif any(c.passed is None for c in checks):
            status = (
                RuleStatus.MISSING
            )  # too small a sample, or a number not recorded: more drafting settles it
        else:
            status = RuleStatus.PASS
        primary = acc.primary
        return AcceptanceFinding(
            status, primary.rate, thresholds, primary, acc.per_position_rate, tuple(checks)
        )

    def render(self, finding: AcceptanceFinding, arm: Arm) -> str:
        p = finding.surface
        if p is None:
            return f"{arm.name}: no acceptance recorded"
        rate_text = "n/a" if p.rate is None else f"{p.rate * 100:.1f}%"
        if p.ci_low is not None and p.ci_high is not None and p.too_small is None:
            rate_text += f" [90% CI {p.ci_low * 100:.1f}%, {p.ci_high * 100:.1f}%]"
        sample = (
            f"on {p.draft_tokens} drafted tokens"
            if p.draft_tokens is not None
            else "sample size not recorded"
        )
        positions = finding.per_position_rate
        pos_text = "" if not positions else "; per position " + ", ".join(f"{r:.3f}" for r in positions)
        detail = f"{arm.name}: acceptance {rate_text} {sample} ({p.source}){pos_text}"
        failures = [_problem(c) for c in finding.checks if c.passed is False]
        missing = [_problem(c) for c in finding.checks if c.passed is None]
        problems = failures + missing
        return detail + ("; " + "; ".join(problems) if problems else "")


def _checks(
    params: Params, surface: Surface, where: str, acc: ArmAcceptance | None = None
) -> tuple[Check, ...]:
    """The thresholds on one surface; the arm's pooled checks may take per-position rates from any surface."""
    positions = surface if acc is None else acc.positions() or surface
    return tuple(
        _check(key, float(t), surface, positions, where)
        for key in CHECKS
        if (t := getattr(params, key)) is not None
    )


def _value(key: str, s: Surface, positions: Surface) -> float | None:
    last = None if not positions.per_position_rate else positions.per_position_rate[-1]
    values = {
        "min_drafted_tokens": None if s.draft_tokens is None else float(s.draft_tokens),
        "min_rate": s.rate,
        "min_lower_bound": s.ci_low,
        "min_last_position_rate": last,
        "max_wasted_fraction": None if s.rate is None else 1.0 - s.rate,
    }
    return values[key]


def _check(key: str, threshold: float, surface: Surface, positions: Surface, where: str) -> Check:
    value = _value(key, surface, positions)
    if value is None:
        return Check(key, threshold, None, None, where)
    if key == "min_lower_bound" and surface.too_small is not None:
        return Check(key, threshold, None, None, where, surface.too_small)
    ok = value <= threshold if key.startswith("max") else value >= threshold
    if not ok and _unsettled(key, threshold, surface, positions):
        small = positions.too_small if key == "min_last_position_rate" else None
        return Check(key, threshold, value, None, where, small)
    return Check(key, threshold, value, ok, where)


def _unsettled(key: str, threshold: float, surface: Surface, positions: Surface) -> bool:
    """A number below its minimum that the sample cannot settle: missing evidence, not a failure."""
    if key == "min_drafted_tokens":
        return True  # too small a sample
    if key == "min_lower_bound":
        # a lower bound below the minimum while the interval still reaches it is a sample too small
        # to prove the rate (few requests or windows make a wide interval), not a rate shown below it
        return surface.ci_high is not None and surface.ci_high >= threshold
    if key == "min_last_position_rate" and positions.per_position_high:
        # a rate below the minimum fails only when its whole interval is: the last position is tried
        # only when every earlier one was accepted, so its sample is the smallest of the round
        return positions.per_position_high[-1] >= threshold or positions.too_small is not None
    return False


def _problem(check: Check) -> str:
    label = LABELS[check.key] + (f" on {check.where}" if check.where else "")
    if check.too_small is not None:
        return f"{label} not proven: too small a sample for an interval ({check.too_small})"
    if check.value is None:
        return f"{label} not recorded"
    shown = f"{check.value:.0f}" if check.key == "min_drafted_tokens" else f"{check.value:.3f}"
    bound = "minimum" if check.key.startswith("min") else "maximum"
    threshold = int(check.threshold) if check.key == "min_drafted_tokens" else check.threshold
    unproven = check.passed is None and check.key in ("min_lower_bound", "min_last_position_rate")
    tail = " (its interval still reaches it: not proven; collect more windows)" if unproven else ""
    return f"{label} {shown} against the {bound} {threshold}{tail}"


KIND = StableAcceptance()
