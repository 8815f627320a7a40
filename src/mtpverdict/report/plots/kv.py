"""KV pool and concurrency ceiling: each arm's KV cache pool and the concurrency it allows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mtpverdict._text import terminal_lines
from mtpverdict.report.data import ReportData
from mtpverdict.report.plots.base import (
    GREY,
    MAX_PLOTTED_ARMS,
    SELECTED_COLOR,
    VERDICT_COLORS,
    PlotKind,
    figure,
    too_many,
)
from mtpverdict.report.tables import kv_ceiling

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KV_MIN_ROWS = 3  # the KV chart keeps room for this many bars so one bar is not drawn as a block


@dataclass(frozen=True, slots=True)
class _KvBar:
    label: str
    pool: int
    ceiling: float | None
    color: str
    selected: bool


@dataclass(frozen=True, slots=True)
class _KvData:
    title: str
    bars: tuple[_KvBar, ...]
    window: int | None
    minimum: float | None  # the policy's minimum ceiling (x windows), when shared
    verdicts: tuple[str, ...]


def _kv_data(data: ReportData) -> _KvData | str:
    doc = data.decision
    pooled = sum(arm.kv.kv_cache_tokens is not None for arm in doc.arms)
    if pooled > MAX_PLOTTED_ARMS:
        return too_many(pooled, "arms with a KV pool")
    bars, windows, verdicts = [], set(), []
    for arm in doc.arms:
        pool = arm.kv.kv_cache_tokens
        if pool is None:
            continue
        window, ceiling = kv_ceiling(arm)
        windows.add(window)
        bars.append(
            _KvBar(
                label=arm.name if arm.name == arm.label else f"{arm.name} ({arm.label})",
                pool=pool,
                ceiling=ceiling,
                color=VERDICT_COLORS.get(arm.verdict, GREY),
                selected=arm.name == doc.selected_arm,
            )
        )
        if arm.verdict not in verdicts:
            verdicts.append(arm.verdict)
    if not bars:
        return "no boot recorded its KV cache pool"
    window = windows.pop() if len(windows) == 1 else None
    minima = {r.param("min_concurrency") for a in doc.arms for r in a.rules_of("kv_ceiling")} - {None}
    return _KvData(
        title=f"{data.campaign_label}: KV cache pool and concurrency ceiling per arm",
        bars=tuple(bars),
        window=window,
        minimum=minima.pop() if len(minima) == 1 and window is not None else None,
        verdicts=tuple(verdicts),
    )


def _draw_kv(d: _KvData) -> Figure:
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    fig = figure(max(3.6, 1.6 + 0.55 * len(d.bars)))
    ax = fig.subplots()
    ys = list(range(len(d.bars)))
    for y, bar in zip(ys, d.bars, strict=True):
        ax.barh(
            y,
            bar.pool,
            color=bar.color,
            edgecolor=SELECTED_COLOR if bar.selected else "none",
            linewidth=4 if bar.selected else 0,
            height=0.62,
        )
        text = f"{bar.pool:,} tokens"
        if bar.ceiling is not None:
            text += f"  ·  ceiling {bar.ceiling:.2f}x"
        ax.text(bar.pool, y, "  " + text, va="center", fontsize=10)
    ax.set_yticks(ys, [terminal_lines(b.label + ("  [selected]" if b.selected else "")) for b in d.bars])
    for tick, bar in zip(ax.get_yticklabels(), d.bars, strict=True):
        if bar.selected:
            tick.set_fontweight("bold")
    pad = max(0.0, (KV_MIN_ROWS - len(d.bars)) * 0.5)  # a lone bar stays a bar, not a block
    ax.set_ylim(len(d.bars) - 0.5 + pad, -0.5 - pad)
    ax.grid(axis="y", visible=False)
    top = max(b.pool for b in d.bars)
    right = top * 1.45
    if d.window is not None and d.minimum is not None:
        right = max(right, d.minimum * d.window * 1.15)
    ax.set_xlim(0, right)
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda x, _p: f"{x / 1e6:.1f}M" if top >= 1e6 else f"{x:,.0f}")
    )
    ax.set_xlabel("KV cache pool (tokens)")
    handles = [Patch(color=VERDICT_COLORS.get(v, GREY), label=v) for v in d.verdicts]
    if d.window is not None:
        window = d.window

        def to_ceiling(tokens: Any) -> Any:
            return tokens / window

        def to_tokens(ceiling: Any) -> Any:
            return ceiling * window

        secondary = ax.secondary_xaxis("top", functions=(to_ceiling, to_tokens))
        secondary.set_xlabel(f"concurrency ceiling (x windows of {window:,} tokens)")
        if d.minimum is not None:
            line = ax.axvline(d.minimum * window, color="black", linestyle="--", linewidth=1.2)
            line.set_label(f"policy minimum ceiling ({d.minimum:g}x)")
            handles.append(line)  # type: ignore[arg-type]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5), frameon=False)
    fig.suptitle(d.title + "\na ceiling is pool / window, not a measured concurrency")
    return fig


PLOT: PlotKind[_KvData] = PlotKind(
    key="kv",
    title="KV pool and concurrency ceiling",
    caption="KV cache pool per arm (bars, coloured by verdict) and the concurrency ceiling it allows "
    "(pool / window, top axis). Deeper speculation usually costs pool: the drafter's KV and "
    "buffers come out of the same memory.",
    extract=lambda data, _family: _kv_data(data),
    draw=_draw_kv,
)
