"""Selection among eligible arms: the fastest, the boring one (smallest depth in tolerance), a reference."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from mtpverdict._text import pct
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import DecisionKind
from mtpverdict.formats.policy import Fallback, SelectionMode
from mtpverdict.formats.results import Arm
from mtpverdict.stats.procedure import BootValue, CellComparison, Outcome, family_procedure
from mtpverdict.stats.runs import HIGHER_IS_BETTER

Cell = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Selection:
    """The arm selected (or none), what the decision becomes, and the sentence saying why."""

    arm: Arm | None
    decision: DecisionKind
    note: str


def select(evidence: Evidence, eligible: Sequence[Arm], mode: SelectionMode | Fallback) -> Selection:
    """Pick among eligible arms by the policy's selection mode."""
    metric = str(evidence.policy.selection.metric)
    cell = _selection_cell(evidence, eligible)
    if cell is None:
        return Selection(
            None, DecisionKind.INCONCLUSIVE, f"no eligible arm has {metric} at the selection cell"
        )
    ranked = _rank(evidence, eligible, cell)
    if not ranked:
        return Selection(
            None, DecisionKind.INCONCLUSIVE, f"no eligible arm has {metric} at {cell[0]} c={cell[1]}"
        )
    if mode == SelectionMode.FASTEST:
        return _fastest(evidence, ranked, cell)
    if mode == SelectionMode.BORING:
        return _boring(evidence, ranked, cell)
    return _reference(evidence, eligible, ranked, cell)


def _where(evidence: Evidence, cell: Cell) -> str:
    return f"{evidence.policy.selection.metric} at {cell[0]} c={cell[1]}"


def _selection_cell(evidence: Evidence, arms: Sequence[Arm]) -> Cell | None:
    selection = evidence.policy.selection
    metric = str(selection.metric)
    keys = sorted({(c.workload, c.concurrency) for a in arms for c in evidence.arm_cells(a.name, metric)})
    if selection.workload is not None:
        keys = [k for k in keys if k[0] == selection.workload]
    if selection.concurrency is not None:
        keys = [k for k in keys if k[1] == selection.concurrency]
    if not keys:
        return None
    order = {w.id: i for i, w in enumerate(evidence.campaign.workloads)}
    return min(keys, key=lambda k: (order.get(k[0], 999), k[1]))


def _rank(evidence: Evidence, arms: Sequence[Arm], cell: Cell) -> list[tuple[Arm, float]]:
    metric = str(evidence.policy.selection.metric)
    higher = HIGHER_IS_BETTER[metric]
    ranked = [
        (a, found.median)
        for a in arms
        if (found := evidence.cell(a.name, cell[0], cell[1], metric)) is not None
    ]
    return sorted(ranked, key=lambda av: (-av[1] if higher else av[1], av[0].order, av[0].name))


def _fastest(evidence: Evidence, ranked: list[tuple[Arm, float]], cell: Cell) -> Selection:
    best, best_value = ranked[0]
    where = _where(evidence, cell)
    text = f"selection fastest: {best.name} is the fastest eligible arm ({best_value:.1f}, {where})"
    if len(ranked) > 1:
        runner = ranked[1][0]
        lead = _versus(evidence, [best], runner, cell)
        if lead and lead[0][1].cell_outcome is Outcome.BETTER:
            text += f"; its lead over {runner.name} ({pct(lead[0][1].estimate)}) is resolved"
        else:
            est = pct(math.log(best_value / ranked[1][1]))
            text += (
                f"; its lead over {runner.name} ({est}) is not resolved beyond the floor, so the "
                "two are not told apart by this evidence"
            )
    return Selection(best, DecisionKind.PROMOTE, text)


