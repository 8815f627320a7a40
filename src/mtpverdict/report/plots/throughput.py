"""Throughput by depth: decode and aggregate tok/s against the arm's depth, with the control's floor band."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mtpverdict._text import terminal_lines
from mtpverdict.formats.decision import ArmDecision
from mtpverdict.report.data import ReportData
from mtpverdict.report.plots.base import (
    COLORS,
    GREY,
    MAX_PLOTTED_ARMS,
    SELECTED_COLOR,
    TITLE_WRAP,
    PlotKind,
    Series,
    errorbar,
    family_arms,
    family_text,
    figure,
    limits,
    ordered,
    too_many,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _cells(data: ReportData, arm_names: set[str], metric: str) -> list[tuple[str, int]]:
    keys = {
        (c.workload, c.concurrency) for c in data.decision.cells if c.arm in arm_names and c.metric == metric
    }
    return sorted(keys, key=lambda k: (data.workload_rank(k[0]), k[0], k[1]))


def _control_floor(
    data: ReportData, family: str, workload: str, conc: int, metric: str
) -> tuple[float | None, bool]:
    """The decision's floor for a cell; else the floor its comparisons assumed (flagged), when they agree."""
    doc = data.decision
    floor = data.index.floors.get((family, workload, conc, metric))
    if floor is not None and floor.floor is not None:
        return floor.floor, False
    members = {a.name for a in family_arms(data, family)}
    assumed = {
        c.floor
        for c in doc.comparisons
        if c.arm in members
        and (c.workload, c.concurrency, c.metric) == (workload, conc, metric)
        and c.floor is not None
    }
    return (assumed.pop(), True) if len(assumed) == 1 else (None, False)


