"""The regime map as a plot: each depth's ratio to off at each concurrency, one panel per workload."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtpverdict.report.data import ReportData
from mtpverdict.report.plots.base import PlotKind, figure
from mtpverdict.report.regime import RegimePlot, draw_regime, regime_plot_data

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _extract(data: ReportData, family: str | None) -> RegimePlot | str:
    return regime_plot_data(data.decision, family or "", data.campaign_label)


def _draw(d: RegimePlot) -> Figure:
    return draw_regime(d, figure)


def _has_cells(data: ReportData, family: str) -> bool:
    """The map is drawn for a family the decision holds regime cells of."""
    return any(c.family == family for c in data.decision.regime)


PLOT: PlotKind[RegimePlot] = PlotKind(
    key="regime",
    title="Regime map: depth against concurrency",
    caption="Each depth's ratio to off at each concurrency, one panel per workload, with its interval and "
    "coloured by the cell's outcome (Holm across every depth and cell of the family). The framed "
    "cell of each column is the best-supported depth there (off included); a dashed frame means a "
    "difference was not resolved, so off or the smaller depth is kept.",
    extract=_extract,
    draw=_draw,
    per_family=True,
    drawn_for=_has_cells,
)
