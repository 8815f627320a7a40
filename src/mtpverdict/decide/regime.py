"""The regime map: each depth against off at each (workload, concurrency) cell, and the best-supported depth.

The map reads the family procedure's per-cell outcomes (stats/procedure.py: each (arm, cell) on its
own, Holm across every (arm, cell) comparison of the family), so its multiplicity is the family's. The
best-supported depth at a group of cells (one cell for the map; every workload at one concurrency for a
schedule) is the boring choice among the depths better than off at every cell of the group:
- none better: speculation off (resolved when every depth is shown worse, equivalent or below
  min_effect there; otherwise off is kept because nothing is resolved);
- one: that depth;
- several: the smallest, unless a deeper one is better than it beyond the floor (the family procedure
  with the smallest in the controls' place: intersection-union over the group's cells, Holm across the
  deeper depths, at alpha / m where m is the number of groups needing this step: Bonferroni, so these
  extra comparisons are counted too); then the deeper one with the largest estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mtpverdict._logscale import change, ratio
from mtpverdict._text import cell_label, pct
from mtpverdict.engines.spec import CONFIG_FLAG
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RegimeCell, RegimeDepth, finite
from mtpverdict.formats.results import Arm
from mtpverdict.serveconfig import ServeSpec, extract_spec
from mtpverdict.stats.procedure import BootValue, CellComparison, FamilyOutcome, Outcome, family_procedure
from mtpverdict.stats.runs import HIGHER_IS_BETTER

Cell = tuple[str, int]
SETTLED = (Outcome.WORSE, Outcome.EQUIVALENT, Outcome.BELOW_MIN_EFFECT)  # shown not better than off
NOT_COMPARED = "not_compared"
SHOWN_STATES = 8  # depths a cell's reason lists before "N more" (the map itself holds every depth)


@dataclass(frozen=True, slots=True)
class Choice:
    """The depth chosen at a group of cells against a baseline, and why."""

    arm: Arm | None  # None: the baseline
    resolved: bool  # the choice rests on resolved comparisons
    supported: tuple[Arm, ...]  # the arms better than the baseline at every cell of the group
    why: str

    @property
    def k(self) -> int:
        return 0 if self.arm is None else depth(self.arm)


def depth(arm: Arm) -> int:
    """An arm's depth (0 for a control; an unrecorded depth counts as 0 and is never scheduled)."""
    return arm.spec.k or 0


def where(cell: Cell) -> str:
    return cell_label(cell[0], cell[1])


def interval(comp: CellComparison) -> str:
    """`+30.6% [+24.0%, +37.5%]`: the estimate and its interval, as gains."""
    if not math.isfinite(comp.ci_low):
        return pct(comp.estimate)
    return f"{pct(comp.estimate)} [{pct(comp.ci_low)}, {pct(comp.ci_high)}]"


def served_specs(evidence: Evidence) -> dict[str, ServeSpec]:
    """Each speculating arm's served config: its campaign argv, else its first boot's that reads."""
    argvs: dict[str, list[tuple[str, ...]]] = {
        a.name: [a.serve_argv] for a in evidence.campaign.arms if a.serve_argv
    }
    boots = evidence.tables.results.boots
    if len(boots):
        for name, argv in zip(boots["arm"], boots["argv"], strict=True):
            if isinstance(argv, list | tuple) and argv:
                argvs.setdefault(str(name), []).append(tuple(argv))
    out = {}
    for name, found in argvs.items():
        for argv in found:
            spec = extract_spec(list(argv))
            if isinstance(spec, ServeSpec) and not spec.off:
                out[name] = spec
                break
    return out


def served_spec(evidence: Evidence, arm: Arm) -> ServeSpec | None:
    """The speculative config one arm was served with (see served_specs)."""
    return served_specs(evidence).get(arm.name)