def _throughput_series(data: ReportData, family: str, metric: str, arms: list[ArmDecision]) -> list[Series]:
    cell_of = data.index.cells
    position = {a.name: i for i, a in enumerate(arms)}
    controls = [a.name for a in arms if a.is_control]
    out = []
    for i, (workload, conc) in enumerate(_cells(data, set(position), metric)):
        xs, ys, lows, highs = [], [], [], []
        for arm in arms:
            cell = cell_of.get((arm.name, workload, conc, metric))
            if cell is None:
                continue
            xs.append(float(position[arm.name]))
            ys.append(cell.median)
            lows.append(cell.min)
            highs.append(cell.max)
        if not xs:
            continue
        band = None
        control_medians = [
            c.median for name in controls if (c := cell_of.get((name, workload, conc, metric))) is not None
        ]
        floor, assumed = _control_floor(data, family, workload, conc, metric)
        if control_medians and floor is not None and floor > 0:
            center = math.exp(sum(math.log(m) for m in control_medians) / len(control_medians))
            band = (center, floor)
        out.append(
            Series(
                label=f"{workload} c={conc}",
                color=COLORS[i % len(COLORS)],
                xs=tuple(xs),
                ys=tuple(ys),
                lows=tuple(lows),
                highs=tuple(highs),
                band=band,
                assumed=assumed,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class _ThroughputData:
    title: str
    arms: tuple[ArmDecision, ...]
    selected: str | None
    panels: tuple[tuple[str, tuple[Series, ...]], ...]  # (metric, series)


def _throughput_data(data: ReportData, family: str) -> _ThroughputData | str:
    doc = data.decision
    metrics = ("decode_tps", "aggregate_tps")
    members = family_arms(data, family)
    with_data = {c.arm for c in doc.cells if c.metric in metrics}
    arms = ordered([a for a in members if a.name in with_data])
    if not arms:
        return "no arm of this family has a throughput measurement"
    if len(arms) > MAX_PLOTTED_ARMS:
        return too_many(len(arms), "arms measured")
    panels = []
    for metric in metrics:
        series = _throughput_series(data, family, metric, arms)
        if series:
            panels.append((metric, tuple(series)))
    return _ThroughputData(
        title=f"{data.campaign_label}: throughput by arm, in order of depth{family_text(doc, family)}",
        arms=tuple(arms),
        selected=doc.selected_arm,
        panels=tuple(panels),
    )


def _floor_title(metric: str, series: Sequence[Series], cut: bool) -> str:
    """Panel title: the metric, then the floor of each series (once when they agree), wrapped."""
    import textwrap

    name = "decode" if metric == "decode_tps" else "aggregate"
    floors = [(s.label, s.band[1]) for s in series if s.band is not None]
    if not floors:
        return f"{name}: floor unknown, no band"
    if len({round(f, 4) for _, f in floors}) == 1:
        text = f"{name}: floor ±{floors[0][1] * 100:.1f}%"
    else:
        text = f"{name}: floor " + ", ".join(f"{label} ±{f * 100:.1f}%" for label, f in floors)
    if all(s.assumed for s in series if s.band is not None):
        text += " (assumed by the policy)"
    if cut:
        text += " (bands reach beyond the axes)"
    return "\n".join(textwrap.wrap(text, TITLE_WRAP))


def _draw_throughput(d: _ThroughputData) -> Figure:
    from matplotlib.patches import Patch

    fig = figure(6.0)
    axes = fig.subplots(1, len(d.panels), squeeze=False)[0]
    labels = [a.name if a.name == a.label else f"{a.name}\n{a.label}" for a in d.arms]
    handles: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    rotate = len(d.arms) > 6
    for ax, (metric, series) in zip(axes, d.panels, strict=True):
        low, high = limits(series)
        cut = False
        for s in series:
            if s.band is not None:
                center, floor = s.band
                ax.axhspan(center / (1 + floor), center * (1 + floor), color=s.color, alpha=0.14, linewidth=0)
                extra.setdefault("band: control level ± sensitivity floor", Patch(color=GREY, alpha=0.3))
                cut = cut or center / (1 + floor) < low or center * (1 + floor) > high
            handles.setdefault(s.label, errorbar(ax, s, zorder=3))
        for i, arm in enumerate(d.arms):
            if arm.name == d.selected:
                ax.axvspan(i - 0.42, i + 0.42, color=SELECTED_COLOR, alpha=0.28, linewidth=0, zorder=0)
                extra.setdefault(f"selected: {arm.name}", Patch(color=SELECTED_COLOR, alpha=0.5))
        ax.set_ylim(low, high)
        ax.set_xticks(
            range(len(d.arms)),
            [terminal_lines(t) for t in labels],
            rotation=30 if rotate else 0,
            ha="right" if rotate else "center",
        )
        for tick, arm in zip(ax.get_xticklabels(), d.arms, strict=True):
            if arm.name == d.selected:
                tick.set_fontweight("bold")
        ax.set_xlim(-0.6, len(d.arms) - 0.4)
        ax.set_ylabel(
            "decode tok/s per stream" if metric == "decode_tps" else "aggregate tok/s per run (all streams)"
        )
        ax.set_title(_floor_title(metric, series, cut), fontsize=11)
        ax.set_xlabel("arm (off first, then by depth k)")
    handles.update(extra)
    fig.legend(
        list(handles.values()),
        list(handles.keys()),
        loc="outside lower center",
        ncols=min(len(handles), 5),
        frameon=False,
    )
    fig.suptitle(d.title + "\nmedian per cell, whiskers min-max over the counted runs")
    return fig


def _extract(data: ReportData, family: str | None) -> _ThroughputData | str:
    return _throughput_data(data, family or "")


PLOT: PlotKind[_ThroughputData] = PlotKind(
    key="throughput",
    title="Throughput by depth",
    caption="Decode tok/s per stream and aggregate tok/s per run against the arm's depth, one line per "
    "workload and concurrency: the median of the counted runs with min-max whiskers; the band is "
    "the control level ± the sensitivity floor (differences inside it are not findings); the "
    "selected arm is shaded.",
    extract=_extract,
    draw=_draw_throughput,
    per_family=True,
)
