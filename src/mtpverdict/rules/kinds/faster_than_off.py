"""faster_than_off: an arm beats its family's control beyond min_effect at every cell of the design."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from msgspec import Meta, Struct

from mtpverdict._text import outcome_word, pct
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Fraction, Located, PositiveInt
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm, Metric
from mtpverdict.rules.kind import Finding, RuleKind, cell_label, comparison_text, design_cells
from mtpverdict.stats.procedure import ArmOutcome, CellComparison, Outcome, Why
from mtpverdict.stats.runs import HIGHER_IS_BETTER
from mtpverdict.stats.tdist import t_ppf


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a faster_than_off rule."""

    metric: Metric = Metric.DECODE_TPS
    workloads: tuple[str, ...] | None = None
    concurrency: tuple[PositiveInt, ...] | None = None
    min_effect: Annotated[
        Fraction | None,
        Meta(description="The smallest gain that counts (0.05 = +5%); default: the equivalence margin."),
    ] = None


@dataclass(frozen=True, slots=True)
class FasterFinding(Finding):
    """The arm's combined outcome over the rule's cells (value: its worst cell's ratio to off)."""

    metric: str
    outcome: ArmOutcome | None
    min_effect: float
    futility: bool = False  # below_min_effect by the futility interval alone (not the corrected test)
    keep_off_level: float = 0.05  # that interval's one-sided level (the policy's alpha)


class FasterThanOff(RuleKind[Params, FasterFinding]):
    """Better than off at every cell of the design (intersection-union, Holm across the family's arms).

    Equivalent to off (within the equivalence margin), worse at some cell, or not better by min_effect
    (the interval's upper bound below it at some cell: a futility decision) fails; a cell the arm
    never measured, a cell without a credible variance, or one boot carrying the gain leaves it
    unresolved, with the reason.
    """

    name = "faster_than_off"
    params_type = Params
    summary = "the arm is faster than its family's control beyond min_effect at every cell of the design"

    def contradictions(self, params: Params) -> list[Located]:
        if params.metric is Metric.TTFT_MS:
            return [("metric", "ttft_ms is lower-is-better; use a ttft rule for latency")]
        return []

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> FasterFinding:
        metric = str(params.metric)
        cells = design_cells(evidence, arm, metric, params.workloads, params.concurrency)
        min_effect = evidence.policy.equivalence_margin if params.min_effect is None else params.min_effect
        bar = 1.0 + min_effect
        found = evidence.arm_outcome(arm.name, metric, cells, min_effect) if cells else None
        if found is None or not found.cells:
            return FasterFinding(RuleStatus.MISSING, None, bar, metric, found, min_effect)
        worst = min(c.estimate for c in found.cells if math.isfinite(c.estimate))
        status = {
            Outcome.BETTER: RuleStatus.PASS,
            Outcome.WORSE: RuleStatus.FAIL,
            Outcome.EQUIVALENT: RuleStatus.FAIL,
            Outcome.BELOW_MIN_EFFECT: RuleStatus.FAIL,
        }.get(found.outcome, RuleStatus.INCONCLUSIVE)
        futility = (
            found.outcome is Outcome.BELOW_MIN_EFFECT
            and not found.p_below_min_effect_holm < evidence.policy.alpha
        )
        level = evidence.policy.keep_off_level
        return FasterFinding(status, math.exp(worst), bar, metric, found, min_effect, futility, level)

    def render(self, finding: FasterFinding, arm: Arm) -> str:
        found = finding.outcome
        if found is None or not found.cells:
            return f"{arm.name}: no {finding.metric} comparison with its control"
        # the arm's outcome needs every cell (intersection-union); a cell's outcome is that cell alone,
        # Holm across every depth and cell, so an interval clearing off can still be unresolved there
        head = f"{arm.name} vs off, every cell together: {outcome_word(found.outcome)}"
        why = _futility(found, finding) if finding.futility else _why(found, finding.min_effect)
        parts = [
            f"{cell_label(c.cell[0], c.cell[1])} alone {_cell_word(c)}: " + comparison_text(c, finding.metric)
            for c in found.cells
        ]
        parts += [f"{cell_label(w, c)}: not measured" for w, c in found.missing_cells]
        return f"{head} ({why}); " + "; ".join(parts)


def _cell_word(c: CellComparison) -> str:
    if c.cell_outcome is Outcome.INCONCLUSIVE and (c.ci_low > 0 or c.ci_high < 0):
        return "not significant after Holm"  # its own interval clears off; Holm's correction does not
    return outcome_word(c.cell_outcome)


def _futility(found: ArmOutcome, finding: FasterFinding) -> str:
    """The futility decision in words: the cells whose interval's upper bound is below the bar."""
    shift = math.log1p(finding.min_effect)
    sign = 1.0 if HIGHER_IS_BETTER[finding.metric] else -1.0
    below = []
    for c in found.cells:
        # the upper bound of the gain at the futility level, then shown in the metric's own sign
        gain = sign * c.estimate + float(t_ppf(1 - finding.keep_off_level, c.df)) * c.se
        if math.isfinite(gain) and gain < shift:
            below.append((c, sign * gain))
    where = ", ".join(f"{cell_label(c.cell[0], c.cell[1])} {pct(bound)}" for c, bound in below)
    interval = f"{1 - 2 * finding.keep_off_level:.0%} interval"
    return (
        f"not better by +{finding.min_effect:.1%}: the {interval}'s upper bound is below it at some cell "
        f"({where}); a futility decision that keeps the arm off and never promotes one"
    )


def _why(found: ArmOutcome, min_effect: float) -> str:
    bar = f"+{min_effect:.1%}"
    p = f"Holm-adjusted p {found.p_better_holm:.3g}"
    texts = {
        Why.RESOLVED: {
            Outcome.BETTER: f"beyond {bar} at every cell, {p}, still with any one boot left out",
            Outcome.EQUIVALENT: "within the equivalence margin at every cell: no practical effect",
            Outcome.WORSE: "slower than off at some cell",
            Outcome.BELOW_MIN_EFFECT: f"shown below {bar} at some cell",
        }.get(found.outcome, "resolved"),
        Why.MISSING_CELL: "a cell of the design was not measured: 'every cell' cannot hold",
        Why.UNKNOWN_VARIANCE: "a cell has no credible boot-to-boot variance",
        Why.ONE_BOOT_CARRIES: (
            f"one boot carries the gain: without {found.loo_boot} its p-value is {found.loo_p:.3g}"
        ),
        Why.NOT_RESOLVED: f"not resolved beyond {bar} ({p})",
    }
    return texts[found.why]


KIND = FasterThanOff()
