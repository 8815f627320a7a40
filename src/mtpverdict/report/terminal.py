"""The decision as `decide` prints it: a seed-style table per arm, the decision line, then the reasons."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mtpverdict.formats.decision import ArmDecision, Decision, DecisionKind
from mtpverdict.report.regime import regime_text, schedule_text
from mtpverdict.stats.runs import METRIC_LABELS

SHOWN_CELLS = 3  # cells listed per arm before "..."


def _ratio_cell(decision: Decision, metric: str, order: dict[str, int]) -> tuple[str, int] | None:
    """The one cell whose ratio to off the table shows for every arm: the first compared in campaign order."""
    cells = {(c.workload, c.concurrency) for c in decision.comparisons if c.metric == metric}
    return min(cells, key=lambda wc: (order.get(wc[0], len(order)), wc[0], wc[1]), default=None)


def _cells_text(
    decision: Decision, arm: ArmDecision, metric: str, order: dict[str, int], at: tuple[str, int] | None
) -> tuple[str, str]:
    """(the arm's first cells as median [min-max] n, its ratio to off at the table's ratio cell)."""
    cells = sorted(
        decision.arm_cells(arm.name, metric),
        key=lambda c: (order.get(c.workload, len(order)), c.workload, c.concurrency),
    )
    runs = "; ".join(
        f"{c.workload} c={c.concurrency}: {c.median:.1f} [{c.min:.1f}-{c.max:.1f}] n={c.n}"
        for c in cells[:SHOWN_CELLS]
    ) + ("; ..." if len(cells) > SHOWN_CELLS else "")
    found = None if at is None else decision.comparison(arm.name, at[0], at[1], metric)
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

    order = {w: i for i, w in enumerate(workloads)}
    at = _ratio_cell(decision, metric, order)
    rows = []
    for arm in decision.arms:
        runs, ratio = _cells_text(decision, arm, metric, order, at)
        rows.append(
            [arm.name, arm.label, runs, ratio, _acceptance_text(arm, order), _kv_text(arm), str(arm.verdict)]
        )
    headers = [
        "arm",
        "spec",
        METRIC_LABELS[metric] + " median [min-max]",
        "vs off" if at is None else f"vs off ({at[0]} c={at[1]})",
        "acceptance",
        "KV pool (ceiling)",
        "verdict",
    ]
    table = tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
    head = f"decision: {decision.decision}"
    if decision.selected is not None:
        head += f"  selected: {decision.selected.arm} ({decision.selected.spec.label()})"
    if decision.provisional and decision.decision is not DecisionKind.INCONCLUSIVE:
        head += "  (provisional)"
    lines = [f"{decision.campaign.id}: {decision.campaign.title}", "", table, ""]
    lines += [text for text in (regime_text(decision), schedule_text(decision.schedule)) if text]
    lines += [head, "", "reasons:"]
    lines.extend(f"  - {r}" for r in decision.reasons)
    return "\n".join(lines) + "\n"
