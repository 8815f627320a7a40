"""The decision as `decide` prints it: a seed-style table per arm, the decision line, then the reasons.

Every piece of text that comes from data (title, labels, reasons) is made one line by terminal_safe,
so nothing in a campaign or a policy can print a line of its own or drive the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mtpverdict._text import terminal_lines, terminal_safe
from mtpverdict.formats.decision import ArmDecision, Decision, DecisionKind
from mtpverdict.report.data import DecisionIndex
from mtpverdict.report.regime import regime_text, schedule_text
from mtpverdict.stats.runs import METRIC_LABELS

SHOWN_CELLS = 3  # cells listed per arm before "..."


def _ratio_cell(index: DecisionIndex, metric: str) -> tuple[str, int] | None:
    """The one cell whose ratio to off the table shows for every arm: the first compared in campaign order."""
    order = index.workload_rank
    cells = {(w, c) for (_, w, c, m) in index.comparisons if m == metric}
    return min(cells, key=lambda wc: (order.get(wc[0], len(order)), wc[0], wc[1]), default=None)


def _cells_text(
    index: DecisionIndex, arm: ArmDecision, metric: str, at: tuple[str, int] | None
) -> tuple[str, str]:
    """(the arm's first cells as median [min-max] n, its ratio to off at the table's ratio cell)."""
    order = index.workload_rank
    cells = sorted(
        index.arm_cells.get((arm.name, metric), ()),
        key=lambda c: (order.get(c.workload, len(order)), c.workload, c.concurrency),
    )
    runs = "; ".join(
        f"{c.workload} c={c.concurrency}: {c.median:.1f} [{c.min:.1f}-{c.max:.1f}] n={c.n}"
        for c in cells[:SHOWN_CELLS]
    ) + ("; ..." if len(cells) > SHOWN_CELLS else "")
    found = None if at is None else index.comparisons.get((arm.name, at[0], at[1], metric))
    ratio = "" if found is None or found.ratio is None else f"{found.ratio:.3f}x"
    return runs or "-", ratio


def _acceptance_text(arm: ArmDecision, order: Mapping[str, int]) -> str:
    acc = arm.acceptance
    if acc is None or acc.primary.acceptance_rate is None:
        return ""
    n = acc.primary.draft_tokens
    text = f"{acc.primary.acceptance_rate * 100:.1f}%" + (f" n={n}" if n is not None else " n=?")
    pooled = sorted(
        (w for w in acc.workloads if w.concurrency == 0 and w.surface.acceptance_rate is not None),
        key=lambda w: (order.get(w.workload, len(order)), w.workload),
    )
    if len(pooled) > 1:  # one workload's repetition can lift the pooled figure: show each
        text += " (" + ", ".join(f"{w.workload} {w.surface.acceptance_rate:.0%}" for w in pooled) + ")"
    return text


def _kv_text(arm: ArmDecision) -> str:
    text = "" if arm.kv.kv_cache_tokens is None else f"{arm.kv.kv_cache_tokens:,}"
    if arm.kv.ceiling is not None:
        text += f" ({arm.kv.ceiling:.2f}x)"
    return text


def render_summary(decision: Decision, metric: str, workloads: Sequence[str]) -> str:
    """A seed-style text summary: per-arm table of the selection metric, acceptance, KV; then reasons."""
    from tabulate import tabulate

    index = DecisionIndex.of(decision, workloads)  # one pass: the decision's own lookups scan its lists
    at = _ratio_cell(index, metric)
    rows = []
    for arm in decision.arms:
        runs, ratio = _cells_text(index, arm, metric, at)
        rows.append(
            [
                terminal_safe(text)
                for text in (
                    arm.name,
                    arm.label,
                    runs,
                    ratio,
                    _acceptance_text(arm, index.workload_rank),
                    _kv_text(arm),
                    arm.verdict,
                )
            ]
        )
    headers = [
        "arm",
        "spec",
        METRIC_LABELS[metric] + " median [min-max]",
        "vs off" if at is None else f"vs off ({terminal_safe(at[0])} c={at[1]})",
        "acceptance",
        "KV pool (ceiling)",
        "verdict",
    ]
    table = tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    head = f"decision: {decision.decision}"
    if decision.selected is not None:
        selected = f"{decision.selected.arm} ({decision.selected.spec.label()})"
        head += f"  selected: {terminal_safe(selected)}"
    if decision.provisional and decision.decision is not DecisionKind.INCONCLUSIVE:
        head += "  (provisional)"
    title = terminal_safe(f"{decision.campaign.id}: {decision.campaign.title}")
    lines = [title, "", table, ""]
    maps = (regime_text(decision), schedule_text(decision.schedule))
    lines += [terminal_lines(text) for text in maps if text]
    lines += [head, "", "reasons:"]
    lines.extend(f"  - {terminal_safe(r)}" for r in decision.reasons)
    return "\n".join(lines) + "\n"
