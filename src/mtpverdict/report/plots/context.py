"""Ratio to off against context depth: where speculation stops paying as prompts grow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict.report.data import ReportData, finite
from mtpverdict.report.plots.base import (
    COLORS,
    GREY,
    MAX_PLOTTED_ARMS,
    PlotKind,
    Series,
    errorbar,
    figure,
    too_many,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True, slots=True)
class _ContextData:
    title: str
    series: tuple[Series, ...]
    crossings: tuple[tuple[str, float], ...]  # (colour, depth from which the ratio stays below 1)
    floor: float | None


def _context_data(data: ReportData) -> _ContextData | str:
    doc = data.decision
    depths = {w.id: data.prompt_depth(w.id) for w in data.results.campaign.workloads}
    groups: dict[tuple[str, int], list[tuple[float, float, float, float]]] = {}
    for c in doc.comparisons:
        depth = depths.get(c.workload)
        if c.metric != "decode_tps" or depth is None or c.ratio is None:
            continue
        low = c.ci_low if finite(c.ci_low) else c.ratio
        high = c.ci_high if finite(c.ci_high) else c.ratio
        assert low is not None and high is not None
        groups.setdefault((c.arm, c.concurrency), []).append((float(depth), c.ratio, low, high))
    kept = {key: sorted(rows) for key, rows in groups.items() if len({r[0] for r in rows}) >= 2}
    if not kept:
        return (
            "no arm was compared with off at two or more known prompt depths "
            "(prompt_tokens in campaign.json or reported by the server)"
        )
    if len(kept) > MAX_PLOTTED_ARMS:
        return too_many(len(kept), "arm and concurrency series")
    order = data.index.arm_rank
    keys = sorted(kept, key=lambda k: (order.get(k[0], 0), k[1]))
    several_c = len({k[1] for k in keys}) > 1
    series, crossings = [], []
    floors: set[float] = set()
    for i, (arm_name, conc) in enumerate(keys):
        rows = kept[(arm_name, conc)]
        arm = data.index.arms.get(arm_name)
        color = COLORS[i % len(COLORS)]
        below_from = None
        for j in range(len(rows)):
            if all(r[1] < 1 for r in rows[j:]):
                below_from = j
                break
        if below_from is None:
            regime = "at or above off at the deepest prompt"
        elif below_from == 0:
            regime = "below off at every depth measured"
        else:
            regime = f"below off from {rows[below_from][0]:,.0f} prompt tokens"
            crossings.append((color, rows[below_from][0]))
        label = f"{arm_name}" + (f" c={conc}" if several_c else "")
        if arm is not None:
            label += f" ({arm.label})"
        selected = arm_name == doc.selected_arm
        series.append(
            Series(
                label=f"{label}: {regime}" + (" [selected]" if selected else ""),
                color=color,
                xs=tuple(r[0] for r in rows),
                ys=tuple(r[1] for r in rows),
                lows=tuple(r[2] for r in rows),
                highs=tuple(r[3] for r in rows),
                width=3.4 if selected else 1.8,
            )
        )
        floors |= {
            c.floor
            for c in data.index.arm_comparisons.get(arm_name, ())
            if c.metric == "decode_tps" and c.floor is not None
        }
    return _ContextData(
        title=f"{data.campaign_label}: decode ratio to off against prompt depth",
        series=tuple(series),
        crossings=tuple(crossings),
        floor=floors.pop() if len(floors) == 1 else None,
    )


def _tokens_label(x: float, _pos: object = None) -> str:
    return f"{x / 1000:,.0f}k" if x >= 1000 else f"{x:,.0f}"


def _draw_context(d: _ContextData) -> Figure:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig = figure(5.8)
    ax = fig.subplots()
    if d.floor is not None:
        ax.axhspan(
            1 / (1 + d.floor),
            1 + d.floor,
            color=GREY,
            alpha=0.2,
            linewidth=0,
            label=f"off ± floor ({d.floor * 100:.0f}%)",
        )
    ax.axhline(1.0, color="black", linewidth=1.2, label="ratio 1 = as fast as off")
    for s in d.series:
        errorbar(ax, s, label=s.label, zorder=3)
    for color, depth in d.crossings:
        ax.axvline(depth, color=color, linestyle=":", linewidth=1.6)
    depths = sorted({x for s in d.series for x in s.xs})
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(depths))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(_tokens_label))
    ax.set_xlim(depths[0] / 1.25, depths[-1] * 1.25)
    ax.set_xlabel("prompt depth (tokens, log scale)")
    ax.set_ylabel("decode tok/s ratio to off (x)")
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    fig.suptitle(
        d.title + "\ndotted line: the depth from which the arm stays below off (speculation stops paying)"
    )
    return fig


PLOT: PlotKind[_ContextData] = PlotKind(
    key="context",
    title="Ratio to off against context depth",
    caption="Decode tok/s of each arm divided by its control's at each prompt depth, with the interval "
    "where one is known. Where the ratio crosses below 1 and stays there, speculation stops "
    "paying (dotted line).",
    extract=lambda data, _family: _context_data(data),
    draw=_draw_context,
)
