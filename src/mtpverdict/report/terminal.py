"""The decision as `decide` prints it: the verdict first, one table of the candidates; with `verbose`
a seed-style table per arm, the latency percentiles, the regime map and every reason.

Every piece of text that comes from data (title, labels, reasons) is made one line by terminal_safe,
so nothing in a campaign or a policy can print a line of its own or drive the terminal.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from mtpverdict._text import terminal_lines, terminal_safe
from mtpverdict.formats.decision import ArmDecision, Decision, fill_paths
from mtpverdict.report.data import DecisionIndex
from mtpverdict.report.latency import latency_text
from mtpverdict.report.regime import regime_text, schedule_text
from mtpverdict.report.verdict import (
    MAX_TABLE_ROWS,
    arm_table,
    clip,
    deciding,
    fit_table,
    gain_text,
    next_step_of,
    verdict_lines,
)
from mtpverdict.report.weighted import weighted_text
from mtpverdict.stats.runs import METRIC_LABELS

SHOWN_CELLS = 3  # cells listed per arm before "..."
MAX_LINES = 25  # the default summary fits a terminal without scrolling
DEFAULT_WIDTH = 120  # columns, when neither a terminal nor COLUMNS says
VERBOSE_HINT = "--verbose: every arm's runs, the regime map, the schedule and every reason"


def _cells_text(decision: Decision, index: DecisionIndex, arm: ArmDecision, metric: str) -> tuple[str, str]:
    """(the arm's first cells as median [min-max] n, its ratio to off at its weakest cell)."""
    order = index.workload_rank
    cells = sorted(
        index.arm_cells.get((arm.name, metric), ()),
        key=lambda c: (order.get(c.workload, len(order)), c.workload, c.concurrency),
    )
    runs = "; ".join(
        f"{c.workload} c={c.concurrency}: {c.median:.1f} [{c.min:.1f}-{c.max:.1f}] n={c.n}"
        for c in cells[:SHOWN_CELLS]
    ) + ("; ..." if len(cells) > SHOWN_CELLS else "")
    found = deciding(decision, arm.name, metric)
    ratio = (
        ""
        if found is None
        else f"{gain_text(found[0].ratio or 1)} at {found[0].workload} c={found[0].concurrency}"
    )
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


def _seed_table(decision: Decision, index: DecisionIndex, metric: str, width: int) -> str:
    """Every arm with its first cells' runs, ratio to off, acceptance, KV pool and verdict."""
    rows = []
    for arm in decision.arms:
        runs, ratio = _cells_text(decision, index, arm, metric)
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
        "vs off, weakest cell",
        "acceptance",
        "KV pool (ceiling)",
        "verdict",
    ]
    return fit_table(headers, rows, width, drop=(5, 1))


def render_summary(
    decision: Decision,
    metric: str,
    workloads: Sequence[str],
    *,
    width: int = DEFAULT_WIDTH,
    verbose: bool = True,
    paths: tuple[str | None, str | None] = (None, None),
    footer: Sequence[str] = (),
) -> str:
    """The decision for a terminal `width` columns wide: the verdict first (verdict_lines), then
    `footer` (where the JSON went, the exit code), then one table of the candidates; `verbose` adds
    the seed-style table of every arm, the regime map, the schedule and every reason.

    `paths` (the results directory, the policy file) fill the placeholders the decision's next step
    names them by (formats.decision.fill_paths); None leaves a placeholder as it is."""

    def filled(text: str) -> str:
        return fill_paths(text, *paths)

    raw = next_step_of(decision)
    step = None if raw is None else filled(raw)
    lines = verdict_lines(decision, metric, width, step)
    for line in footer:  # wrapped, not cut: it says where the JSON went
        lines += textwrap.wrap(
            terminal_safe(line), width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        ) or [""]
    if not verbose:
        rows = MAX_LINES - len(lines) - 5  # a blank line, the table's two header lines, a blank, the hint
        lines += [
            "",
            arm_table(decision, metric, width, min(rows, MAX_TABLE_ROWS)),
            "",
            clip(VERBOSE_HINT, width),
        ]
        return "\n".join(lines) + "\n"
    index = DecisionIndex.of(decision, workloads)  # one pass: the decision's own lookups scan its lists
    lines += ["", _seed_table(decision, index, metric, width), ""]
    latency = latency_text(decision, width)
    lines += [latency, ""] if latency else []
    mix = weighted_text(decision, width)
    lines += [mix, ""] if mix else []
    maps = (regime_text(decision, width), schedule_text(decision.schedule))
    lines += [terminal_lines(text) for text in maps if text]
    lines.append("reasons:")
    for reason in decision.reasons:
        text = terminal_safe(filled(reason))
        lines += textwrap.wrap(text, width, initial_indent="  - ", subsequent_indent="    ") or ["  -"]
    return "\n".join(lines) + "\n"
