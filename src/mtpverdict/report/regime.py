"""The regime map and the schedule as the terminal and the report show them: text, and a depth x
concurrency plot per workload."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict._text import OUTCOME_WORDS
from mtpverdict.engines import registry
from mtpverdict.engines.names import SCHEDULE_ENGINE
from mtpverdict.engines.spec import CONFIG_FLAG
from mtpverdict.formats.decision import Decision, RegimeCell, RegimeDepth, Schedule

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SHOWN_REGIME_ROWS = 12  # cells of the map listed in the terminal before "..."
MAX_PANELS = 6  # workloads drawn side by side in one regime plot
OUTCOME_COLORS = {
    "better": "#7fbf7b",
    "worse": "#e08a8a",
    "equivalent": "#a6bddb",
    "below_min_effect": "#f4c27a",
    "inconclusive": "#e6e6e6",
    "not_compared": "#ffffff",
}
OUTCOME_SHORT = OUTCOME_WORDS  # the one vocabulary every sentence and table uses
OFF_COLOR = "#f7f7f7"


def _gain(value: float | None) -> str:
    return "-" if value is None else f"{(value - 1) * 100:+.1f}%"


def depth_text(d: RegimeDepth) -> str:
    """`+26.5% [+23.7%, +29.4%] better`: a depth's ratio to off as a gain, its interval, its outcome.

    The interval is the cell's own; the outcome is Holm's across every depth and cell. Where the
    interval alone would clear off but Holm does not, the outcome says so (`n.s. after Holm`)."""
    if d.ratio is None:
        return OUTCOME_SHORT[d.outcome]
    interval = "" if d.ci_low is None else f" [{_gain(d.ci_low)}, {_gain(d.ci_high)}]"
    outcome = OUTCOME_SHORT.get(d.outcome, d.outcome)
    if d.outcome == "inconclusive" and _clears_off(d):
        outcome = "n.s. after Holm"
    return f"{_gain(d.ratio)}{interval} {outcome}"


def _clears_off(d: RegimeDepth) -> bool:
    return (d.ci_low is not None and d.ci_low > 1) or (d.ci_high is not None and d.ci_high < 1)


def best_text(cell: RegimeCell) -> str:
    name = "off" if cell.best_arm is None else f"{cell.best_arm} (k={cell.best_k})"
    return name if cell.resolved else f"{name} (nothing resolved here)"


def regime_text(decision: Decision, width: int = 120) -> str:
    """The map as a table within `width`: one row per family cell, one column per depth, then the depth
    this cell alone supports best."""
    from mtpverdict.report.verdict import fit_table

    if not decision.regime:
        return ""
    several = len({c.family for c in decision.regime}) > 1
    arms = list(dict.fromkeys(d.arm for c in decision.regime for d in c.depths))
    rows = []
    for cell in decision.regime[:SHOWN_REGIME_ROWS]:
        found = {d.arm: depth_text(d) for d in cell.depths}
        where = f"{cell.workload} c={cell.concurrency}" + (f" ({cell.family})" if several else "")
        rows.append([where, *(found.get(a, "") for a in arms), best_text(cell)])
    metric = decision.regime[0].metric
    table = fit_table(["cell", *arms, "best at this cell alone"], rows, width)
    # side by side only when every cell fits whole: cut to fit, a map of many depths reads "not co..."
    if fit_table(["cell", *arms, "best at this cell alone"], rows, 10**6) != table:  # one depth per row
        long = [
            [where if i == 0 else "", arm, text, best if i == 0 else ""]
            for where, *found, best in rows
            for i, (arm, text) in enumerate((a, t) for a, t in zip(arms, found, strict=True) if t)
        ]
        table = fit_table(["cell", "depth", "against off", "best at this cell alone"], long, width)
    more = len(decision.regime) - SHOWN_REGIME_ROWS
    tail = f"\n... {more} more cells in the decision file" if more > 0 else ""
    heading = (
        f"regime map ({metric} against off per cell; intervals are each cell's own, outcomes Holm's "
        f"across every depth and cell; an arm's decision needs every cell, so it can differ):"
    )
    return "\n".join(textwrap.wrap(heading, width)) + f"\n{table}{tail}\n"


def schedule_text(schedule: Schedule | None) -> str:
    """The schedule's ranges and vLLM's --speculative-config, when the decision has a schedule."""
    if schedule is None:
        return ""
    base = "off" if schedule.baseline is None else schedule.baseline
    lines = [f"schedule ({schedule.metric}, baseline {base}):"]
    for r in schedule.ranges:
        span = f"batch size {r.start}" if r.start == r.end else f"batch sizes {r.start}-{r.end}"
        what = "off" if r.k == 0 else f"k={r.k} ({r.arm})"
        measured = f"  measured at c={', '.join(str(c) for c in r.measured)}" if r.measured else ""
        lines.append(f"  {span}: {what}{measured}")
    if schedule.speculative_config is not None:
        lines.append(f"  {registry.title(SCHEDULE_ENGINE)}: {CONFIG_FLAG} '{schedule.speculative_config}'")
    if schedule.note:
        lines.append(f"  note: {schedule.note}")
    lines.append(f"  rule: {schedule.rule}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the plot


@dataclass(frozen=True, slots=True)
class Panel:
    """One workload: depths (rows, off first) by concurrencies (columns)."""

    workload: str
    concurrencies: tuple[int, ...]
    rows: tuple[str, ...]  # "off", then each depth's label
    cells: tuple[tuple[RegimeDepth | None, ...], ...]  # [row][column]; None on the off row
    best: tuple[int, ...]  # per column, the row index of the best-supported depth
    resolved: tuple[bool, ...]


@dataclass(frozen=True, slots=True)
class RegimePlot:
    title: str
    panels: tuple[Panel, ...]
    dropped: int  # workloads not drawn


def regime_plot_data(decision: Decision, family: str, label: str) -> RegimePlot | str:
    """What the regime plot of a family draws, or why it draws nothing."""
    cells = [c for c in decision.regime if c.family == family]
    if not cells:
        return "no depth of this family was compared with off at the selection metric"
    workloads = list(dict.fromkeys(c.workload for c in cells))
    if all(len({c.concurrency for c in cells if c.workload == w}) < 2 for w in workloads):
        return "every workload was measured at one concurrency: the ratio table holds its comparisons"
    arms = list(dict.fromkeys(d.arm for c in cells for d in c.depths))
    ks = {d.arm: d.k for c in cells for d in c.depths}
    rows = ("off", *(f"{a} (k={ks[a]})" if ks[a] is not None else a for a in arms))
    panels = []
    for w in workloads[:MAX_PANELS]:
        at = sorted((c for c in cells if c.workload == w), key=lambda c: c.concurrency)
        grid: list[tuple[RegimeDepth | None, ...]] = [tuple(None for _ in at)]
        grid += [tuple(next((d for d in c.depths if d.arm == a), None) for c in at) for a in arms]
        best = tuple(0 if c.best_arm is None else 1 + arms.index(c.best_arm) for c in at)
        panels.append(
            Panel(w, tuple(c.concurrency for c in at), rows, tuple(grid), best, tuple(c.resolved for c in at))
        )
    metric = cells[0].metric
    return RegimePlot(
        title=f"{label}: {metric} against off by depth and concurrency",
        panels=tuple(panels),
        dropped=max(0, len(workloads) - MAX_PANELS),
    )


def draw_regime(d: RegimePlot, figure: Callable[[float], Figure]) -> Figure:
    """Each workload a grid: depth rows (off at the bottom), concurrency columns, coloured by outcome."""
    from matplotlib.patches import Patch, Rectangle

    n = len(d.panels)
    fig = figure(2.6 + 0.55 * len(d.panels[0].rows))
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, p in zip(axes, d.panels, strict=True):
        for i, row in enumerate(p.cells):
            for j, entry in enumerate(row):
                color = OFF_COLOR if entry is None else OUTCOME_COLORS.get(entry.outcome, "#ffffff")
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=color, edgecolor="#bbbbbb"))
                text = "off" if entry is None else _cell_label(entry)
                ax.text(j, i, text, ha="center", va="center", fontsize=8)
        for j, (i, resolved) in enumerate(zip(p.best, p.resolved, strict=True)):
            ax.add_patch(
                Rectangle(
                    (j - 0.46, i - 0.46),
                    0.92,
                    0.92,
                    fill=False,
                    edgecolor="black",
                    linewidth=2.4,
                    linestyle="-" if resolved else "--",
                )
            )
        ax.set_xlim(-0.5, len(p.concurrencies) - 0.5)
        ax.set_ylim(-0.5, len(p.rows) - 0.5)
        ax.set_xticks(range(len(p.concurrencies)), [f"c={c}" for c in p.concurrencies])
        ax.set_yticks(range(len(p.rows)), list(p.rows))
        ax.grid(False)
        ax.set_title(p.workload)
        ax.set_xlabel("concurrency (batch size)")
    handles = [
        Patch(facecolor=c, edgecolor="#bbbbbb", label=OUTCOME_SHORT[o]) for o, c in OUTCOME_COLORS.items()
    ]
    handles.append(
        Patch(fill=False, edgecolor="black", linewidth=2.4, label="best supported (dashed: unresolved)")
    )
    fig.legend(handles=handles, loc="outside lower center", ncols=4, frameon=False)
    title = (
        d.title
        + "\nratio to off with its interval; colour: the cell's outcome (Holm across every depth and cell)"
    )
    if d.dropped:
        title += f"; {d.dropped} more workloads not shown"
    fig.suptitle(title)
    return fig


def _cell_label(d: RegimeDepth) -> str:
    if d.ratio is None:
        return OUTCOME_SHORT[d.outcome]
    if d.ci_low is None or d.ci_high is None:
        return f"{d.ratio:.2f}x"
    return f"{d.ratio:.2f}x\n[{d.ci_low:.2f}, {d.ci_high:.2f}]"