def schedule_arms(evidence: Evidence) -> frozenset[str]:
    """Arms served with a per-batch-size schedule: each confirms a schedule, none is one depth."""
    return frozenset(name for name, spec in served_specs(evidence).items() if spec.schedule)


# ---------------------------------------------------------------------------------------------------
# the choice at a group of cells


def better_everywhere(evidence: Evidence, arm: Arm, cells: Sequence[Cell], metric: str) -> bool:
    """Whether the family procedure calls the arm better than off at every cell of the group."""
    found = [evidence.comparison(arm.name, w, c, metric) for w, c in cells]
    return bool(found) and all(f is not None and f.cell_outcome is Outcome.BETTER for f in found)


def supported(evidence: Evidence, arms: Sequence[Arm], cells: Sequence[Cell], metric: str) -> tuple[Arm, ...]:
    """The arms better than off at every cell of the group, smallest depth first."""
    found = [a for a in arms if depth(a) > 0 and better_everywhere(evidence, a, cells, metric)]
    return tuple(sorted(found, key=lambda a: (depth(a), a.order)))


def choose(
    evidence: Evidence,
    arms: Sequence[Arm],
    cells: Sequence[Cell],
    metric: str,
    alpha_pair: float,
) -> Choice:
    """The best-supported depth against off at a group of cells (module docstring)."""
    better = supported(evidence, arms, cells, metric)
    if not better:
        return _off(evidence, arms, cells, metric)
    lowest = better[0]
    if len(better) == 1:
        return Choice(
            lowest,
            True,
            better,
            f"{lowest.name} is better than off ({_numbers(evidence, lowest, cells, metric)})",
        )
    deeper = versus(evidence, lowest, better[1:], cells, metric, alpha_pair)
    names = ", ".join(a.name for a in better)
    won = strongest_better(deeper)
    if won is not None:
        pick, est = won
        why = (
            f"{names} are better than off; {pick.name} is better than {lowest.name} beyond the floor "
            f"({pct(est)}, alpha {alpha_pair:.3g})"
        )
        return Choice(pick, True, better, why)
    lead = ", ".join(f"{a.name} {pct(est)}" for a, est, _ in deeper)
    why = (
        f"{names} are better than off; no deeper depth is resolved better than {lowest.name} "
        f"({lead} over it): {lowest.name}, the smaller depth"
    )
    return Choice(lowest, False, better, why)


def _numbers(evidence: Evidence, arm: Arm, cells: Sequence[Cell], metric: str) -> str:
    parts = []
    for cell in cells:
        comp = evidence.comparison(arm.name, cell[0], cell[1], metric)
        if comp is not None:
            parts.append(f"{interval(comp)} at {where(cell)}" if len(cells) > 1 else interval(comp))
    return ", ".join(parts)


def _off(evidence: Evidence, arms: Sequence[Arm], cells: Sequence[Cell], metric: str) -> Choice:
    """Off: resolved when every depth is shown not better at some cell of the group."""
    states = []
    resolved = True
    for arm in arms:
        if depth(arm) == 0:
            continue
        found = [(c, evidence.comparison(arm.name, c[0], c[1], metric)) for c in cells]
        shown = [(c, f) for c, f in found if f is not None and f.cell_outcome in SETTLED]
        if shown:
            cell, comp = shown[0]
            at = f" at {where(cell)}" if len(cells) > 1 else ""
            states.append(f"{arm.name} {comp.cell_outcome}{at} ({interval(comp)})")
            continue
        resolved = False
        comps = [(c, f) for c, f in found if f is not None]
        if not comps:
            states.append(f"{arm.name} not compared")
        else:
            cell, comp = comps[0]
            at = f" at {where(cell)}" if len(cells) > 1 else ""
            states.append(f"{arm.name} {comp.cell_outcome}{at} ({interval(comp)})")
    listed = "; ".join(states[:SHOWN_STATES]) or "no depth measured"
    if len(states) > SHOWN_STATES:
        listed += f"; {len(states) - SHOWN_STATES} more"
    if resolved:
        return Choice(None, True, (), f"no depth is better than off: {listed}")
    return Choice(
        None,
        False,
        (),
        f"no depth is resolved better than off beyond the floor ({listed}): off, the boring choice",
    )


