"""The per-category acceptance map: dataset categories against depth, each cell its acceptance and interval.

The numbers are the decision's `categories` section (each candidate's acceptance on each category's
workload, every concurrency pooled, and the family procedure over that category's cells): the map is a
heatmap of the acceptance rate, one row per category (per workload where two share a category) and one
column per candidate (ordered by family, then depth), the cell's text the rate with its interval and
the category's outcome against off.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict.formats.decision import CategoryResult, Decision

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_COLUMNS = 12  # candidates drawn before the map gets too narrow to read
MAX_ROWS = 16  # categories drawn
OUTCOME_MARK = {
    "better": "better",
    "worse": "worse",
    "equivalent": "equiv.",
    "below_min_effect": "< min",
    "inconclusive": "inconclusive",
}


@dataclass(frozen=True, slots=True)
class CategoryMap:
    """What the map draws: its rows (categories), columns (arm labels) and cells (None: not measured)."""

    title: str
    categories: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[CategoryResult | None, ...], ...]  # [row][column]
    dropped: int  # candidates or categories not drawn


def category_map_data(decision: Decision, label: str) -> CategoryMap | str:
    """The map's content, or why there is nothing to draw."""
    found = decision.categories
    if not any(c.acceptance_rate is not None for c in found):
        return "no dataset categories with acceptance (a campaign without dataset workloads has none)"
    arms = [a for a in decision.arms if any(c.arm == a.name for c in found)]
    arms.sort(key=lambda a: (decision.families.index(a.family), a.k or 0, a.name))
    # a row per category workload: its category, or its workload id where two workloads share one
    workloads = list(dict.fromkeys((c.category, c.workload) for c in found))
    shared = {cat for cat, _ in workloads if sum(1 for other, _ in workloads if other == cat) > 1}
    rows = {wid: (wid if cat in shared else cat) for cat, wid in workloads}
    categories = list(dict.fromkeys(rows.values()))
    dropped = max(0, len(arms) - MAX_COLUMNS) + max(0, len(categories) - MAX_ROWS)
    arms, categories = arms[:MAX_COLUMNS], categories[:MAX_ROWS]
    index = {(rows[c.workload], c.arm): c for c in found}
    return CategoryMap(
        title=f"{label}: acceptance per dataset category and depth",
        categories=tuple(categories),
        columns=tuple(a.name + (f" (k={a.k})" if a.k else "") for a in arms),
        cells=tuple(tuple(index.get((cat, a.name)) for a in arms) for cat in categories),
        dropped=dropped,
    )


def _text(c: CategoryResult | None) -> str:
    if c is None or c.acceptance_rate is None:
        return "not measured"
    text = f"{c.acceptance_rate:.0%}"
    if c.ci_low is not None and c.ci_high is not None:
        text += f"\n[{c.ci_low:.0%}, {c.ci_high:.0%}]"
    if c.outcome is not None:
        text += f"\n{OUTCOME_MARK.get(c.outcome, c.outcome)}"
    return text


def draw_category_map(d: CategoryMap, figure: Callable[[float], Figure]) -> Figure:
    """A heatmap of acceptance (0 to 1), categories down, depths across, each cell labelled."""
    import numpy as np

    rates = [[None if c is None else c.acceptance_rate for c in row] for row in d.cells]
    values = np.array([[np.nan if r is None else r for r in row] for row in rates])
    fig = figure(1.6 + 0.7 * len(d.categories))
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(d.cells):
        for j, cell in enumerate(row):
            rate = None if cell is None else cell.acceptance_rate
            color = "white" if rate is None or rate < 0.6 else "black"
            ax.text(j, i, _text(cell), ha="center", va="center", fontsize=8, color=color)
    ax.set_xticks(range(len(d.columns)), list(d.columns))
    ax.set_yticks(range(len(d.categories)), list(d.categories))
    ax.grid(False)
    ax.set_xlabel("candidate (depth)")
    fig.colorbar(image, ax=ax, label="acceptance rate")
    title = (
        d.title + "\nrate with its interval, every concurrency pooled; last line: the category's outcome "
        "against off"
    )
    if d.dropped:
        title += f"; {d.dropped} more rows or columns not shown"
    fig.suptitle(title)
    return fig