def _boring(evidence: Evidence, ranked: list[tuple[Arm, float]], cell: Cell) -> Selection:
    selection = evidence.policy.selection
    best, best_value = ranked[0]
    higher = HIGHER_IS_BETTER[str(selection.metric)]
    tol = selection.tolerance
    within = [
        a for a, v in ranked if (v >= best_value * (1 - tol) if higher else v <= best_value * (1 + tol))
    ]
    pick = min(within, key=_k_key)
    value = next(v for a, v in ranked if a is pick)
    text = (
        f"selection boring: {pick.name} is the smallest depth within {tol * 100:.0f}% of the fastest "
        f"eligible arm {best.name} ({value:.1f} vs {best_value:.1f}, {_where(evidence, cell)})"
    )
    return Selection(pick, DecisionKind.PROMOTE, text)


def _k_key(arm: Arm) -> tuple[int, int]:
    return (arm.spec.k if arm.spec.k is not None else 10**6, arm.order)


def _reference(
    evidence: Evidence, eligible: Sequence[Arm], ranked: list[tuple[Arm, float]], cell: Cell
) -> Selection:
    selection = evidence.policy.selection
    ref_name = selection.reference
    reference = next((a for a in eligible if a.name == ref_name), None)
    if reference is None:
        if selection.fallback is Fallback.INCONCLUSIVE:
            note = f"the reference {ref_name} is not eligible and the policy has no fallback"
            return Selection(None, DecisionKind.INCONCLUSIVE, note)
        found = select(evidence, eligible, selection.fallback)
        note = f"the reference {ref_name} is not eligible; fallback {selection.fallback}: {found.note}"
        return Selection(found.arm, found.decision, note)
    versus = _versus(evidence, [a for a, _ in ranked if a is not reference], reference, cell)
    better = [(a, c) for a, c in versus if c.cell_outcome is Outcome.BETTER]
    if better:
        winner, comp = max(better, key=lambda ac: ac[1].estimate)
        note = (
            f"selection reference: {winner.name} is faster than the reference {reference.name} beyond the "
            f"floor ({pct(comp.estimate)}, {_where(evidence, cell)}) and stable; it replaces the reference"
        )
        return Selection(winner, DecisionKind.PROMOTE, note)
    notes = [_not_resolved(arm, comp, reference) for arm, comp in versus if comp.estimate > 0]
    text = f"selection reference: keep {reference.name}"
    if notes:
        text += "; " + "; ".join(notes)
    return Selection(reference, DecisionKind.KEEP_REFERENCE, text)


def _not_resolved(arm: Arm, comp: CellComparison, reference: Arm) -> str:
    if not math.isfinite(comp.floor_first):
        why = (
            f"no interval can be drawn ({comp.variance_reason}), so the difference cannot be told from "
            "boot-to-boot noise"
        )
    else:
        why = f"not resolved beyond the {pct(comp.floor_first)} floor"
    return f"{arm.name} is {pct(comp.estimate)} over {reference.name} but {why}"


def _versus(
    evidence: Evidence, challengers: Sequence[Arm], reference: Arm, cell: Cell
) -> list[tuple[Arm, CellComparison]]:
    """Each challenger against the reference arm at the selection cell: the family procedure with the
    reference in the controls' place (each arm's own boot variance, Holm across the challengers)."""
    policy = evidence.policy
    metric = str(policy.selection.metric)
    plain = {
        a.name: [
            BootValue(v.arm, v.boot, v.order, v.log_value) for v in evidence.values.of(a.name, cell, metric)
        ]
        for a in (*challengers, reference)
    }
    present = [a for a in challengers if plain[a.name]]
    if not plain[reference.name] or not present:
        return []
    found = family_procedure(
        {cell: plain[reference.name]},
        {a.name: {cell: plain[a.name]} for a in present},
        (cell,),
        alpha=policy.alpha,
        equivalence_margin=policy.equivalence_margin,
        higher_is_better=HIGHER_IS_BETTER[metric],
    )
    out = []
    for arm in present:
        outcome = found.arm(arm.name)
        comp = outcome.cell(cell)
        if comp is not None:
            out.append((arm, dataclasses.replace(comp, cell_outcome=outcome.outcome)))
    return out
