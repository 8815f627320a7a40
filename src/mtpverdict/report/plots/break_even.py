"""Acceptance against break-even: each arm's mean acceptance length against the length that pays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict._text import terminal_lines
from mtpverdict.report.data import ReportData
from mtpverdict.report.plots.base import (
    COLORS,
    MAX_PLOTTED_ARMS,
    PlotKind,
    figure,
    ordered,
    too_many,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True, slots=True)
class _BreakEvenPoint:
    arm: int  # index into the arms
    cell: str
    cost: tuple[float, float, float]  # step cost (break-even length) with its interval
    length: tuple[float, float, float]  # measured mean acceptance length with its interval


@dataclass(frozen=True, slots=True)
class _BreakEvenData:
    title: str
    arms: tuple[tuple[str, str], ...]  # (label, colour)
    points: tuple[_BreakEvenPoint, ...]


def _break_even_data(data: ReportData) -> _BreakEvenData | str:
    """Each candidate's cells: break-even length (x) against measured mean acceptance length (y)."""
    arms = ordered([a for a in data.decision.arms if a.break_even is not None])
    if not arms:
        return "no candidate has both a decode-rate comparison and a mean acceptance length"
    if len(arms) > MAX_PLOTTED_ARMS:
        return too_many(len(arms), "arms with break-even")
    points = []
    for i, arm in enumerate(arms):
        assert arm.break_even is not None
        for c in arm.break_even.cells:
            cost = (c.step_cost, c.step_cost_low or c.step_cost, c.step_cost_high or c.step_cost)
            length = (
                c.mean_acceptance_length,
                c.mean_acceptance_length_low or c.mean_acceptance_length,
                c.mean_acceptance_length_high or c.mean_acceptance_length,
            )
            points.append(_BreakEvenPoint(i, f"{c.workload} c={c.concurrency}", cost, length))
    labels = tuple(
        (
            f"{a.name} ({a.label})" + (" [selected]" if a.name == data.decision.selected_arm else ""),
            COLORS[i % len(COLORS)],
        )
        for i, a in enumerate(arms)
    )
    return _BreakEvenData(f"{data.campaign_label}: acceptance against break-even", labels, tuple(points))


def _draw_break_even(d: _BreakEvenData) -> Figure:
    from matplotlib.lines import Line2D

    fig = figure(6.0)
    ax = fig.subplots()
    for p in d.points:
        label, color = d.arms[p.arm]
        (x, xlo, xhi), (y, ylo, yhi) = p.cost, p.length
        ax.errorbar(
            [x],
            [y],
            xerr=[[max(0.0, x - xlo)], [max(0.0, xhi - x)]],
            yerr=[[max(0.0, y - ylo)], [max(0.0, yhi - y)]],
            color=color,
            marker="o",
            markersize=6,
            capsize=3,
            linestyle="none",
            zorder=3,
        )
        ax.annotate(terminal_lines(p.cell), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    values = [v for p in d.points for v in (*p.cost, *p.length)]
    low, high = min(1.0, *values), max(values)
    pad = (high - low) * 0.06 or 0.5
    ax.plot([low - pad, high + pad], [low - pad, high + pad], color="black", linestyle="--", linewidth=1.2)
    ax.set_xlim(low - pad, high + pad)
    ax.set_ylim(low - pad, high + pad)
    ax.set_xlabel("break-even mean acceptance length = step cost in baseline steps")
    ax.set_ylabel("measured mean acceptance length\n(tokens per step, bonus included)")
    handles = [Line2D([], [], color=c, marker="o", linestyle="none") for _, c in d.arms]
    handles.append(Line2D([], [], color="black", linestyle="--"))
    labels = [terminal_lines(label) for label, _ in d.arms] + ["break-even: above the line speculation pays"]
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3), frameon=False)
    fig.suptitle(d.title + "\nwhiskers: the comparison's interval (x) and the acceptance interval (y)")
    return fig


PLOT: PlotKind[_BreakEvenData] = PlotKind(
    key="break-even",
    title="Acceptance against break-even",
    caption="Each speculative arm's cells: the measured mean acceptance length against the length at which "
    "a step stops paying (its cost in baseline decode steps). Points above the dashed line pay; "
    "the distance to the line is the margin a drafter can lose in production before speculation "
    "costs throughput.",
    extract=lambda data, _family: _break_even_data(data),
    draw=_draw_break_even,
)