def _pooled(
    evidence: Evidence, arms: Sequence[Arm], cells: Sequence[Cell], metric: str
) -> dict[Cell, list[BootValue]]:
    """The boots of one or more arms (the controls pooled) per cell, as the family procedure reads them."""
    return {
        cell: [
            BootValue(v.arm, v.boot, v.order, v.log_value)
            for a in arms
            for v in evidence.values.of(a.name, cell, metric)
        ]
        for cell in cells
    }


def compare_to(
    evidence: Evidence,
    base: Sequence[Arm],
    challengers: Mapping[str, Sequence[Arm]],
    cells: Sequence[Cell],
    metric: str,
    alpha: float,
) -> FamilyOutcome | None:
    """The family procedure with `base` (pooled) in the controls' place and each challenger (its arms
    pooled: the controls for "off") as a candidate; None when a side measured nothing."""
    control = _pooled(evidence, base, cells, metric)
    values = {name: _pooled(evidence, arms, cells, metric) for name, arms in challengers.items()}
    present = {name: v for name, v in values.items() if any(v.values())}
    if not present or not any(control.values()):
        return None
    return family_procedure(
        {c: v for c, v in control.items() if v},
        {name: {c: v for c, v in cells_.items() if v} for name, cells_ in values.items()},
        tuple(cells),
        alpha=alpha,
        equivalence_margin=evidence.policy.equivalence_margin,
        higher_is_better=HIGHER_IS_BETTER[metric],
    )


def versus(
    evidence: Evidence,
    base: Arm,
    challengers: Sequence[Arm],
    cells: Sequence[Cell],
    metric: str,
    alpha: float,
) -> list[tuple[Arm, float, Outcome]]:
    """Each challenger against `base` over the group's cells (intersection-union over the cells, Holm
    across the challengers): (arm, mean estimate, combined outcome)."""
    found = compare_to(evidence, [base], {a.name: [a] for a in challengers}, cells, metric, alpha)
    if found is None:
        return []
    out = []
    for arm in challengers:
        outcome = next((o for o in found.arms if o.arm == arm.name), None)
        if outcome is None or not outcome.cells:
            continue
        estimates = [c.estimate for c in outcome.cells]
        out.append((arm, sum(estimates) / len(estimates), outcome.outcome))
    return out


def strongest_better(found: Sequence[tuple[Arm, float, Outcome]]) -> tuple[Arm, float] | None:
    """Of `versus`'s challengers, the one resolved better with the largest estimate; None when none is."""
    won = [(a, est) for a, est, outcome in found if outcome is Outcome.BETTER]
    return max(won, key=lambda ae: ae[1]) if won else None


def choices(
    evidence: Evidence, arms: Sequence[Arm], groups: Sequence[tuple[Cell, ...]], metric: str
) -> list[Choice]:
    """The choice at each group; the deeper-than-smallest step at alpha / (groups needing it)."""
    needing = sum(len(supported(evidence, arms, g, metric)) > 1 for g in groups)
    alpha_pair = evidence.policy.alpha / max(needing, 1)
    return [choose(evidence, arms, g, metric, alpha_pair) for g in groups]


# ---------------------------------------------------------------------------------------------------
# the map


def _entry(arm: Arm, comp: CellComparison | None, schedule: bool) -> RegimeDepth:
    k = None if schedule else arm.spec.k  # a schedule arm runs several depths
    if comp is None:
        return RegimeDepth(arm.name, k, NOT_COMPARED, None, None, None, None)
    return RegimeDepth(
        arm=arm.name,
        k=k,
        outcome=str(comp.cell_outcome),
        ratio=_exp(comp.estimate),
        ci_low=_exp(comp.ci_low),
        ci_high=_exp(comp.ci_high),
        floor=None if not math.isfinite(comp.floor_first) else finite(change(comp.floor_first)),
    )


