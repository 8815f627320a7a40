"""The report's plots: matplotlib (Agg) figures rendered to PNG and SVG bytes, identical on every rerun.

Each plot has a pure extraction step (what to draw, or why there is nothing to draw) and a drawing
step that imports matplotlib only when called, so importing this module (or the CLI) stays cheap. A plot
without data is never drawn as an empty axes: it comes back with `skipped` saying why.
"""

from __future__ import annotations

import io
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from mtpverdict._text import terminal_lines
from mtpverdict.formats.decision import ArmDecision, Decision, SurfaceSummary
from mtpverdict.report.category_map import category_map_data, draw_category_map
from mtpverdict.report.data import ReportData, file_stem, finite
from mtpverdict.report.regime import draw_regime, regime_plot_data
from mtpverdict.report.tables import kv_ceiling

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOT_DPI = 110  # PNG pixels per inch: an 11-inch-wide figure is 1210 px, readable on a laptop screen
FIG_WIDTH = 11.0  # inches
PANEL_HEIGHT = 2.7  # inches per stacked panel (drift plot)
MAX_DRIFT_PANELS = 6  # cells stacked in the drift plot before the figure gets too tall to read
# Arms (series, bars, ticks) one figure can label legibly at FIG_WIDTH; past it a plot is skipped with the
# reason (the tables list every arm). Without it a campaign of 10k arms drew a KV figure 605,000 px tall
# (0.55 in per bar, about 3 GB of pixels) and a legend of 10k entries.
MAX_PLOTTED_ARMS = 64
TITLE_WRAP = 52  # characters per line of a panel title (half the figure width at 11 pt)
KV_MIN_ROWS = 3  # the KV chart keeps room for this many bars so one bar is not drawn as a block
POSITION_DODGE = 0.05  # draft positions: sideways offset between arms, so equal rates stay visible
BAND_ZOOM_LIMIT = 3.0  # a floor band wider than this many data spans is cut by the axes, not shown whole
SVG_HASH_SALT = "mtpverdict"  # fixed salt: SVG element ids (clip paths) are the same on every rerun
# matplotlib's tab10, spelled out so the extraction step needs no matplotlib import
COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
SELECTED_COLOR = "#f2b134"
GREY = "#9a9a9a"
VERDICT_COLORS = {
    "control": "#8c8c8c",
    "eligible": "#4c72b0",
    "inconclusive": "#dd8452",
    "rejected": "#c44e52",
    "void": "#7b3f3f",
}
RC_PARAMS: dict[str, Any] = {
    "svg.hashsalt": SVG_HASH_SALT,
    "svg.fonttype": "none",  # text stays text: smaller files, searchable, no embedded glyph paths
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "figure.titlesize": 13,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "text.parse_math": False,  # a `$` in a name from data is a dollar sign, never mathtext to parse
}


@dataclass(frozen=True, slots=True)
class Plot:
    """One plot of the report: its file stem, title and caption; the images, or why it was skipped."""

    key: str
    title: str
    caption: str
    skipped: str | None = None
    png: bytes = b""
    svg: bytes = b""


# ---------------------------------------------------------------- extraction (pure, no matplotlib)


@dataclass(frozen=True, slots=True)
class _Series:
    label: str
    color: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    lows: tuple[float, ...]  # error bar lower ends (absolute values)
    highs: tuple[float, ...]
    band: tuple[float, float] | None = None  # (center, floor) for a floor band
    width: float = 1.8
    assumed: bool = False  # the band's floor is the policy's assumption, not an estimate


def _depth(arm: ArmDecision) -> int:
    if arm.is_control:
        return 0
    return arm.k if arm.k is not None else 10_000  # an unrecorded depth sorts last


def _ordered(arms: Sequence[ArmDecision]) -> list[ArmDecision]:
    index = {a.name: i for i, a in enumerate(arms)}
    return sorted(arms, key=lambda a: (_depth(a), index[a.name]))


def _too_many(count: int, what: str) -> str:
    return (
        f"{count:,} {what}: more than {MAX_PLOTTED_ARMS} cannot be told apart in one figure; "
        "the tables list every arm"
    )


def _family_arms(data: ReportData, family: str) -> list[ArmDecision]:
    return list(data.index.family_arms.get(family, ()))


def _suffix(doc: Decision, family: str) -> str:
    return "" if len(doc.families) == 1 else f"-{file_stem(family)}"


def _family_text(doc: Decision, family: str) -> str:
    return "" if len(doc.families) == 1 else f" (family {family})"


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
    members = {a.name for a in _family_arms(data, family)}
    assumed = {
        c.floor
        for c in doc.comparisons
        if c.arm in members
        and (c.workload, c.concurrency, c.metric) == (workload, conc, metric)
        and c.floor is not None
    }
    return (assumed.pop(), True) if len(assumed) == 1 else (None, False)


