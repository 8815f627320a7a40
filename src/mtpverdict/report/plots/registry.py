"""The registry of the report's plots, in the order the report shows them.

Adding a plot is one module under report/plots/ exposing `PLOT` (a `base.PlotKind`: file stem, title,
caption, a pure extraction and a drawing), listed in `PLOTS` below, with its bullet in docs/report.md;
tests/report/plots/test_registry.py fails for a plot missing any of them.
"""

from __future__ import annotations

from typing import Any

from mtpverdict.report.data import ReportData
from mtpverdict.report.plots import acceptance, break_even, category, context, drift, kv, regime, throughput
from mtpverdict.report.plots.base import Plot, PlotKind

PLOTS: tuple[PlotKind[Any], ...] = (
    throughput.PLOT,
    regime.PLOT,
    acceptance.PLOT,
    category.PLOT,
    break_even.PLOT,
    context.PLOT,
    kv.PLOT,
    drift.PLOT,
)


def report_plots(data: ReportData) -> tuple[Plot, ...]:
    """Every plot of the report, rendered; one without data comes back with `skipped` set."""
    return tuple(plot for kind in PLOTS for plot in kind.plots(data))