def _exp(value: float) -> float | None:
    return finite(ratio(value)) if math.isfinite(value) else None


def regime_map(evidence: Evidence, excluded: Mapping[str, str] | None = None) -> tuple[RegimeCell, ...]:
    """Per family and design cell at the selection metric: every depth against off, and the best-supported
    depth among the candidates not `excluded` (void arms: arm -> why)."""
    metric = str(evidence.policy.selection.metric)
    excluded = excluded or {}
    out: list[RegimeCell] = []
    schedules = schedule_arms(evidence)
    for family in evidence.campaign.families:
        run = evidence.run(family, metric)
        if run is None:
            continue
        candidates = sorted(evidence.campaign.candidates(family), key=lambda a: (depth(a), a.order))
        allowed = [a for a in candidates if a.name not in excluded and a.name not in schedules]
        groups = [(cell,) for cell in run.cells]
        for (cell,), choice in zip(groups, choices(evidence, allowed, groups, metric), strict=True):
            entries = tuple(
                _entry(a, evidence.comparison(a.name, cell[0], cell[1], metric), a.name in schedules)
                for a in candidates
            )
            out.append(
                RegimeCell(
                    family=family,
                    workload=cell[0],
                    concurrency=cell[1],
                    metric=metric,
                    depths=entries,
                    best_arm=None if choice.arm is None else choice.arm.name,
                    best_k=choice.k,
                    resolved=choice.resolved,
                    why=choice.why,
                )
            )
    return tuple(out)


SCHEDULE_POLICY = "default-schedule"  # the shipped default policy in schedule mode
# deciding the same records under another policy is one more look (decide/looks.py): the hint reads
SCHEDULE_LOOK = (
    "a decision under another policy is one more look at what this one left of alpha, so read it in "
    "schedule mode as a what-if (no look)"
)


def crossover(policy: str, mode: str, cells: Sequence[RegimeCell]) -> tuple[tuple[str, str], ...]:
    """Per family and workload where some depth is resolved better than off at some concurrencies and
    none is at others: the finding, and how to decide in schedule mode (a depth per batch-size range)
    instead. Depths that win at short contexts and lose at long ones are no crossover: a schedule
    follows the batch size, not the prompt."""
    if mode == "schedule":
        return ()
    out = []
    for family, workload in dict.fromkeys((c.family, c.workload) for c in cells):
        mine = [c for c in cells if (c.family, c.workload) == (family, workload)]
        better = [c for c in mine if c.best_arm is not None and c.resolved]
        off = [c for c in mine if c.best_arm is None]
        if not better or not off:
            continue
        wins = ", ".join(f"{c.best_arm} at {cell_label(c.workload, c.concurrency)}" for c in better)
        losses = ", ".join(cell_label(c.workload, c.concurrency) for c in off)
        how = (
            f"mtpverdict decide RESULTS --rules {SCHEDULE_POLICY} --what-if"
            if policy == "default"
            else f'read it with [selection] mode = "schedule" in a copy of the policy and --what-if '
            f"(rules/{SCHEDULE_POLICY}.toml is the default policy so)"
        )
        out.append((f"the best depth depends on load: better than off {wins}; no depth at {losses}", how))
    return tuple(out)


def crossover_hint(evidence: Evidence, cells: Sequence[RegimeCell]) -> tuple[str, ...]:
    """The reasons' line for each crossover: the finding and the schedule-mode command."""
    policy = evidence.policy
    return tuple(
        f"{found}; schedule mode serves a depth per batch-size range with a ready {CONFIG_FLAG}; "
        f"{SCHEDULE_LOOK}: {how}"
        for found, how in crossover(policy.name, str(policy.selection.mode), cells)
    )
