"""round_economics: what one speculative round costs in plain decode steps, against what it can return."""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import PositiveInt
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind, cell_label, selected_cells
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
        acc = evidence.acceptance.get(arm.name)
        mal = None if acc is None or acc.primary is None else acc.primary.mean_acceptance_length
        if mal is None and acc is not None:
            mal = next((s.mean_acceptance_length for s in acc.surfaces if s.mean_acceptance_length), None)
        if arm.spec.k is None:
            return EconomicsFinding(
                RuleStatus.MISSING,
                None,
                None,
                (),
                "depth k not recorded: a round cannot be judged against k + 1",
            )
        if mal is None:
            return EconomicsFinding(
                RuleStatus.MISSING, None, None, (), "no mean acceptance length for round economics"
            )
        controls = evidence.control_names(arm.family)
        cells = []
        for workload, conc in selected_cells(
            evidence, arm.name, METRIC, params.workloads, params.concurrency
        ):
            mine = evidence.cell(arm.name, workload, conc, METRIC)
            off_vals = [
                o.median for c in controls if (o := evidence.cell(c, workload, conc, METRIC)) is not None
            ]
            if mine is None or not off_vals:
                continue
            econ = round_economics(sorted(off_vals)[len(off_vals) // 2], mine.median, mal, arm.spec.k)
            if econ is not None:
                cells.append((workload, conc, econ))
        if not cells:
            return EconomicsFinding(
                RuleStatus.MISSING, None, None, (), "no decode rates beside the control's"
            )
        worst = max(e.cost_in_baseline_steps for _, _, e in cells)
        exceeded = any(e.exceeds_max_return for _, _, e in cells)
        threshold = None if arm.spec.k is None else arm.spec.k + 1
        return EconomicsFinding(
            RuleStatus.FAIL if exceeded else RuleStatus.PASS, worst, threshold, tuple(cells), None
        )

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
