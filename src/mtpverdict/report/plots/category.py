"""Acceptance per dataset category and depth as a plot: the category map, for dataset workloads only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtpverdict.report.category_map import CategoryMap, category_map_data, draw_category_map
from mtpverdict.report.data import ReportData
from mtpverdict.report.plots.base import PlotKind, figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _extract(data: ReportData, family: str | None) -> CategoryMap | str:
    return category_map_data(data.decision, data.campaign_label)


def _draw(d: CategoryMap) -> Figure:
    return draw_category_map(d, figure)


def _has_categories(data: ReportData) -> bool:
    """Only a campaign with dataset workloads has categories: the others' reports leave the plot out."""
    return bool(data.decision.categories)


PLOT: PlotKind[CategoryMap] = PlotKind(
    key="category",
    title="Acceptance per dataset category and depth",
    caption="Each candidate's acceptance on each category of a dataset workload (every concurrency pooled) "
    "with its interval, and the category's outcome against off (the family procedure over that "
    "category's cells alone). A drafter that wins on code and loses on chat shows here before the "
    "pooled figure hides it.",
    extract=_extract,
    draw=_draw,
    shown=_has_categories,
)
