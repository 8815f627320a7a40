"""beats_target: an arm's speed (median of its runs, or a lower bound) clears an absolute target."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

from msgspec import Meta, Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Located, Nonneg, PositiveInt
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm, Metric
from mtpverdict.rules.kind import Finding, RuleKind, cell_label, fmt, selected_cells
from mtpverdict.stats.runs import METRIC_UNITS


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a beats_target rule."""

    target: Annotated[Nonneg, Meta(description="The bar every selected cell must clear.")]
    metric: Metric = Metric.DECODE_TPS
    workloads: tuple[str, ...] | None = None
    concurrency: tuple[PositiveInt, ...] | None = None
    floor: Annotated[Nonneg | None, Meta(description="A lower bar, reported beside the target.")] = None
    statistic: Annotated[
        Literal["median", "lower_bound"], Meta(description="median of runs, or their one-sided lower bound")
    ] = "median"


@dataclass(frozen=True, slots=True)
class CellValue:
    """The value judged at one cell and how it was obtained."""

    workload: str
    concurrency: int
    value: float
    what: str  # "median of 3 runs" or "one-sided 95% lower bound over runs"


@dataclass(frozen=True, slots=True)
class TargetFinding(Finding):
    """The worst cell's value against the target, and every cell's value."""

    metric: str
    floor: float | None
    cells: tuple[CellValue, ...]
    missing: str | None  # why no value could be judged


class BeatsTarget(RuleKind[Params, TargetFinding]):
    """Every selected cell's median (or lower bound over runs) reaches the target."""

    name = "beats_target"
    params_type = Params
    summary = "the arm's speed at the rule's cells clears an absolute target (and is compared with a floor)"
    reported_for_controls = True

    def contradictions(self, params: Params) -> list[Located]:
        out: list[Located] = []
        if params.floor is not None and params.floor > params.target:
            out.append(
                ("floor", f"floor {params.floor} exceeds target {params.target}; the floor is the lower bar")
            )
        if params.metric is Metric.TTFT_MS:
            out.append(("metric", "ttft_ms is lower-is-better; use a ttft rule for latency"))
        return out

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> TargetFinding:
        metric = str(params.metric)
        cells = selected_cells(evidence, arm.name, metric, params.workloads, params.concurrency)
        values: list[CellValue] = []
        short: list[str] = []  # cells with too few runs for a lower bound
        for workload, conc in cells:
            found = _cell_value(evidence, arm.name, workload, conc, params)
            if found is None:
                short.append(cell_label(workload, conc))
            else:
                values.append(found)
        worst = min((v.value for v in values), default=None)
        if worst is not None and worst < params.target:  # a known failure outranks missing evidence
            return TargetFinding(
                RuleStatus.FAIL, worst, params.target, metric, params.floor, tuple(values), None
            )
        if not cells:
            missing = f"no {metric} measured at the rule's cells"
        elif short:
            missing = f"too few runs at {', '.join(short)} for a lower bound"
        else:
            assert worst is not None
            return TargetFinding(
                RuleStatus.PASS, worst, params.target, metric, params.floor, tuple(values), None
            )
        return TargetFinding(
            RuleStatus.MISSING, None, params.target, metric, params.floor, tuple(values), missing
        )

    def render(self, finding: TargetFinding, arm: Arm) -> str:
        if finding.status is RuleStatus.MISSING:
            return f"{arm.name}: {finding.missing}"
        target = float(finding.threshold)  # type: ignore[arg-type]
        unit = METRIC_UNITS[finding.metric]
        parts = []
        for v in finding.cells:
            clears = []
            if finding.floor is not None:
                clears.append(
                    f"{'clears' if v.value >= finding.floor else 'misses'} the {fmt(finding.floor)} floor"
                )
            clears.append(f"{'clears' if v.value >= target else 'misses'} the {fmt(target)} target")
            parts.append(
                f"{fmt(v.value, unit)} ({v.what}, {cell_label(v.workload, v.concurrency)}) "
                + " and ".join(clears)
            )
        return f"{arm.name}: " + "; ".join(parts)


def _cell_value(evidence: Evidence, arm: str, workload: str, conc: int, params: Params) -> CellValue | None:
    """The value a cell is judged by (median, or lower bound over runs); None when too few runs."""
    cell = evidence.cell(arm, workload, conc, str(params.metric))
    assert cell is not None
    if params.statistic == "median":
        return CellValue(workload, conc, cell.median, f"median of {cell.n} run{'s' if cell.n != 1 else ''}")
    low = _lower_bound(evidence, arm, workload, conc, str(params.metric))
    if low is None:
        return None
    level = f"{(1 - evidence.policy.alpha) * 100:.4g}%"
    return CellValue(workload, conc, low, f"one-sided {level} lower bound over runs")


def _lower_bound(evidence: Evidence, arm: str, workload: str, conc: int, metric: str) -> float | None:
    """One-sided (1 - alpha) t lower bound of the geometric mean over a cell's runs."""
    from mtpverdict.stats import tdist

    cell = evidence.cell(arm, workload, conc, metric)
    if cell is None or cell.n < 2 or not cell.runs_known:
        return None
    logs = [math.log(v) for v in cell.values]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    t = float(tdist.t_ppf(1 - evidence.policy.alpha, len(logs) - 1))
    return math.exp(mean - t * sd / math.sqrt(len(logs)))


KIND = BeatsTarget()
