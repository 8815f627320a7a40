"""The report's plots: matplotlib (Agg) figures rendered to PNG and SVG bytes, identical on every rerun.

Each plot has a pure extraction step (what to draw, or why there is nothing to draw) and a drawing
step that imports matplotlib only when called, so importing this module (or the CLI) stays cheap. A plot
without data is never drawn as an empty axes: it comes back with `skipped` saying why.

One module per plot (its `PLOT`, a `base.PlotKind`), listed in `registry.PLOTS`.
"""

from mtpverdict.report.plots.base import MAX_PLOTTED_ARMS, Plot, PlotKind
from mtpverdict.report.plots.registry import PLOTS, report_plots

__all__ = ["MAX_PLOTTED_ARMS", "PLOTS", "Plot", "PlotKind", "report_plots"]
