"""Which look a decision is, the alpha it may spend, and what the reasons say about the looks.

The alpha-spending rule is stats/looks.py's (Bonferroni over the planned looks, the rest re-split when
a resume raises them). A decision on records a recorded look already saw is that look again (its
alpha, no new look); otherwise it is the next look. A resume that raised the planned boots on data
no recorded look saw means the data was probably decided on before (that is why boots were raised)
without the look being counted: the decision says so and is provisional.
"""

from __future__ import annotations

from dataclasses import dataclass

from mtpverdict.formats.looks import Look, LookLog
from mtpverdict.formats.results_io import Results
from mtpverdict.stats.looks import look_alpha


@dataclass(frozen=True, slots=True)
class LookPlan:
    """The look a decision is and the alpha it spends."""

    look: Look
    new: bool  # no recorded look saw these records: record this one
    spent_before: float
    unrecorded: tuple[int, ...]  # boot records at resumes no recorded look saw

    @property
    def exhausted(self) -> bool:
        return self.look.alpha <= 0.0


def plan_look(results: Results, alpha: float, log: LookLog) -> LookPlan:
    """This decision's look on `results` given the recorded looks (module docstring)."""
    planned = max(1, results.campaign.sequential_looks)
    boot_records = len(results.boots)
    unrecorded = tuple(
        r for r in log.resumes if r > 0 and not any(look.boot_records == r for look in log.looks)
    )
    for look in log.looks:
        if look.records_sha256 == results.records_sha256:
            before = sum(x.alpha for x in log.looks if x.look < look.look)
            return LookPlan(look, False, before, unrecorded)
    spent = [x.alpha for x in log.looks]
    look = Look(
        len(spent) + 1, boot_records, results.records_sha256, look_alpha(alpha, planned, spent), planned
    )
    return LookPlan(look, True, sum(spent), unrecorded)


def look_lines(plan: LookPlan, policy_alpha: float) -> list[str]:
    """What the reasons say about the looks (nothing for a fixed design's first and only look)."""
    look = plan.look
    out: list[str] = []
    if look.look > 1 or look.planned > 1:
        out.append(
            f"look {look.look} of {look.planned} planned: earlier looks spent alpha {plan.spent_before:.4g}, "
            f"this one {look.alpha:.4g} (Bonferroni over the planned looks, what is left re-split when a "
            f"resume raises them), so the false-promotion rate over every look stays at {policy_alpha:.4g}"
        )
    if plan.exhausted:
        out.append(
            f"the campaign's alpha is spent: its {look.look - 1} earlier look(s) spent "
            f"{plan.spent_before:.4g} of {policy_alpha:.4g}, so no further look on this results "
            "directory can promote; a new campaign (a new results directory) is the way on"
        )
    if plan.unrecorded:
        shown = ", ".join(str(r) for r in plan.unrecorded)
        out.append(
            f"provisional: collect resumed this campaign with more boots after {shown} boot record(s) "
            "without a recorded look there; if the data was decided on before the resume, that look spent "
            "alpha this decision cannot count"
        )
    return out
