"""What every plot of the report shares: the style, the `Plot` and `PlotKind` values, the figure and
its byte-identical PNG and SVG rendering, and the helpers the extraction steps use."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from mtpverdict._text import terminal_lines
from mtpverdict.formats.decision import ArmDecision, Decision
from mtpverdict.report.data import ReportData, file_stem

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOT_DPI = 110  # PNG pixels per inch: an 11-inch-wide figure is 1210 px, readable on a laptop screen
FIG_WIDTH = 11.0  # inches
# Arms (series, bars, ticks) one figure can label legibly at FIG_WIDTH; past it a plot is skipped with the
# reason (the tables list every arm). Without it a campaign of 10k arms drew a KV figure 605,000 px tall
# (0.55 in per bar, about 3 GB of pixels) and a legend of 10k entries.
MAX_PLOTTED_ARMS = 64
TITLE_WRAP = 52  # characters per line of a panel title (half the figure width at 11 pt)
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


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    color: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    lows: tuple[float, ...]  # error bar lower ends (absolute values)
    highs: tuple[float, ...]
    band: tuple[float, float] | None = None  # (center, floor) for a floor band
    width: float = 1.8
    assumed: bool = False  # the band's floor is the policy's assumption, not an estimate


def depth(arm: ArmDecision) -> int:
    if arm.is_control:
        return 0
    return arm.k if arm.k is not None else 10_000  # an unrecorded depth sorts last


def ordered(arms: Sequence[ArmDecision]) -> list[ArmDecision]:
    index = {a.name: i for i, a in enumerate(arms)}
    return sorted(arms, key=lambda a: (depth(a), index[a.name]))


def too_many(count: int, what: str) -> str:
    return (
        f"{count:,} {what}: more than {MAX_PLOTTED_ARMS} cannot be told apart in one figure; "
        "the tables list every arm"
    )


def family_arms(data: ReportData, family: str) -> list[ArmDecision]:
    return list(data.index.family_arms.get(family, ()))


def suffix(doc: Decision, family: str) -> str:
    return "" if len(doc.families) == 1 else f"-{file_stem(family)}"


def family_text(doc: Decision, family: str) -> str:
    return "" if len(doc.families) == 1 else f" (family {family})"


def figure(height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(FIG_WIDTH, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def images(fig: Figure) -> tuple[bytes, bytes]:
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=PLOT_DPI, metadata={"Software": None})
    # the layout is settled by the first save and depends on sizes in points, not on dpi: keep it
    fig.set_layout_engine("none")
    svg = io.BytesIO()
    fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
    return png.getvalue(), svg.getvalue()


def errorbar(ax: Axes, s: Series, **kwargs: Any) -> Any:
    yerr = [
        [max(0.0, y - lo) for y, lo in zip(s.ys, s.lows, strict=True)],
        [max(0.0, hi - y) for y, hi in zip(s.ys, s.highs, strict=True)],
    ]
    return ax.errorbar(
        s.xs, s.ys, yerr=yerr, color=s.color, marker="o", markersize=6, capsize=4, linewidth=s.width, **kwargs
    )


def limits(series: Sequence[Series]) -> tuple[float, float]:
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


def render(make: Callable[[], Figure]) -> tuple[bytes, bytes]:
    import matplotlib
    from matplotlib.text import Text

    with matplotlib.rc_context(cast(Any, RC_PARAMS)):
        fig = make()
        # names from data: no control character reaches the SVG's XML (tick labels, which the formatter
        # sets again at draw time, are made safe where they are set)
        for text in fig.findobj(Text):
            text.set_text(terminal_lines(text.get_text()))
        return images(fig)


def make_plot(key: str, title: str, caption: str, found: Any, draw: Callable[[Any], Figure]) -> Plot:
    if isinstance(found, str):
        return Plot(key=key, title=title, caption=caption, skipped=found)
    png, svg = render(lambda: draw(found))
    return Plot(key=key, title=title, caption=caption, png=png, svg=svg)


T = TypeVar("T")


def every_family(data: ReportData, family: str) -> bool:
    """A per-family plot drawn for every family (the default of `PlotKind.drawn_for`)."""
    return True


def always_shown(data: ReportData) -> bool:
    """A campaign-level plot every report shows (the default of `PlotKind.shown`)."""
    return True


@dataclass(frozen=True, slots=True)
class PlotKind(Generic[T]):
    """What one plot module provides (its `PLOT`, listed in plots/registry.py).

    `extract` is pure (no matplotlib): what to draw, or a string saying why nothing is drawn; `draw`
    turns what was extracted into a figure. A campaign-level plot is extracted with family None; a
    per-family plot once per family that `drawn_for` admits, its file stem and title naming the family
    when the decision has several.
    """

    key: str  # the file stem: KEY.png and KEY.svg (KEY-FAMILY per family when there are several)
    title: str
    caption: str
    extract: Callable[[ReportData, str | None], T | str]
    draw: Callable[[T], Figure]
    per_family: bool = False
    drawn_for: Callable[[ReportData, str], bool] = every_family
    shown: Callable[[ReportData], bool] = always_shown  # a campaign-level plot only some reports have

    def plots(self, data: ReportData) -> list[Plot]:
        """This kind's plots of one report, rendered (or skipped with the reason)."""
        if not self.per_family:
            if not self.shown(data):
                return []
            return [make_plot(self.key, self.title, self.caption, self.extract(data, None), self.draw)]
        doc = data.decision
        return [
            make_plot(
                self.key + suffix(doc, family),
                self.title + family_text(doc, family),
                self.caption,
                self.extract(data, family),
                self.draw,
            )
            for family in doc.families
            if self.drawn_for(data, family)
        ]
