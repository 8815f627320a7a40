"""Schedules: a depth per batch-size range, checked range by range against the decision's."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mtpverdict.engines import registry
from mtpverdict.engines.names import SCHEDULE_ENGINE
from mtpverdict.engines.spec import CONFIG_FLAG, DEPTH_KEY, depth_free
from mtpverdict.gate.evidence import ArmEvidence, GateEvidence
from mtpverdict.gate.proposal import Proposal
from mtpverdict.gate.support import SUPPORTING, mismatch, no_evidence
from mtpverdict.serveconfig import DepthRange, ServeConfig, ServeSpec, normalise_flag

__all__ = [
    "data_parallel_refusal",
    "differences",
    "evidence_ranges",
    "last_value",
    "proposed_ranges",
    "runs_at",
    "support_schedule",
]

Ranges = list[tuple[int, int, int]]  # (first batch, last batch, k); the last range carries on past its end


def proposed_ranges(proposal: Proposal) -> Ranges:
    """The proposal as vLLM runs it: its schedule (a gap carries the previous depth, as vLLM fills it),
    else one depth at every batch size."""
    schedule: tuple[DepthRange, ...] = () if proposal.serve is None else proposal.serve.schedule
    if not schedule:
        return [(1, 1, 0 if proposal.off or proposal.k is None else proposal.k)]
    ends = [r.first_batch - 1 for r in schedule[1:]] + [schedule[-1].last_batch]
    return [(r.first_batch, end, r.k) for r, end in zip(schedule, ends, strict=True)]


def evidence_ranges(evidence: GateEvidence) -> Ranges | None:
    """The depth the decision runs per batch size; None when it supports no configuration."""
    kind = evidence.decision
    if evidence.schedule is not None and kind in SUPPORTING:
        return [(r.start, r.end, r.k) for r in evidence.schedule.ranges]
    selected = evidence.arm(evidence.selected)
    if kind in SUPPORTING and selected is not None and selected.k is not None:
        return [(1, 1, selected.k)]
    if kind == "keep_mtp_disabled":
        return [(1, 1, 0)]
    return None


def _depth(ranges: Ranges, batch: int) -> int:
    return next((k for a, b, k in ranges if a <= batch <= b), ranges[-1][2])


def differences(evidence: Ranges, proposed: Ranges) -> list[tuple[int, int, int, int]]:
    """(first, last, proposed k, evidence k) wherever the two differ; the last piece is open-ended."""
    cuts = sorted({a for a, _, _ in evidence} | {a for a, _, _ in proposed} | {evidence[-1][1] + 1})
    cuts = sorted({*cuts, proposed[-1][1] + 1})
    out: list[tuple[int, int, int, int]] = []
    for i, start in enumerate(cuts):
        end = cuts[i + 1] - 1 if i + 1 < len(cuts) else 0  # 0: and beyond
        mine, theirs = _depth(proposed, start), _depth(evidence, start)
        if mine != theirs:
            if out and out[-1][2:] == (mine, theirs) and out[-1][1] == start - 1:
                out[-1] = (out[-1][0], end, mine, theirs)
            else:
                out.append((start, end, mine, theirs))
    return out


def _span(first: int, last: int) -> str:
    if last == 0:
        return f"batch sizes {first} and above"
    return f"batch size {first}" if first == last else f"batch sizes {first}-{last}"


def _depth_proposal(proposal: Proposal, k: int) -> Proposal:
    """One depth of a scheduled proposal, with the settings an arm of that depth would record."""
    if proposal.serve is None:
        return Proposal(proposal.method, k, f"k={k}")
    settings = depth_free(proposal.serve.settings_dict())
    settings[DEPTH_KEY] = k
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    serve = ServeSpec(proposal.serve.engine, proposal.serve.method, k, text)
    return Proposal(proposal.method, k, f"{proposal.method} k={k}", serve)


def support_schedule(
    evidence: GateEvidence, proposal: Proposal
) -> tuple[bool, list[str], ArmEvidence | None]:
    """A proposal or a decision with a per-batch-size schedule: each range against the evidence."""
    mine = proposed_ranges(proposal)
    sized = _drafter_size(proposal, mine)
    if sized is not None:
        return False, [sized], None
    theirs = evidence_ranges(evidence)
    if theirs is None:
        return (
            False,
            [f"proposing {proposal.label}, but the decision is {evidence.decision}: no depth is supported"],
            None,
        )
    reasons: list[str] = []
    arms: dict[int, ArmEvidence | None] = {}
    for k in sorted({k for _, _, k in mine if k}):
        depth = _depth_proposal(proposal, k)
        matched = [a for a in evidence.arms if mismatch(a, depth) is None]
        supporting = runs_at(evidence, k)
        arms[k] = next((a for a in matched if a.name in supporting), None)
        if not matched:
            reasons += [f"k={k}: " + r for r in no_evidence(evidence, depth)]
        elif arms[k] is None:
            reasons.append(
                f"k={k}: {', '.join(a.name for a in matched)} measured these settings, but "
                f"{'it is' if len(matched) == 1 else 'they are'} not the arm the decision runs at this "
                f"depth ({', '.join(sorted(supporting)) or 'none'})"
            )
    wrong = differences(theirs, mine)
    for first, last, k, runs in wrong:
        reasons.append(f"{_span(first, last)}: proposing k={k}, but the evidence runs k={runs} there")
    ok = not wrong and all(arms.values())
    if ok:
        reasons.append(
            "every batch-size range runs the depth the decision supports there: "
            + ", ".join(f"{_span(a, b)} k={k}" for a, b, k in _closed(mine))
        )
    elif evidence.schedule is not None:
        reasons += [
            f"decision schedule {_span(r.start, r.end)}: k={r.k}: {r.reasons[0]}"
            for r in evidence.schedule.ranges
        ]
    top = max(k for _, _, k in mine)
    arm = arms.get(top) if top else next((a for a in evidence.arms if a.control), None)
    return ok, reasons, arm


def data_parallel_refusal(proposal: Proposal, config: ServeConfig | None) -> str | None:
    """Why a scheduled proposal would not run as proposed: its engine (vLLM) turns the schedule off under
    data parallelism and runs num_speculative_tokens at every batch size. None when it runs."""
    if config is None or proposal.serve is None or not proposal.serve.schedule:
        return None
    if proposal.serve.engine is None:  # a schedule is read from an engine's flags: never without one
        return None
    parts = registry.get(proposal.serve.engine)
    flags = registry.present(parts.data_parallel_flags)
    given = None if flags is None else last_value(config.argv, flags)
    size = None if given is None else given[1]
    if size is None or not size.isdigit() or int(size) <= 1:
        return None
    return (
        f"{config.source}: {parts.title} turns the per-batch-size schedule off under data parallelism "
        f"(data parallel size {size}) and would run k={proposal.serve.k} at every batch size; serve "
        "without data parallelism or propose one depth"
    )


def last_value(argv: Sequence[str], flags: Sequence[str]) -> tuple[str, str] | None:
    """(flag, value) of the last of `flags` given (`--flag V` or `--flag=V`; long flags normalised):
    the spellings of one setting, of which an engine runs the last."""
    found = None
    tokens = list(argv)
    for i, token in enumerate(tokens):
        name, eq, value = token.partition("=")
        flag = normalise_flag(name) if name.startswith("--") else name
        if flag in flags and (eq or i + 1 < len(tokens)):
            found = (flag, value if eq else tokens[i + 1])
    return found


def _drafter_size(proposal: Proposal, ranges: Ranges) -> str | None:
    """Why a scheduled proposal's num_speculative_tokens is not what was measured: vLLM sizes the
    drafter by it (every arm ran it equal to its depth, a schedule arm to its largest), so it must be
    the schedule's largest depth; a schedule that never drafts still loads the drafter."""
    if proposal.serve is None or not proposal.serve.schedule:
        return None
    top = max(k for _, _, k in ranges)
    if proposal.serve.k == top:
        return None
    fix = f"serve without {CONFIG_FLAG}" if top == 0 else f"set {DEPTH_KEY} to {top}"
    return (
        f"{DEPTH_KEY} {proposal.serve.k} is not the schedule's largest depth {top}: "
        f"{registry.title(SCHEDULE_ENGINE)} sizes the drafter by it and no arm ran it so; {fix}"
    )


def runs_at(evidence: GateEvidence, k: int) -> set[str]:
    """The arms whose evidence the decision runs at depth k: its schedule's, or its selected arm."""
    if evidence.schedule is not None:
        return {r.arm for r in evidence.schedule.ranges if r.k == k and r.arm is not None}
    selected = evidence.arm(evidence.selected)
    return {selected.name} if selected is not None and selected.k == k else set()


def _closed(ranges: Ranges) -> Ranges:
    """The last range open-ended (vLLM carries it on), for the reasons."""
    return [*ranges[:-1], (ranges[-1][0], 0, ranges[-1][2])]
