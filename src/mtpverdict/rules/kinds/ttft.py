"""ttft: time to first token under speculation stays within a stated regression of off's.

By default the ratio judged is the comparison's point estimate over boot medians; with `percentile`
(50, 90 or 99) it is the arm's TTFT percentile over its streams at the cell against the same percentile
of its family's controls' streams pooled (stats/percentiles.py), so a tail a median hides is bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Nonneg, PositiveInt
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind, cell_label, selected_cells

METRIC = "ttft_ms"


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a ttft rule."""

    max_regression: Nonneg
    percentile: Literal[50, 90, 99] | None = None
    workloads: tuple[str, ...] | None = None
    concurrency: tuple[PositiveInt, ...] | None = None


@dataclass(frozen=True, slots=True)
class TtftFinding(Finding):
    """The TTFT ratio to off per cell (geometric mean of boot medians) and the worst of them."""

    ratios: tuple[tuple[str, int, float], ...]  # (workload, concurrency, ratio)
    percentile: int | None = None  # the TTFT percentile compared; None: the boot medians' estimate


class Ttft(RuleKind[Params, TtftFinding]):
    """The worst cell's TTFT ratio to off is at most 1 + max_regression."""

    name = "ttft"
    params_type = Params
    summary = "time to first token stays within 1 + max_regression of off's"

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> TtftFinding:
        limit = 1.0 + params.max_regression
        cells = selected_cells(evidence, arm.name, METRIC, params.workloads, params.concurrency)
        q = params.percentile
        if q is None:
            ratios = tuple(
                (w, c, math.exp(comp.estimate))
                for w, c in cells
                if (comp := evidence.comparison(arm.name, w, c, METRIC)) is not None
            )
        else:
            ratios = tuple(
                (w, c, mine.percentile(q) / off.percentile(q))
                for w, c in cells
                if (mine := evidence.latency.arms.get((arm.name, w, c, METRIC))) is not None
                and (off := evidence.latency.controls.get((arm.family, w, c, METRIC))) is not None
                and off.percentile(q) > 0
            )
        if not ratios:
            return TtftFinding(RuleStatus.MISSING, None, limit, (), q)
        worst = max(0.0, *(r for _, _, r in ratios))
        return TtftFinding(RuleStatus.FAIL if worst > limit else RuleStatus.PASS, worst, limit, ratios, q)

    def render(self, finding: TtftFinding, arm: Arm) -> str:
        q = finding.percentile
        if not finding.ratios:
            return f"{arm.name}: no TTFT " + ("comparison" if q is None else f"p{q}") + " with its control"
        cells = ", ".join(f"{cell_label(w, c)} {r:.2f}x" for w, c, r in finding.ratios)
        how = "geometric mean of boot medians" if q is None else f"p{q} over streams, controls pooled"
        detail = f"{arm.name}: TTFT ratio to off ({how}): {cells}"
        if finding.status is RuleStatus.FAIL:
            detail += f"; above the {finding.threshold:.2f}x limit"
        return detail


KIND = Ttft()
