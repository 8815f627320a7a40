"""ttft: time to first token under speculation stays within a stated regression of off's."""

from __future__ import annotations

import math
from dataclasses import dataclass

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
    workloads: tuple[str, ...] | None = None
    concurrency: tuple[PositiveInt, ...] | None = None


@dataclass(frozen=True, slots=True)
class TtftFinding(Finding):
    """The TTFT ratio to off per cell (geometric mean of boot medians) and the worst of them."""

    ratios: tuple[tuple[str, int, float], ...]  # (workload, concurrency, ratio)


class Ttft(RuleKind[Params, TtftFinding]):
    """The worst cell's TTFT ratio to off is at most 1 + max_regression."""

    name = "ttft"
    params_type = Params
    summary = "time to first token stays within 1 + max_regression of off's"

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> TtftFinding:
        limit = 1.0 + params.max_regression
        ratios = tuple(
            (w, c, math.exp(comp.estimate))
            for w, c in selected_cells(evidence, arm.name, METRIC, params.workloads, params.concurrency)
            if (comp := evidence.comparison(arm.name, w, c, METRIC)) is not None
        )
        if not ratios:
            return TtftFinding(RuleStatus.MISSING, None, limit, ())
        worst = max(0.0, *(r for _, _, r in ratios))
        return TtftFinding(RuleStatus.FAIL if worst > limit else RuleStatus.PASS, worst, limit, ratios)

    def render(self, finding: TtftFinding, arm: Arm) -> str:
        if not finding.ratios:
            return f"{arm.name}: no TTFT comparison with its control"
        cells = ", ".join(f"{cell_label(w, c)} {r:.2f}x" for w, c, r in finding.ratios)
        detail = f"{arm.name}: TTFT ratio to off (geometric mean of boot medians): {cells}"
        if finding.status is RuleStatus.FAIL:
            detail += f"; above the {finding.threshold:.2f}x limit"
        return detail


KIND = Ttft()
