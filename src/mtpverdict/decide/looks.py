"""Which look a decision is, the alpha it may spend, and what the reasons say about the looks.

The alpha-spending rule is stats/looks.py's (Bonferroni over the planned looks, the rest re-split when
a resume raises them). A decision on records a recorded look already saw is that look again (its
alpha, no new look) when it also uses the same policy and noise histories (their digests are
recorded with the look: the same records decided under a laxer policy are one more look); otherwise
it is the next look. Every decision on a results directory counts,
whatever wrote it: a resume that raised the planned boots on data no recorded look saw (a decision
taken through the Python API or by the gate, which record nothing) is
counted as the look that made someone resume, at the alpha a look there spent: what was left, split
over the looks planned then (those of the last recorded look before it; 1 when none was recorded,
so an unrecorded look on a fixed design spent it all). A looks file whose hash chain breaks
(formats/looks.py), or a decision kept in the directory on records no recorded look saw, means alpha
may have been refunded: the decision says so and is provisional.

A campaign that continues an earlier one (campaign.json `continues`, written by collect --continues)
starts with what that campaign's looks spent already spent: its looks share what is left of alpha, so
the false-promotion rate over both campaigns stays at alpha. When the earlier campaign's looks were
not available, what they spent cannot be counted and every decision on the campaign is provisional.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

from mtpverdict.formats.looks import Look, LookLog
from mtpverdict.formats.results_io import Results
from mtpverdict.stats.looks import SPENT, look_alpha


@dataclass(frozen=True, slots=True)
class LookPlan:
    """The look a decision is and the alpha it spends."""

    look: Look
    new: bool  # no recorded look saw these records: record this one
    spent_before: float
    unrecorded: tuple[int, ...]  # boot records at resumes no recorded look saw, counted as looks
    tampered: str = ""  # why the recorded looks cannot be trusted to be all of them
    continued: str = ""  # the campaign this one continues (campaign.json `continues`)
    carried: float = 0.0  # alpha the continued campaign's looks spent
    unavailable: str = ""  # why the continued campaign's looks could not be counted
    handed_to: str = ""  # the campaign that continues this one and took what its looks left
    carries_nothing: str = ""  # the campaign that took what the continued one left before this began
    interim: str = ""  # a fixed campaign decided before every arm has its planned boots: which fall short
    family_alpha: float = 0.0  # what every look shares: the smallest alpha of the looks' policies

    @property
    def exhausted(self) -> bool:
        return self.look.alpha <= 0.0


def _alpha(budget: float, planned: int, spent: list[float]) -> float:
    """look_alpha over what a continued campaign left (nothing left: 0)."""
    return 0.0 if budget <= SPENT else look_alpha(budget, planned, spent)


def _counted(log: LookLog, alpha: float) -> list[Look]:
    """The recorded looks and, at each resume no recorded look saw, the look it implies, by records."""
    unseen = sorted({r for r in log.resumes if r > 0 and all(x.boot_records != r for x in log.looks)})
    out = sorted(log.looks, key=lambda x: (x.boot_records, x.look))
    for r in unseen:
        before = [x for x in out if x.boot_records < r]
        planned = max((x.planned for x in before if x.records_sha256), default=1)
        planned = max(planned, len(before) + 1) if before else 1
        implied = Look(0, r, "", _alpha(alpha, planned, [x.alpha for x in out]), planned)
        out = sorted([*out, implied], key=lambda x: (x.boot_records, x.look))
    return out


def anchored(log: LookLog, results: Results, kept: str) -> LookLog:
    """The log, marked tampered when `kept` (the records hash of the decision kept in the directory,
    its decision.json; empty when none) is of other records than these and no recorded look saw them."""
    if log.tampered or not kept or kept == results.records_sha256:
        return log
    if any(x.records_sha256 == kept for x in log.looks):
        return log
    return dataclasses.replace(
        log,
        tampered="the decision kept in the directory (decision.json) was taken on other records and no "
        "recorded look saw them (raw/looks.jsonl edited or removed)",
    )


def interim_arms(results: Results) -> str:
    """On a fixed campaign whose planned boots are known, the arms with fewer boots (any status) than
    planned, as "k2 2 of 3, off_B 2 of 3"; empty when complete, adaptive or not known."""
    planned = results.campaign.planned_boots
    if planned is None or results.campaign.sequential_looks > 1:
        return ""
    boots = results.boots
    counts = boots.groupby("arm")["boot"].nunique().to_dict() if len(boots) else {}
    short = [(a.name, int(counts.get(a.name, 0))) for a in results.campaign.arms]
    return ", ".join(f"{name} {n} of {planned}" for name, n in short if n < planned)


def plan_look(
    results: Results, alpha: float, log: LookLog, *, policy_sha256: str, history_sha256: str
) -> LookPlan:
    """This decision's look on `results` under the policy and histories with these digests, given the
    recorded looks (module docstring): the same look only when records, policy and histories match."""
    planned = max(1, results.campaign.sequential_looks)
    boot_records = len(results.boots)
    earlier = results.campaign.continues
    carried = 0.0 if earlier is None or earlier.spent_alpha is None else earlier.spent_alpha
    continued = "" if earlier is None else earlier.campaign
    unavailable = "" if earlier is None or earlier.spent_alpha is not None else earlier.unavailable or "?"
    taken = "" if earlier is None else earlier.handed_over or ""
    handed = log.handovers[0].campaign if log.handovers else ""
    family = _shared_alpha(alpha, log.looks)
    budget = 0.0 if taken or handed else family - carried
    counted = _counted(log, budget)
    unrecorded = tuple(x.boot_records for x in counted if not x.records_sha256)
    seen = (results.records_sha256, policy_sha256, history_sha256)
    interim = interim_arms(results)
    plan = functools.partial(
        LookPlan,
        unrecorded=unrecorded,
        tampered=log.tampered or _unbounded(log, policy_sha256),
        continued=continued,
        carried=carried,
        unavailable=unavailable,
        handed_to=handed,
        carries_nothing=taken,
        interim=interim,
        family_alpha=family,
    )
    spent = [x.alpha for x in counted]
    alpha_here = 0.0 if interim else _alpha(budget, planned, spent)
    again = _same_look([x for x in log.looks if x.seen == seen], alpha_here)
    if again is not None:
        at = (again.boot_records, again.look)
        before = [x for x in counted if (x.boot_records, x.look) < at]
        return plan(again, False, sum(x.alpha for x in before), family_alpha=_shared_alpha(alpha, before))
    look = Look(len(spent) + 1, boot_records, results.records_sha256, alpha_here, planned, *seen[1:], alpha)
    return plan(look, True, sum(spent))


def _shared_alpha(alpha: float, looks: Sequence[Look]) -> float:
    """The alpha `looks` and a look under a policy at `alpha` share: the smallest of their policies'
    (a laxer alpha later adds nothing)."""
    return min([alpha, *(x.policy_alpha for x in looks if x.policy_alpha is not None)])


def _unbounded(log: LookLog, policy_sha256: str) -> str:
    """Why the alpha the looks share cannot be bounded: a look recorded before its policy's alpha was
    (no policy_alpha) under another policy, whose alpha may have been smaller; empty when none."""
    if any(x.policy_alpha is None and x.policy_sha256 != policy_sha256 for x in log.looks):
        return (
            "a look recorded before looks carried their policy's alpha (raw/looks.jsonl without "
            "policy_alpha) was taken under another policy, whose alpha may have been smaller than this one's"
        )
    return ""


def _same_look(recorded: list[Look], alpha_here: float) -> Look | None:
    """The recorded look this decision is again: one that spent alpha, else one that spent none
    (an interim look) while this one would spend none either; None: a new look."""
    spending = [x for x in recorded if x.alpha > 0.0]
    if spending:
        return spending[0]
    return recorded[0] if recorded and alpha_here <= 0.0 else None


def look_lines(plan: LookPlan, policy_alpha: float) -> list[str]:
    """What the reasons say about the looks (nothing for a fixed design's first and only look)."""
    look = plan.look
    out: list[str] = []
    if 0.0 < plan.family_alpha < policy_alpha:
        out.append(
            f"the looks share alpha {plan.family_alpha:.4g}, the smallest of the policies earlier looks "
            f"were decided under: this policy's {policy_alpha:.4g} adds nothing to it"
        )
        policy_alpha = plan.family_alpha
    if plan.tampered:
        out.append(
            f"provisional: {plan.tampered}; the alpha earlier looks spent cannot be known, so this "
            "decision may spend alpha that was already spent"
        )
    if plan.unavailable:
        out.append(
            f"provisional: this campaign continues {plan.continued}, whose looks are not available "
            f"({plan.unavailable}); the alpha they spent cannot be counted, so this decision may spend "
            "alpha that was already spent"
        )
    elif plan.continued:
        out.append(
            f"this campaign continues {plan.continued}, whose looks spent alpha {plan.carried:.4g}: this "
            f"campaign's looks share the {max(policy_alpha - plan.carried, 0.0):.4g} left, so the "
            f"false-promotion rate over both campaigns stays at {policy_alpha:.4g}"
        )
    if look.look > 1 or look.planned > 1:
        out.append(
            f"look {look.look} of {look.planned} planned: earlier looks spent alpha {plan.spent_before:.4g}, "
            f"this one {look.alpha:.4g} (Bonferroni over the planned looks, what is left re-split when a "
            f"resume raises them), so the false-promotion rate over every look stays at {policy_alpha:.4g}"
        )
    if plan.unrecorded:
        shown = ", ".join(str(r) for r in plan.unrecorded)
        out.append(
            f"collect raised boots and resumed this campaign after {shown} boot record(s) without a "
            "recorded look there (a decision taken through the API or by the gate, which record none): "
            "each such resume is counted as the look it followed, at the alpha that look spent"
        )
    if plan.interim and plan.exhausted:
        out.append(
            f"interim: the campaign is not complete ({plan.interim} planned boots), so this look spends "
            "no alpha and promotes nothing; its one look is kept for the complete data (collect --resume "
            "finishes it; to decide on fewer boots, lower boots in the campaign file and resume). It can "
            "still keep arms off"
        )
    elif plan.carries_nothing:
        out.append(
            f"this campaign continues {plan.continued}, whose remaining alpha {plan.carries_nothing} had "
            "already taken when this one began (collect --continues on the same results twice): this "
            "campaign carries none, so no look on it can promote; it can still keep arms off"
        )
    elif plan.handed_to and plan.exhausted:
        out.append(
            f"the campaign's remaining alpha went to {plan.handed_to}, which continues it (collect "
            "--continues): no further look on this results directory can promote; decide that "
            "campaign instead. This one can still keep arms off"
        )
    elif plan.exhausted and plan.continued and plan.carried + plan.spent_before >= policy_alpha - SPENT:
        out.append(
            f"the alpha is spent: {plan.continued} spent {plan.carried:.4g} and this campaign's "
            f"{look.look - 1} earlier look(s) {plan.spent_before:.4g} of {policy_alpha:.4g}, so no look on "
            f"this campaign can promote; it can still keep arms off, and a campaign that continues "
            f"{plan.continued} cannot promote either"
        )
    elif plan.exhausted:
        out.append(
            f"the campaign's alpha is spent: its {look.look - 1} earlier look(s) spent "
            f"{plan.spent_before:.4g} of {policy_alpha:.4g}, so no further look on this results "
            "directory can promote; a new campaign (a new results directory) is the way on"
        )
    return out
