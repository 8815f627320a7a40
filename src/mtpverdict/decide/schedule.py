"""Schedules as a selection mode: a depth per batch-size range, compiled into vLLM's --speculative-config.

At each measured concurrency the schedule runs the best-supported depth over the selected workloads
(decide/regime.py: a depth better than the baseline beyond the floor at every workload there; among
several, the smaller unless a deeper one is resolved better), else the baseline: speculation off, or
the policy's `reference` arm. Batch sizes between two measured concurrencies run their depth when both
choose the same one, else the baseline: nothing measured supports a switch there. Batch sizes below the
smallest or above the largest measured concurrency run the baseline (`beyond = "baseline"`) or the
nearest measured concurrency's depth (`beyond = "extend"`). Adjacent batch sizes with one depth form a
range; the last range ends at `max_batch` (vLLM carries the last range's depth beyond its end).

Which arms may enter: candidates of the family that no veto rejects or leaves unsettled, except
`faster_than_off`, which asks for a gain at every concurrency at once: the schedule asks that question
range by range instead. The scheduled depths must share one method and every other speculative setting
(a vLLM schedule varies the depth only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from mtpverdict._text import pct
from mtpverdict.decide.confirm import confirm
from mtpverdict.decide.regime import (
    Choice,
    choices,
    compare_to,
    depth,
    interval,
    schedule_arms,
    served_spec,
    served_specs,
    strongest_better,
    versus,
    where,
)
from mtpverdict.engines import registry
from mtpverdict.engines.interface import Absent
from mtpverdict.engines.names import SCHEDULE_ENGINE
from mtpverdict.engines.spec import CONFIG_FLAG, DepthRange, depth_free
from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import (
    ArmDecision,
    DecisionKind,
    Schedule,
    ScheduleRange,
    Verdict,
)
from mtpverdict.formats.policy import Beyond, Severity
from mtpverdict.formats.results import Arm
from mtpverdict.serveconfig import ServeSpec
from mtpverdict.stats.procedure import Outcome

SCHEDULED_KINDS = ("faster_than_off",)  # judged at every concurrency at once: a schedule judges each range
SELF_CONTAINED = ("mtp", "ngram")  # vLLM methods whose config needs nothing but the method and depth

Cell = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ScheduleOutcome:
    """What schedule mode decided: the decision kind, the schedule, and the reasons it states."""

    decision: DecisionKind
    schedule: Schedule | None
    selected: Arm | None  # keep_reference: the reference arm
    note: str
    lines: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Segment:
    start: int
    end: int
    choice: Choice
    measured: int | None
    reason: str


# ---------------------------------------------------------------------------------------------------
# which arms may enter a schedule


def schedulable(
    evidence: Evidence, decisions: Sequence[ArmDecision]
) -> tuple[list[Arm], list[str], list[Arm]]:
    """Candidates no veto rejects or leaves unsettled, apart from SCHEDULED_KINDS: the fixed depths and
    the arms that ran a schedule (confirmation arms); and the unsettled."""
    out: list[Arm] = []
    confirmers: list[Arm] = []
    unsettled: list[str] = []
    schedules = schedule_arms(evidence)
    for d in decisions:
        if d.is_control or d.verdict is Verdict.VOID:
            continue
        vetoes = [r for r in d.rules if r.severity is Severity.VETO and r.kind not in SCHEDULED_KINDS]
        if any(r.passed is False for r in vetoes):
            continue
        if any(r.passed is None for r in vetoes):
            unsettled.append(d.name)
            continue
        arm = evidence.campaign.arm(d.name)
        (confirmers if arm.name in schedules else out).append(arm)
    return out, unsettled, confirmers


def _setting_key(specs: dict[str, ServeSpec], arm: Arm) -> str:
    spec = specs.get(arm.name)
    if spec is None:
        return f"{arm.spec.method} (no serve config recorded)"
    settings = depth_free(spec.settings_dict())
    return f"{spec.engine} {spec.method} {json.dumps(settings, sort_keys=True)}"


def _one_setting(evidence: Evidence, arms: Sequence[Arm]) -> str | None:
    """Why these depths cannot share a schedule (None when they can)."""
    specs = served_specs(evidence)
    keys = {a.name: _setting_key(specs, a) for a in arms}
    if len(set(keys.values())) > 1:
        groups: dict[str, list[str]] = {}
        for name, key in keys.items():
            groups.setdefault(key, []).append(name)
        listed = "; ".join(
            f"{', '.join(names[:3])}{' ...' if len(names) > 3 else ''}: {key}"
            for key, names in groups.items()
        )
        return (
            "a schedule varies the depth only, and the schedulable arms differ in method or settings "
            f"({listed})"
        )
    depths = [depth(a) for a in arms]
    twice = sorted({d for d in depths if depths.count(d) > 1})
    if twice or 0 in depths:
        return f"two schedulable arms share a depth or record none ({', '.join(a.name for a in arms)})"
    return None


# ---------------------------------------------------------------------------------------------------
# the choice per measured concurrency


def _groups(evidence: Evidence, family: str, metric: str) -> list[tuple[Cell, ...]]:
    """Per measured concurrency, the cells of the selected workloads (all workloads when none is named)."""
    run = evidence.run(family, metric)
    if run is None:
        return []
    named = evidence.policy.selection.workload
    cells = [c for c in run.cells if named is None or c[0] == named]
    return [tuple(c for c in cells if c[1] == conc) for conc in sorted({c[1] for c in cells})]


def _vs_reference(
    evidence: Evidence, reference: Arm, arms: Sequence[Arm], family: str, groups: Sequence[tuple[Cell, ...]]
) -> list[Choice]:
    """Each group's choice with the reference as the baseline: the other depths and off (the controls
    pooled) against it in one family procedure over every cell, Holm across every (challenger, cell)."""
    metric = str(evidence.policy.selection.metric)
    controls = evidence.campaign.controls(family)
    challengers: dict[str, Sequence[Arm]] = {a.name: [a] for a in arms if a is not reference}
    if controls:
        challengers["off"] = controls
    cells = [c for g in groups for c in g]
    found = compare_to(evidence, [reference], challengers, cells, metric, evidence.policy.alpha)
    out = []
    for group in groups:
        won: list[tuple[str, float, str]] = []
        states = []
        for name in challengers:
            outcome = None if found is None else next((o for o in found.arms if o.arm == name), None)
            comps = [] if outcome is None else [outcome.cell(c) for c in group]
            if not comps or any(c is None for c in comps):
                states.append(f"{name} not compared")
                continue
            measured = [c for c in comps if c is not None]
            text = ", ".join(
                f"{interval(c)}" + (f" at {where(c.cell)}" if len(group) > 1 else "") for c in measured
            )
            states.append(f"{name} {measured[0].cell_outcome} ({text})")
            if all(c.cell_outcome is Outcome.BETTER for c in measured):
                won.append((name, sum(c.estimate for c in measured) / len(measured), text))
        if won:
            name, _, text = max(won, key=lambda w: w[1])
            arm = controls[0] if name == "off" else evidence.campaign.arm(name)
            why = f"{name} is better than the reference {reference.name} beyond the floor ({text})"
            out.append(Choice(arm, True, (), why))
            continue
        listed = "; ".join(states) or "nothing else measured"
        why = f"nothing is resolved better than the reference {reference.name} ({listed}): keep it"
        out.append(Choice(reference, False, (), why))
    return out


def fixed_default(evidence: Evidence, family: str, arms: Sequence[Arm], metric: str) -> Choice | None:
    """The single depth better than off at every cell of the design (the family procedure's arm-level
    outcome: intersection-union over the cells, Holm across the arms), the boring one among several;
    None when no depth is. A schedule departs from it only where a difference is resolved."""
    run = evidence.run(family, metric)
    if run is None:
        return None
    named = evidence.policy.selection.workload
    cells = tuple(c for c in run.cells if named is None or c[0] == named)
    better = []
    for arm in arms:
        found = run.arm(arm.name)
        if found is not None and found.outcome is Outcome.BETTER:
            better.append(arm)
    if not better:
        return None
    better.sort(key=lambda a: (depth(a), a.order))
    pick = choose_among(evidence, better, cells, metric, evidence.policy.alpha)
    why = f"{pick.name} is better than off at every measured cell (the fixed-depth verdict)"
    return Choice(pick, True, tuple(better), why)


def choose_among(
    evidence: Evidence, better: Sequence[Arm], cells: Sequence[Cell], metric: str, alpha: float
) -> Arm:
    """The smallest depth, unless a deeper one is better than it beyond the floor over `cells`."""
    lowest = better[0]
    if len(better) == 1:
        return lowest
    won = strongest_better(versus(evidence, lowest, better[1:], cells, metric, alpha))
    return lowest if won is None else won[0]


def _around_default(
    evidence: Evidence, default: Choice, arms: Sequence[Arm], groups: Sequence[tuple[Cell, ...]], metric: str
) -> list[Choice]:
    """At each measured concurrency the default depth, unless another depth is better than it beyond the
    floor there (the family procedure with the default as the control, at alpha / the concurrencies)."""
    assert default.arm is not None
    others = [a for a in arms if a is not default.arm]
    alpha = evidence.policy.alpha / max(len(groups), 1)
    out = []
    for group in groups:
        found = versus(evidence, default.arm, others, group, metric, alpha) if others else []
        won = strongest_better(found)
        if won is not None:
            arm, est = won
            why = (
                f"{arm.name} is better than the default depth {default.arm.name} beyond the floor "
                f"({pct(est)})"
            )
            out.append(Choice(arm, True, (), why))
        else:
            out.append(Choice(default.arm, True, default.supported, default.why))
    return out


# ---------------------------------------------------------------------------------------------------
# from choices at measured concurrencies to ranges


def _same(a: Choice, b: Choice) -> bool:
    return a.k == b.k


def _name(choice: Choice, role: str) -> str:
    return "off" if choice.k == 0 or choice.arm is None else f"the {role} {choice.arm.name}"


def segments(
    concurrencies: Sequence[int],
    picks: Sequence[Choice],
    baseline: Choice,
    beyond: Beyond,
    max_batch: int,
    between: Choice | None = None,
) -> list[_Segment]:
    """Batch sizes 1..max_batch cut at the measured concurrencies, each piece with its choice and why.

    Unmeasured batch sizes run `baseline` (or the nearest measured depth, `beyond = extend`); a gap
    between measured concurrencies that differ runs `between` (default: the baseline)."""
    base_name = _name(baseline, "reference")
    gap = baseline if between is None else between
    gap_name = base_name if between is None else _name(between, "default depth")
    out: list[_Segment] = []

    def unmeasured(start: int, end: int, near: Choice, side: str) -> None:
        if start > end:
            return
        span = _span(start, end)
        if beyond is Beyond.EXTEND:
            out.append(
                _Segment(start, end, near, None, f"{span}: {side}; its depth carries on (beyond = extend)")
            )
        else:
            out.append(
                _Segment(start, end, baseline, None, f"{span}: {side}; not measured, so {base_name} runs")
            )

    first, last = concurrencies[0], concurrencies[-1]
    unmeasured(1, first - 1, picks[0], f"below the smallest measured concurrency c={first}")
    for i, (conc, pick) in enumerate(zip(concurrencies, picks, strict=True)):
        out.append(_Segment(conc, conc, pick, conc, f"c={conc}: {pick.why}"))
        if i + 1 == len(concurrencies) or concurrencies[i + 1] == conc + 1:
            continue
        nxt, after = concurrencies[i + 1], picks[i + 1]
        span = _span(conc + 1, nxt - 1)
        if _same(pick, after):
            reason = f"{span}: between c={conc} and c={nxt}, which both run k={pick.k}: it holds between"
            out.append(_Segment(conc + 1, nxt - 1, pick, None, reason))
        else:
            reason = (
                f"{span}: between c={conc} (k={pick.k}) and c={nxt} (k={after.k}), which differ: nothing "
                f"measured supports a switch there, so {gap_name} runs"
            )
            out.append(_Segment(conc + 1, nxt - 1, gap, None, reason))
    unmeasured(last + 1, max_batch, picks[-1], f"beyond the largest measured concurrency c={last}")
    return [s for s in out if s.start <= max_batch]


def _span(start: int, end: int) -> str:
    return f"batch size {start}" if start == end else f"batch sizes {start}-{end}"


def ranges(pieces: Sequence[_Segment], max_batch: int) -> tuple[ScheduleRange, ...]:
    """Adjacent pieces with one depth merged into ranges (the last ends at max_batch)."""
    out: list[ScheduleRange] = []
    for p in pieces:
        end = min(p.end, max_batch)
        measured = (p.measured,) if p.measured is not None else ()
        arm = None if p.choice.k == 0 or p.choice.arm is None else p.choice.arm.name
        if out and out[-1].k == p.choice.k:
            prev = out[-1]
            out[-1] = ScheduleRange(
                prev.start, end, prev.k, prev.arm, prev.measured + measured, (*prev.reasons, p.reason)
            )
        else:
            out.append(ScheduleRange(p.start, end, p.choice.k, arm, measured, (p.reason,)))
    return tuple(out)


# ---------------------------------------------------------------------------------------------------
# vLLM's --speculative-config


def speculative_config(
    evidence: Evidence, arms: Sequence[Arm], ranges_: Sequence[ScheduleRange]
) -> tuple[str | None, str | None]:
    """(the exact JSON for vLLM's --speculative-config, or None; a note on what it assumes or lacks)."""
    top = max(r.k for r in ranges_)
    if top == 0:
        return None, f"no range speculates: serve without {CONFIG_FLAG}"
    used = [a for a in arms if any(r.arm == a.name for r in ranges_)]
    spec = served_spec(evidence, used[0])
    table = [DepthRange(r.start, r.end, r.k) for r in ranges_]
    if spec is None:
        method = str(used[0].spec.method)
        if method not in SELF_CONTAINED:
            return None, (
                f"the arms record no serve config and {method} needs more than a method and a depth: "
                "add the draft settings of the arms to the JSON"
            )
        base: dict[str, object] = {"method": method}
        note: str | None = "the arms record no serve config: method and depth only"
        compiler = registry.schedule_compiler(SCHEDULE_ENGINE)
    else:
        base = depth_free(spec.settings_dict())
        note = None
        compiler = registry.schedule_compiler(spec.engine)
    if isinstance(compiler, Absent):
        return None, f"the arms ran {None if spec is None else spec.engine}; {compiler.reason}"
    return compiler(base, top, table), note


# ---------------------------------------------------------------------------------------------------
# the mode


def build(evidence: Evidence, decisions: Sequence[ArmDecision]) -> ScheduleOutcome:
    """The schedule (or why there is none) for the campaign's family of candidates."""
    families = [f for f in evidence.campaign.families if evidence.campaign.candidates(f)]
    if len(families) != 1:
        why = "schedule mode needs one family of candidates (one seat); this campaign has " + (
            ", ".join(families) or "none"
        )
        return ScheduleOutcome(DecisionKind.INCONCLUSIVE, None, None, "", blockers=(why,))
    family = families[0]
    arms, unsettled, confirmers = schedulable(evidence, [d for d in decisions if d.family == family])
    if not arms:
        return _none_schedulable(decisions, unsettled)
    clash = _one_setting(evidence, arms)
    if clash:
        return ScheduleOutcome(DecisionKind.INCONCLUSIVE, None, None, "", blockers=(clash,))
    metric = str(evidence.policy.selection.metric)
    groups = _groups(evidence, family, metric)
    if not groups:
        why = f"no {metric} comparison at any concurrency of the family {family}"
        return ScheduleOutcome(DecisionKind.INCONCLUSIVE, None, None, "", blockers=(why,))
    reference = _reference(evidence, arms)
    default = None if reference is not None else fixed_default(evidence, family, arms, metric)
    if reference is not None:
        picks = _vs_reference(evidence, reference, arms, family, groups)
        baseline = Choice(reference, True, (), "")
    elif default is not None:
        picks = _around_default(evidence, default, arms, groups, metric)
        baseline = Choice(None, True, (), "")
    else:
        picks = choices(evidence, arms, groups, metric)
        baseline = Choice(None, True, (), "")
    confirmed = confirm(evidence, confirmers, groups, picks, reference)
    return _outcome(evidence, family, arms, groups, picks, baseline, unsettled, confirmed, default)


def _reference(evidence: Evidence, arms: Sequence[Arm]) -> Arm | None:
    name = evidence.policy.selection.reference
    return next((a for a in arms if a.name == name), None)


def _none_schedulable(decisions: Sequence[ArmDecision], unsettled: Sequence[str]) -> ScheduleOutcome:
    candidates = [d for d in decisions if not d.is_control]
    if unsettled:
        blockers = tuple(f"{name} could not be judged" for name in unsettled)
        return ScheduleOutcome(DecisionKind.INCONCLUSIVE, None, None, "", blockers=blockers)
    if candidates and all(d.verdict is Verdict.VOID for d in candidates):
        why = "every candidate arm is void: the campaign measured broken heads, not speculation"
        return ScheduleOutcome(DecisionKind.INCONCLUSIVE, None, None, "", blockers=(why,))
    return ScheduleOutcome(DecisionKind.KEEP_MTP_DISABLED, None, None, "")


def _outcome(
    evidence: Evidence,
    family: str,
    arms: Sequence[Arm],
    groups: Sequence[tuple[Cell, ...]],
    picks: Sequence[Choice],
    baseline: Choice,
    unsettled: Sequence[str],
    confirmed: tuple[bool | None, tuple[str, ...]] = (None, ()),
    default: Choice | None = None,
) -> ScheduleOutcome:
    selection = evidence.policy.selection
    concurrencies = [g[0][1] for g in groups]
    pieces = segments(concurrencies, picks, baseline, selection.beyond, selection.max_batch, default)
    table = ranges(pieces, selection.max_batch)
    config, note = speculative_config(evidence, arms, table)
    otherwise = (
        "the baseline"
        if default is None
        else f"the default depth (k={default.k}, better than off everywhere)"
    )
    rule = (
        "a measured concurrency runs its best-supported depth; batch sizes between two measured "
        f"concurrencies run it when both choose the same depth, else {otherwise}; below the smallest and "
        "above the largest measured concurrency "
        + (
            "the nearest measured depth carries on"
            if selection.beyond is Beyond.EXTEND
            else "the baseline runs"
        )
    )
    schedule = Schedule(
        family=family,
        metric=str(selection.metric),
        baseline=None if baseline.arm is None else baseline.arm.name,
        method=str(arms[0].spec.method),
        ranges=table,
        rule=rule,
        speculative_config=config,
        note=note,
        confirmed=confirmed[0],
        confirmation=confirmed[1],
    )
    lines = tuple(f"schedule {_span(r.start, r.end)}: k={r.k}: " + "; ".join(r.reasons) for r in table)
    lines += _exempted(evidence, table) + confirmed[1]
    if all(r.k == baseline.k for r in table):
        return _at_baseline(schedule, baseline, picks, lines, unsettled)
    if selection.confirm and not confirmed[0]:
        why = (
            "the policy promotes a schedule only when an arm that ran it confirms it ([selection] confirm); "
            + ("none ran it" if confirmed[0] is None else "none confirms it")
        )
        return ScheduleOutcome(DecisionKind.INCONCLUSIVE, schedule, None, "", lines, (why,))
    text = "selection schedule: " + ", ".join(_range_text(r) for r in table)
    if config is not None:
        text += f"; {registry.title(SCHEDULE_ENGINE)} {CONFIG_FLAG} '{config}'"
    return ScheduleOutcome(DecisionKind.PROMOTE, schedule, None, text, lines)


def _at_baseline(
    schedule: Schedule,
    baseline: Choice,
    picks: Sequence[Choice],
    lines: tuple[str, ...],
    unsettled: Sequence[str],
) -> ScheduleOutcome:
    """A schedule that never leaves its baseline: keep the reference, keep off, or say it is unresolved."""
    if baseline.arm is not None:
        note = f"selection schedule: keep the reference {baseline.arm.name} at every batch size"
        return ScheduleOutcome(DecisionKind.KEEP_REFERENCE, schedule, baseline.arm, note, lines)
    if all(p.resolved for p in picks) and not unsettled:
        note = "selection schedule: speculation off at every batch size; no depth is better anywhere"
        return ScheduleOutcome(DecisionKind.KEEP_MTP_DISABLED, schedule, None, note, lines)
    blockers = (
        "no depth is resolved better than off at any measured concurrency, and not every depth is shown "
        "not to be",
    )
    return ScheduleOutcome(DecisionKind.INCONCLUSIVE, schedule, None, "", lines, blockers)


def _exempted(evidence: Evidence, table: Sequence[ScheduleRange]) -> tuple[str, ...]:
    """A line for each scheduled arm whose SCHEDULED_KINDS veto did not pass: why it still runs."""
    names = dict.fromkeys(r.arm for r in table if r.arm is not None)
    out = []
    for name in names:
        arm = evidence.campaign.arm(name)
        kinds = [
            r for r in evidence.policy.rules if r.kind in SCHEDULED_KINDS and r.applies_to(name, arm.family)
        ]
        if kinds:
            out.append(
                f"schedule mode: {', '.join(r.id for r in kinds)} asks {name} for a gain at every "
                "concurrency at once; a schedule asks it at each concurrency, and runs it only where it is "
                "better"
            )
    return tuple(out)


def _range_text(r: ScheduleRange) -> str:
    what = "off" if r.k == 0 else f"{r.arm} (k={r.k})"
    return f"{what} at {_span(r.start, r.end)}"
