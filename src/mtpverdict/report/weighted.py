"""The traffic-weighted comparison as the terminal and the report show it: each candidate on the seat's mix.

Every number comes from the decision's `weighted` section (evidence/weighted.py): the shares, the
outcome of the family procedure on the weighted cells, and the ratio to off with its interval at the
weakest concurrency. A weighted category the campaign has no workload for is named where the outcome
would be (the decision's reasons say it too, decide/assemble.py weighted_reasons).
"""

from __future__ import annotations

from mtpverdict._text import terminal_safe
from mtpverdict.formats.decision import Decision, WeightedResult
from mtpverdict.report.tables import NONE, Table, ci_label
from mtpverdict.report.verdict import fit_table

HEADERS = ("arm", "mix", "outcome", "ratio to off", "at")


def _ratio(found: WeightedResult) -> str:
    if found.ratio is None:
        return NONE
    text = f"{found.ratio:.3f}x"
    if found.ratio_low is not None and found.ratio_high is not None:
        text += f" [{found.ratio_low:.3f}, {found.ratio_high:.3f}]"
    return text


def _row(found: WeightedResult) -> tuple[str, ...]:
    mix = ", ".join(f"{name} {share:.0%}" for name, share in found.shares) or NONE
    if found.missing:
        outcome = "not compared (" + ", ".join(found.missing) + " not in the campaign)"
    else:
        outcome = found.outcome or "not compared"
    at = NONE if found.concurrency is None else f"c={found.concurrency}"
    return (found.arm, mix, outcome, _ratio(found), at)


def weighted_text(decision: Decision, width: int) -> str:
    """Each candidate on the policy's traffic mix, one row an arm ("" without [workloads.weights])."""
    if not decision.weighted:
        return ""
    rows = [[terminal_safe(cell) for cell in _row(found)] for found in decision.weighted]
    level = ci_label(decision.policy.alpha)
    title = f"traffic mix ([workloads.weights], {decision.weighted[0].metric}, {level}):"
    return title + "\n" + fit_table(HEADERS, rows, width)


def weighted_table(decision: Decision) -> Table | None:
    """The report's table of the weighted comparison (None without [workloads.weights])."""
    if not decision.weighted:
        return None
    return Table(
        key="weighted",
        title="Traffic mix",
        headers=(*HEADERS[:3], f"ratio to off ({ci_label(decision.policy.alpha)})", HEADERS[4]),
        rows=tuple(_row(found) for found in decision.weighted),
        note=(
            "Each candidate on the policy's [workloads.weights]: per boot the seat's statistic on the mix "
            "(a rate's weighted harmonic mean, the tokens over their time; a time's weighted mean), then the "
            "family procedure over the weighted cells; the ratio and interval are the weakest "
            "concurrency's. The verdict still needs every category."
        ),
    )