def _throughput_series(data: ReportData, family: str, metric: str, arms: list[ArmDecision]) -> list[_Series]:
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
            _Series(
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
    panels: tuple[tuple[str, tuple[_Series, ...]], ...]  # (metric, series)


def _throughput_data(data: ReportData, family: str) -> _ThroughputData | str:
    doc = data.decision
    metrics = ("decode_tps", "aggregate_tps")
    family_arms = _family_arms(data, family)
    with_data = {c.arm for c in doc.cells if c.metric in metrics}
    arms = _ordered([a for a in family_arms if a.name in with_data])
    if not arms:
        return "no arm of this family has a throughput measurement"
    if len(arms) > MAX_PLOTTED_ARMS:
        return _too_many(len(arms), "arms measured")
    panels = []
    for metric in metrics:
        series = _throughput_series(data, family, metric, arms)
        if series:
            panels.append((metric, tuple(series)))
    return _ThroughputData(
        title=f"{data.campaign_label}: throughput by arm, in order of depth{_family_text(doc, family)}",
        arms=tuple(arms),
        selected=doc.selected_arm,
        panels=tuple(panels),
    )


def _positions_of(arm: ArmDecision) -> SurfaceSummary | None:
    """The surface an arm's per-position rates come from: the primary surface's first."""
    acc = arm.acceptance
    if acc is None:
        return None
    return next((s for s in (acc.primary, *acc.surfaces) if s.per_position_rate), None)


@dataclass(frozen=True, slots=True)
class _AcceptanceData:
    title: str
    series: tuple[_Series, ...]
    minimum: float | None  # the policy's minimum last-position rate, when the arms share one


def _acceptance_data(data: ReportData) -> _AcceptanceData | str:
    doc = data.decision
    series = []
    arms = _ordered([a for a in doc.arms if not a.is_control and _positions_of(a) is not None])
    if len(arms) > MAX_PLOTTED_ARMS:
        return _too_many(len(arms), "arms with per-position rates")
    for i, arm in enumerate(arms):
        found = _positions_of(arm)
        assert found is not None and found.per_position_rate is not None
        rates, source = found.per_position_rate, found.source
        lows = [
            (lo if lo is not None else r) * 100
            for r, lo in zip(rates, found.per_position_low or rates, strict=True)
        ]
        highs = [
            (hi if hi is not None else r) * 100
            for r, hi in zip(rates, found.per_position_high or rates, strict=True)
        ]
        selected = arm.name == doc.selected_arm
        primary = arm.acceptance.primary if arm.acceptance is not None else None
        if primary is not None and primary.draft_tokens is not None:
            n_text = f"{primary.draft_tokens:,} drafted tokens ({primary.source})"
        else:
            n_text = "sample size not recorded"
        if primary is None or primary.source != source:
            n_text += f", positions from {source}"
        series.append(
            _Series(
                label=f"{arm.name} ({arm.label}): {n_text}" + (" [selected]" if selected else ""),
                color=COLORS[i % len(COLORS)],
                # a small sideways offset per arm keeps equal rates at one position from hiding each other
                xs=tuple(p + POSITION_DODGE * (i - 1) for p in range(1, len(rates) + 1)),
                ys=tuple(r * 100 for r in rates),
                lows=tuple(lows),
                highs=tuple(highs),
                width=3.4 if selected else 1.8,
            )
        )
    if not series:
        return "no arm recorded per-position acceptance (overall rates are in the acceptance table)"
    minima = {
        r.param("min_last_position_rate") for a in doc.arms for r in a.rules_of("stable_acceptance")
    } - {None}
    minimum = minima.pop() if len(minima) == 1 else None
    return _AcceptanceData(
        title=f"{data.campaign_label}: acceptance per draft position",
        series=tuple(series),
        minimum=minimum,
    )


@dataclass(frozen=True, slots=True)
class _ContextData:
    title: str
    series: tuple[_Series, ...]
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
        return _too_many(len(kept), "arm and concurrency series")
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
            _Series(
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
        return _too_many(pooled, "arms with a KV pool")
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
    family_arms = _family_arms(data, family)
    controls = [a.name for a in family_arms if a.is_control]
    if runs.empty:
        only = " (summary records only)" if not data.results.summaries.empty else ""
        return f"no request runs, so run order is not known{only}"
    fam = runs[runs["arm"].isin([a.name for a in family_arms]) & runs["decode_tps"].notna()]
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
        + _family_text(doc, family),
        panels=tuple(panels),
        boots=boot_spans,
        control_colors=tuple(colors.items()),
        dropped=dropped,
        controls_only=controls_only,
    )


# ---------------------------------------------------------------- drawing (matplotlib, Agg)


def _figure(height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(FIG_WIDTH, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _images(fig: Figure) -> tuple[bytes, bytes]:
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=PLOT_DPI, metadata={"Software": None})
    # the layout is settled by the first save and depends on sizes in points, not on dpi: keep it
    fig.set_layout_engine("none")
    svg = io.BytesIO()
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    return png.getvalue(), svg.getvalue()


def _errorbar(ax: Axes, s: _Series, **kwargs: Any) -> Any:
    yerr = [
        [max(0.0, y - lo) for y, lo in zip(s.ys, s.lows, strict=True)],
        [max(0.0, hi - y) for y, hi in zip(s.ys, s.highs, strict=True)],
    ]
    return ax.errorbar(
        s.xs, s.ys, yerr=yerr, color=s.color, marker="o", markersize=6, capsize=4, linewidth=s.width, **kwargs
    )


def _limits(series: Sequence[_Series]) -> tuple[float, float]:
    """Y limits: the data and the floor bands, unless the bands would squash the data (a huge floor)."""
    lo = min(min(s.lows) for s in series)
    hi = max(max(s.highs) for s in series)
    span = (hi - lo) or abs(hi) * 0.1 or 1.0
    bands = [(c / (1 + f), c * (1 + f)) for s in series if s.band is not None for c, f in [s.band]]
    if bands:
        full_lo = min(lo, *(b[0] for b in bands))
        full_hi = max(hi, *(b[1] for b in bands))
        if full_hi - full_lo <= BAND_ZOOM_LIMIT * span:
            lo, hi = full_lo, full_hi
            span = hi - lo
    return lo - 0.08 * span, hi + 0.08 * span


def _floor_title(metric: str, series: Sequence[_Series], cut: bool) -> str:
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

    fig = _figure(6.0)
    axes = fig.subplots(1, len(d.panels), squeeze=False)[0]
    labels = [a.name if a.name == a.label else f"{a.name}\n{a.label}" for a in d.arms]
    handles: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    rotate = len(d.arms) > 6
    for ax, (metric, series) in zip(axes, d.panels, strict=True):
        low, high = _limits(series)
        cut = False
        for s in series:
            if s.band is not None:
                center, floor = s.band
                ax.axhspan(center / (1 + floor), center * (1 + floor), color=s.color, alpha=0.14, linewidth=0)
                extra.setdefault("band: control level ± sensitivity floor", Patch(color=GREY, alpha=0.3))
                cut = cut or center / (1 + floor) < low or center * (1 + floor) > high
            handles.setdefault(s.label, _errorbar(ax, s, zorder=3))
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


def _draw_acceptance(d: _AcceptanceData) -> Figure:
    from matplotlib.ticker import MaxNLocator

    fig = _figure(5.6)
    ax = fig.subplots()
    for s in d.series:
        _errorbar(ax, s, label=s.label, zorder=3)
    if d.minimum is not None:
        ax.axhline(
            d.minimum * 100,
            color="black",
            linestyle="--",
            linewidth=1.2,
            label=f"policy minimum for the last position ({d.minimum * 100:.0f}%)",
        )
    ax.set_ylim(0, 105)
    ax.set_xlim(0.6, max(max(s.xs) for s in d.series) + 0.4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("draft position (1 = first drafted token of a round)")
    ax.set_ylabel("accepted at this position\n(% of draft rounds)")
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    fig.suptitle(d.title + "\nwhiskers: Wilson interval on the draft rounds where the sample size is known")
    return fig


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
    arms = _ordered([a for a in data.decision.arms if a.break_even is not None])
    if not arms:
        return "no candidate has both a decode-rate comparison and a mean acceptance length"
    if len(arms) > MAX_PLOTTED_ARMS:
        return _too_many(len(arms), "arms with break-even")
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

    fig = _figure(6.0)
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


def _tokens_label(x: float, _pos: object = None) -> str:
    return f"{x / 1000:,.0f}k" if x >= 1000 else f"{x:,.0f}"


def _draw_context(d: _ContextData) -> Figure:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig = _figure(5.8)
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
        _errorbar(ax, s, label=s.label, zorder=3)
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


def _draw_kv(d: _KvData) -> Figure:
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    fig = _figure(max(3.6, 1.6 + 0.55 * len(d.bars)))
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


def _draw_drift(d: _DriftData) -> Figure:
    from matplotlib.lines import Line2D

    n = len(d.panels)
    fig = _figure(1.9 + PANEL_HEIGHT * n)
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


# ---------------------------------------------------------------- assembly


def _render(make: Callable[[], Figure]) -> tuple[bytes, bytes]:
    import matplotlib
    from matplotlib.text import Text

    with matplotlib.rc_context(cast(Any, RC_PARAMS)):
        fig = make()
        # names from data: no control character reaches the SVG's XML (tick labels, which the formatter
        # sets again at draw time, are made safe where they are set)
        for text in fig.findobj(Text):
            text.set_text(terminal_lines(text.get_text()))
        return _images(fig)


def _plot(key: str, title: str, caption: str, found: Any, draw: Callable[[Any], Figure]) -> Plot:
    if isinstance(found, str):
        return Plot(key=key, title=title, caption=caption, skipped=found)
    png, svg = _render(lambda: draw(found))
    return Plot(key=key, title=title, caption=caption, png=png, svg=svg)


def _break_even_plot(data: ReportData) -> Plot:
    return _plot(
        "break-even",
        "Acceptance against break-even",
        "Each speculative arm's cells: the measured mean acceptance length against the length at which "
        "a step stops paying (its cost in baseline decode steps). Points above the dashed line pay; "
        "the distance to the line is the margin a drafter can lose in production before speculation "
        "costs throughput.",
        _break_even_data(data),
        _draw_break_even,
    )


def _category_plot(data: ReportData) -> Plot:
    return _plot(
        "category",
        "Acceptance per dataset category and depth",
        "Each candidate's acceptance on each category of a dataset workload (every concurrency pooled) "
        "with its interval, and the category's outcome against off (the family procedure over that "
        "category's cells alone). A drafter that wins on code and loses on chat shows here before the "
        "pooled figure hides it.",
        category_map_data(data.decision, data.campaign_label),
        lambda d: draw_category_map(d, _figure),
    )


def report_plots(data: ReportData) -> tuple[Plot, ...]:
    """Every plot of the report, rendered; one without data comes back with `skipped` set."""
    doc = data.decision
    plots = [
        _plot(
            "throughput" + _suffix(doc, family),
            "Throughput by depth" + _family_text(doc, family),
            "Decode tok/s per stream and aggregate tok/s per run against the arm's depth, one line per "
            "workload and concurrency: the median of the counted runs with min-max whiskers; the band is "
            "the control level ± the sensitivity floor (differences inside it are not findings); the "
            "selected arm is shaded.",
            _throughput_data(data, family),
            _draw_throughput,
        )
        for family in doc.families
    ]
    plots += [
        _plot(
            "regime" + _suffix(doc, family),
            "Regime map: depth against concurrency" + _family_text(doc, family),
            "Each depth's ratio to off at each concurrency, one panel per workload, with its interval and "
            "coloured by the cell's outcome (Holm across every depth and cell of the family). The framed "
            "cell of each column is the best-supported depth there (off included); a dashed frame means a "
            "difference was not resolved, so off or the smaller depth is kept.",
            regime_plot_data(doc, family, data.campaign_label),
            lambda d: draw_regime(d, _figure),
        )
        for family in doc.families
        if any(c.family == family for c in doc.regime)
    ]
    plots.append(
        _plot(
            "acceptance",
            "Acceptance per draft position",
            "Per-position acceptance rate of each speculative arm: how often the i-th drafted token of a "
            "round is kept. A curve that falls towards the last position means the deepest drafts are "
            "mostly wasted work; the dashed line is the policy's minimum for the last position.",
            _acceptance_data(data),
            _draw_acceptance,
        )
    )
    if doc.categories:  # dataset workloads only: a campaign of plain prompts has no categories
        plots.append(_category_plot(data))
    plots.append(_break_even_plot(data))
    plots.append(
        _plot(
            "context",
            "Ratio to off against context depth",
            "Decode tok/s of each arm divided by its control's at each prompt depth, with the interval "
            "where one is known. Where the ratio crosses below 1 and stays there, speculation stops "
            "paying (dotted line).",
            _context_data(data),
            _draw_context,
        )
    )
    plots.append(
        _plot(
            "kv",
            "KV pool and concurrency ceiling",
            "KV cache pool per arm (bars, coloured by verdict) and the concurrency ceiling it allows "
            "(pool / window, top axis). Deeper speculation usually costs pool: the drafter's KV and "
            "buffers come out of the same memory.",
            _kv_data(data),
            _draw_kv,
        )
    )
    for family in doc.families:
        if not any(a.is_control for a in _family_arms(data, family)):
            continue
        plots.append(
            _plot(
                "drift" + _suffix(doc, family),
                "Run order against throughput (drift)" + _family_text(doc, family),
                "Decode tok/s of every run in campaign order, one panel per workload and concurrency. The "
                "control boots (off_A first, off_B last) are coloured with their medians dashed: a gap "
                "between them is drift or boot-to-boot noise, and bounds what the campaign can resolve.",
                _drift_data(data, family),
                _draw_drift,
            )
        )
    return tuple(plots)
