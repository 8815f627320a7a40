"""faster_than_off: an arm beats its family's control beyond the floor at every selected cell."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from msgspec import Meta, Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Located, Nonneg, PositiveInt
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm, Metric
from mtpverdict.rules.kind import Finding, RuleKind, cell_label, comparison_text, selected_cells
from mtpverdict.stats import compare as cmp


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a faster_than_off rule."""

    metric: Metric = Metric.DECODE_TPS
    workloads: tuple[str, ...] | None = None
    concurrency: tuple[PositiveInt, ...] | None = None
    min_effect: Annotated[Nonneg, Meta(description="The smallest gain that counts (0.05 = +5%).")] = 0.0


@dataclass(frozen=True, slots=True)
class CellOutcome:
    """One cell's comparison and the outcome the rule gave it."""

    workload: str
    concurrency: int
    outcome: str
    comparison: cmp.Comparison


@dataclass(frozen=True, slots=True)
class FasterFinding(Finding):
    """The worst cell's ratio to off, and each cell's outcome (an intersection-union test)."""

    metric: str
    cells: tuple[CellOutcome, ...]


class FasterThanOff(RuleKind[Params, FasterFinding]):
    """Better than off at every selected cell; worse or equivalent at any fails; else unresolved."""

    name = "faster_than_off"
    params_type = Params
    summary = "the arm is faster than its family's control beyond the floor at every selected cell"

    def contradictions(self, params: Params) -> list[Located]:
        if params.metric is Metric.TTFT_MS:
            return [("metric", "ttft_ms is lower-is-better; use a ttft rule for latency")]
        return []

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> FasterFinding:
        metric = str(params.metric)
        compared = [
            (w, c, comp)
            for w, c in selected_cells(evidence, arm.name, metric, params.workloads, params.concurrency)
            if (comp := evidence.comparison(arm.name, w, c, metric)) is not None
        ]
        if not compared:
            return FasterFinding(RuleStatus.MISSING, None, 1.0 + params.min_effect, metric, ())
        cells = tuple(CellOutcome(w, c, _outcome(comp, params.min_effect), comp) for w, c, comp in compared)
        outcomes = [c.outcome for c in cells]
        if any(o in (cmp.WORSE, cmp.EQUIVALENT) for o in outcomes):
            status = RuleStatus.FAIL
        elif all(o == cmp.BETTER for o in outcomes):
            status = RuleStatus.PASS
        else:
            status = RuleStatus.INCONCLUSIVE
        worst = min(c.comparison.estimate for c in cells)
        return FasterFinding(status, math.exp(worst), 1.0 + params.min_effect, metric, cells)

    def render(self, finding: FasterFinding, arm: Arm) -> str:
        if not finding.cells:
            return f"{arm.name}: no {finding.metric} comparison with its control"
        parts = [
            f"{cell_label(c.workload, c.concurrency)} {c.outcome}: "
            + comparison_text(c.comparison, finding.metric)
            for c in finding.cells
        ]
        return f"{arm.name} vs off: " + "; ".join(parts)


def _outcome(comp: cmp.Comparison, min_effect: float) -> str:
    if comp.outcome == cmp.BETTER and min_effect > 0 and comp.estimate < math.log1p(min_effect):
        return cmp.INCONCLUSIVE
    return comp.outcome


KIND = FasterThanOff()
