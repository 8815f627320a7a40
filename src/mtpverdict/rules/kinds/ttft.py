"""ttft: time to first token under speculation stays within a stated regression of off's.

By default the ratio judged is the comparison's point estimate over boot medians; with `percentile`
(50, 90 or 99) it is judged boot by boot: each boot's own TTFT percentile, the arm's boots against its
family's controls' boots (stats/percentiles.py percentile_ratio), so a tail a median hides is bounded. A
cell passes when the ratio's upper one-sided 1 - alpha bound is within the limit, fails when its lower
bound is beyond it, and is inconclusive between them or when a boot has too few streams for the
percentile. Failing only keeps an arm off, so its bound is at the policy's own alpha at every look
(Policy.keep_off_level); passing, a step towards a promotion, is at the look's alpha.
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
from mtpverdict.stats.percentiles import percentile_ratio

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
    bounds: tuple[tuple[str, int, float, float], ...] = ()  # percentile: (workload, concurrency, low, high)
    unjudged: tuple[tuple[str, int, str], ...] = ()  # percentile: cells not judged, and why


class Ttft(RuleKind[Params, TtftFinding]):
    """The worst cell's TTFT ratio to off is at most 1 + max_regression."""

    name = "ttft"
    params_type = Params
    summary = "time to first token stays within 1 + max_regression of off's"

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> TtftFinding:
        limit = 1.0 + params.max_regression
        cells = selected_cells(evidence, arm.name, METRIC, params.workloads, params.concurrency)
        q = params.percentile
        if q is not None:
            return self._percentile(evidence, arm, cells, q, limit)
        ratios = tuple(
            (w, c, math.exp(comp.estimate))
            for w, c in cells
            if (comp := evidence.comparison(arm.name, w, c, METRIC)) is not None
        )
        if not ratios:
            return TtftFinding(RuleStatus.MISSING, None, limit, (), q)
        worst = max(0.0, *(r for _, _, r in ratios))
        return TtftFinding(RuleStatus.FAIL if worst > limit else RuleStatus.PASS, worst, limit, ratios, q)

    def _percentile(
        self, evidence: Evidence, arm: Arm, cells: list[tuple[str, int]], q: int, limit: float
    ) -> TtftFinding:
        """Each cell's boot-level percentile ratio against the limit (module docstring)."""
        ratios: list[tuple[str, int, float]] = []
        bounds: list[tuple[str, int, float, float]] = []
        unjudged: list[tuple[str, int, str]] = []
        failed = False
        for w, c in cells:
            mine = evidence.latency.arms.get((arm.name, w, c, METRIC))
            off = evidence.latency.controls.get((arm.family, w, c, METRIC))
            if mine is None or off is None:
                continue
            found = percentile_ratio(mine, off, q, evidence.policy.alpha)
            if isinstance(found, str):
                unjudged.append((w, c, found))
                continue
            ratios.append((w, c, found.ratio))
            bounds.append((w, c, found.low, found.high))
            over = percentile_ratio(mine, off, q, evidence.policy.keep_off_level)
            if not isinstance(over, str) and over.low > limit:
                failed = True  # above the limit only keeps the arm off: the policy's alpha, every look
        if not ratios and not unjudged:
            return TtftFinding(RuleStatus.MISSING, None, limit, (), q)
        if failed or any(low > limit for _, _, low, _ in bounds):
            status = RuleStatus.FAIL
        elif unjudged or any(high > limit for _, _, _, high in bounds):
            status = RuleStatus.INCONCLUSIVE
        else:
            status = RuleStatus.PASS
        worst = max((r for _, _, r in ratios), default=None)
        return TtftFinding(status, worst, limit, tuple(ratios), q, tuple(bounds), tuple(unjudged))

    def render(self, finding: TtftFinding, arm: Arm) -> str:
        q = finding.percentile
        if not finding.ratios and not finding.unjudged:
            return f"{arm.name}: no TTFT " + ("comparison" if q is None else f"p{q}") + " with its control"
        if q is None:
            cells = ", ".join(f"{cell_label(w, c)} {r:.2f}x" for w, c, r in finding.ratios)
            detail = f"{arm.name}: TTFT ratio to off (geometric mean of boot medians): {cells}"
        else:
            parts = [
                f"{cell_label(w, c)} {r:.2f}x [{low:.2f}, {high:.2f}]"
                for (w, c, r), (_, _, low, high) in zip(finding.ratios, finding.bounds, strict=True)
            ]
            parts += [f"{cell_label(w, c)} not judged ({why})" for w, c, why in finding.unjudged]
            detail = f"{arm.name}: TTFT p{q} ratio to off (boots' p{q}, one-sided bounds): " + ", ".join(
                parts
            )
        if finding.status is RuleStatus.FAIL:
            detail += f"; above the {finding.threshold:.2f}x limit"
        elif finding.status is RuleStatus.INCONCLUSIVE:
            detail += f"; not shown within the {finding.threshold:.2f}x limit"
        return detail


KIND = Ttft()
