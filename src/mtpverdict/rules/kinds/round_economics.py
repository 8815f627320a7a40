"""round_economics: what one speculative round costs in plain decode steps, against what it can return."""

from __future__ import annotations

import math
from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import PositiveInt
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind, cell_label, selected_cells
from mtpverdict.stats.acceptance import ArmAcceptance
from mtpverdict.stats.economics import RoundEconomics, round_economics

METRIC = "decode_tps"


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a round_economics rule."""

    workloads: tuple[str, ...] | None = None
    concurrency: tuple[PositiveInt, ...] | None = None


@dataclass(frozen=True, slots=True)
class EconomicsFinding(Finding):
    """Each cell's round economics; the worst cost in baseline steps is the value, k + 1 the bar."""

    cells: tuple[tuple[str, int, RoundEconomics], ...]
    missing: str | None


class RoundEconomicsKind(RuleKind[Params, EconomicsFinding]):
    """A round costing more baseline steps than the k + 1 tokens it can return at most fails."""

    name = "round_economics"
    params_type = Params
    summary = "a speculative round costs no more baseline decode steps than the k + 1 tokens it can return"

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> EconomicsFinding:
        if arm.spec.k is None:
            missing = "depth k not recorded: a round cannot be judged against k + 1"
            return EconomicsFinding(RuleStatus.MISSING, None, None, (), missing)
        acc = evidence.acceptance.get(arm.name)
        if acc is None or _length(acc, None) is None:
            return EconomicsFinding(
                RuleStatus.MISSING, None, None, (), "no mean acceptance length for round economics"
            )
        cells = []
        for workload, conc in selected_cells(
            evidence, arm.name, METRIC, params.workloads, params.concurrency
        ):
            mal = _cell_length(evidence, arm, workload, conc) or _length(acc, (workload, conc))
            mine, off = _levels(evidence, arm, workload, conc)
            econ = None if mal is None else round_economics(off, mine, mal, arm.spec.k)
            if econ is not None:
                cells.append((workload, conc, econ))
        if not cells:
            return EconomicsFinding(
                RuleStatus.MISSING, None, None, (), "no decode rates beside the control's"
            )
        worst = max(e.cost_in_baseline_steps for _, _, e in cells)
        exceeded = any(e.exceeds_max_return for _, _, e in cells)
        status = RuleStatus.FAIL if exceeded else RuleStatus.PASS
        return EconomicsFinding(status, worst, arm.spec.k + 1, tuple(cells), None)

    def render(self, finding: EconomicsFinding, arm: Arm) -> str:
        if finding.missing is not None:
            return f"{arm.name}: {finding.missing}"
        parts = []
        for workload, conc, econ in finding.cells:
            text = (
                f"{cell_label(workload, conc)}: step {econ.baseline_step_ms:.1f} ms, round "
                f"{econ.round_ms:.1f} ms, {econ.tokens_per_round:.2f} tokens/round, cost "
                f"{econ.cost_in_baseline_steps:.2f} baseline steps"
            )
            if econ.exceeds_max_return:
                text += f" > the {econ.max_tokens_per_round} tokens a round can return at most"
            parts.append(text)
        return f"{arm.name}: " + "; ".join(parts)


KIND = RoundEconomicsKind()


def _cell_length(evidence: Evidence, arm: Arm, workload: str, conc: int) -> float | None:
    """The mean acceptance length break-even measured at the cell (the windows that name it first):
    round economics and break-even are the same cost, so they read the same acceptance."""
    for w, c, found in evidence.break_even.get(arm.name, ()):
        if (w, c) == (workload, conc):
            return found.measured_length.value
    return None


def _length(acc: ArmAcceptance, cell: tuple[str, int] | None) -> float | None:
    """Mean acceptance length of the cell (its own windows, else its workload's), else the arm's."""
    if cell is not None:
        for surface in (acc.cell(*cell), acc.cell(cell[0], 0)):
            if surface is not None and surface.mean_acceptance_length:
                return surface.mean_acceptance_length
    if acc.primary is not None and acc.primary.mean_acceptance_length:
        return acc.primary.mean_acceptance_length
    return next((s.mean_acceptance_length for s in acc.surfaces if s.mean_acceptance_length), None)


def _levels(evidence: Evidence, arm: Arm, workload: str, conc: int) -> tuple[float, float]:
    """The arm's and the controls' decode rates as the comparison sees them: geometric means of boots."""
    mine = [v.log_value for v in evidence.values.of(arm.name, (workload, conc), METRIC)]
    off = [
        v.log_value
        for c in evidence.control_names(arm.family)
        for v in evidence.values.of(c, (workload, conc), METRIC)
    ]
    if not mine or not off:  # evidence without per-boot values (built without tables): cell medians
        arm_cell = evidence.cell(arm.name, workload, conc, METRIC)
        offs = [
            c.median
            for name in evidence.control_names(arm.family)
            if (c := evidence.cell(name, workload, conc, METRIC))
        ]
        return (arm_cell.median if arm_cell else math.nan), (
            math.exp(sum(map(math.log, offs)) / len(offs)) if offs else math.nan
        )
    return math.exp(sum(mine) / len(mine)), math.exp(sum(off) / len(off))
