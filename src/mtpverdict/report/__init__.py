"""Reports: a decision and its evidence as report.md, a self-contained report.html, and PNG/SVG plots.

Rendering only: the decision comes from a decision file or from `mtpverdict.decide`, never from here.

    data = load_report_data("results/", rules="thor-c21")   # or decision="decision.json"
    written = write_report(data, "report/")
"""

from mtpverdict.report.data import ReportData, load_report_data
from mtpverdict.report.plots import Plot, report_plots
from mtpverdict.report.render import WrittenReport, build_blocks, render_html, render_markdown, write_report
from mtpverdict.report.tables import Table, report_tables
from mtpverdict.report.terminal import render_summary

__all__ = [
    "Plot",
    "ReportData",
    "Table",
    "WrittenReport",
    "build_blocks",
    "load_report_data",
    "render_html",
    "render_markdown",
    "render_summary",
    "report_plots",
    "report_tables",
    "write_report",
]
