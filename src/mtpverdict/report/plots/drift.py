"""Run order against throughput (drift): every run in campaign order, the control boots marked."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from mtpverdict._text import terminal_lines
from mtpverdict.report.data import ReportData
from mtpverdict.report.plots.base import (
    COLORS,
    GREY,
    MAX_PLOTTED_ARMS,
    PlotKind,
    family_arms,
    family_text,
    figure,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PANEL_HEIGHT = 2.7  # inches per stacked panel (drift plot)
MAX_DRIFT_PANELS = 6  # cells stacked in the drift plot before the figure gets too tall to read


@dataclass(frozen=True, slots=True)
class _ControlBoot:
    arm: str
    color: str
    runs: tuple[tuple[int, float, bool], ...]  # (run order, decode tok/s, cold)
    median: float  # of the warm runs (all runs when the boot has only a cold one)


@dataclass(frozen=True, slots=True)
class _DriftPanel:
    workload: str
    concurrency: int
    others: tuple[tuple[int, float, bool], ...]  # candidate runs: (run order, decode tok/s, cold)
    controls: tuple[_ControlBoot, ...]  # in boot order


@dataclass(frozen=True, slots=True)
class _DriftData:
    title: str
    panels: tuple[_DriftPanel, ...]
    boots: tuple[tuple[str, float, float], ...]  # (arm, first run order, last run order)
    control_colors: tuple[tuple[str, str], ...]  # (control arm, colour)
    dropped: int
    controls_only: bool = False  # too many boots: only the control boots are banded and labelled


def _points(frame: pd.DataFrame) -> tuple[tuple[int, float, bool], ...]:
    return tuple(
        (int(o), float(v), bool(cold))
        for o, v, cold in zip(frame["run_order"], frame["decode_tps"], frame["cold"], strict=True)
    )


def _drift_data(data: ReportData, family: str) -> _DriftData | str:
    doc = data.decision
    runs = data.runs
    members = family_arms(data, family)
    controls = [a.name for a in members if a.is_control]
    if runs.empty:
        only = " (summary records only)" if not data.results.summaries.empty else ""
        return f"no request runs, so run order is not known{only}"
    fam = runs[runs["arm"].isin([a.name for a in members]) & runs["decode_tps"].notna()]
    control_runs = fam[fam["arm"].isin(controls)]
    boot_keys = list(
        dict.fromkeys(
            (str(a), int(b)) for a, b in zip(control_runs["arm"], control_runs["boot"], strict=True)
        )
    )
    if len(boot_keys) < 2:
        count = "one" if boot_keys else "none"
        return f"needs two or more control boots measured run by run (an off_A/off_B pair); found {count}"
    cells = sorted(
        {
            (str(w), int(c))
            for w, c in zip(control_runs["workload"], control_runs["concurrency"], strict=True)
        },
        key=lambda k: (data.workload_rank(k[0]), k[0], k[1]),
    )
    shown, dropped = cells[:MAX_DRIFT_PANELS], max(0, len(cells) - MAX_DRIFT_PANELS)
    colors = {arm: COLORS[i % len(COLORS)] for i, arm in enumerate(dict.fromkeys(a for a, _ in boot_keys))}
    panels = []
    for workload, conc in shown:
        cell = fam[(fam["workload"] == workload) & (fam["concurrency"] == conc)]
        boots = []
        for arm, boot in boot_keys:
            pts = _points(cell[(cell["arm"] == arm) & (cell["boot"] == boot)])
            if pts:
                warm = [v for _, v, cold in pts if not cold] or [v for _, v, _ in pts]
                boots.append(
                    _ControlBoot(arm=arm, color=colors[arm], runs=pts, median=statistics.median(warm))
                )
        panels.append(
            _DriftPanel(
                workload=workload,
                concurrency=conc,
                others=_points(cell[~cell["arm"].isin(controls)]),
                controls=tuple(boots),
            )
        )
    spans = (
        fam.groupby(["boot_order", "arm", "boot"], sort=True)["run_order"].agg(["min", "max"]).reset_index()
    )
    boot_spans = tuple(
        (str(a), float(lo), float(hi))
        for a, lo, hi in zip(spans["arm"], spans["min"], spans["max"], strict=True)
    )
    controls_only = len(boot_spans) > MAX_PLOTTED_ARMS  # too many boots to band and label one by one
    if controls_only:
        boot_spans = tuple(span for span in boot_spans if span[0] in controls)
    drift = [c for c in doc.controls if c.name == "drift"]
    status = ""
    if drift and drift[0].value is not None:
        status = f" (drift {drift[0].value * 100:+.1f}%, {drift[0].status})"
    elif drift:
        status = f" (drift control: {drift[0].status})"
    return _DriftData(
        title=f"{data.campaign_label}: decode tok/s per run, in campaign order{status}"
        + family_text(doc, family),
        panels=tuple(panels),
        boots=boot_spans,
        control_colors=tuple(colors.items()),
        dropped=dropped,
        controls_only=controls_only,
    )


def _draw_drift(d: _DriftData) -> Figure:
    from matplotlib.lines import Line2D

    n = len(d.panels)
    fig = figure(1.9 + PANEL_HEIGHT * n)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    any_cold = False
    for ax, panel in zip(axes, d.panels, strict=True):
        for i, (_arm, lo, hi) in enumerate(d.boots):
            if i % 2 or d.controls_only:
                ax.axvspan(lo - 0.5, hi + 0.5, color="#efefef", linewidth=0, zorder=0)
        groups = [(GREY, 14, panel.others)] + [(b.color, 46, b.runs) for b in panel.controls]
        for color, size, pts in groups:
            warm = [(o, v) for o, v, cold in pts if not cold]
            cold = [(o, v) for o, v, c in pts if c]
            any_cold = any_cold or bool(cold)
            ax.scatter([o for o, _ in warm], [v for _, v in warm], s=size, color=color, zorder=3)
            if cold:
                ax.scatter(
                    [o for o, _ in cold],
                    [v for _, v in cold],
                    s=size,
                    facecolors="white",
                    edgecolors=color,
                    linewidths=1.5,
                    zorder=3,
                )
        centers = []
        for b in panel.controls:
            lo, hi = min(o for o, _, _ in b.runs), max(o for o, _, _ in b.runs)
            ax.plot([lo - 0.5, hi + 0.5], [b.median, b.median], color=b.color, linewidth=3, zorder=4)
            centers.append(((lo + hi) / 2, b.median))
        ax.plot(
            [x for x, _ in centers], [y for _, y in centers], color="black", linestyle="--", linewidth=1.1
        )
        ax.set_ylabel(f"decode tok/s\n{panel.workload} c={panel.concurrency}")
    handles: list[Any] = [Line2D([], [], color=GREY, marker="o", linestyle="none", markersize=4)]
    labels = ["other arms' runs"]
    for arm, color in d.control_colors:
        handles.append(Line2D([], [], color=color, marker="o", linestyle="-", linewidth=3, markersize=7))
        labels.append(f"{arm} runs (bar: boot median)")
    handles.append(Line2D([], [], color="black", linestyle="--"))
    labels.append("control medians in campaign order (drift)")
    if any_cold:
        handles.append(Line2D([], [], color="black", marker="o", markerfacecolor="white", linestyle="none"))
        labels.append("cold run (hollow)")
    top = axes[0].secondary_xaxis("top")
    top.set_xticks([(lo + hi) / 2 for _, lo, hi in d.boots], [terminal_lines(a) for a, _, _ in d.boots])
    top.tick_params(length=0, labelsize=9, labelrotation=45 if len(d.boots) > 8 else 0)
    axes[-1].set_xlabel(
        "run order in the campaign (a band per control boot; too many boots to band them all)"
        if d.controls_only
        else "run order in the campaign (one band per boot, in boot order)"
    )
    fig.legend(handles, labels, loc="outside lower center", ncols=3, frameon=False)
    title = d.title
    if d.dropped:
        title += f"\n{d.dropped} more cells not shown"
    fig.suptitle(title)
    return fig


def _extract(data: ReportData, family: str | None) -> _DriftData | str:
    return _drift_data(data, family or "")


def _has_controls(data: ReportData, family: str) -> bool:
    """A family without a control arm has no control boots to show drift by."""
    return any(a.is_control for a in family_arms(data, family))


PLOT: PlotKind[_DriftData] = PlotKind(
    key="drift",
    title="Run order against throughput (drift)",
    caption="Decode tok/s of every run in campaign order, one panel per workload and concurrency. The "
    "control boots (off_A first, off_B last) are coloured with their medians dashed: a gap "
    "between them is drift or boot-to-boot noise, and bounds what the campaign can resolve.",
    extract=_extract,
    draw=_draw_drift,
    per_family=True,
    drawn_for=_has_controls,
)
