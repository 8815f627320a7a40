"""Reports: a decision and its evidence as report.md, a self-contained report.html, and PNG/SVG plots.

Rendering only: the decision comes from a decision file or from `mtpverdict.decide`, never from here.

    data = load_report_data("results/", rules="thor-c21")   # or decision="decision.json"
    written = write_report(data, "report/")
"""

from mtpverdict.report.data import ReportData, load_report_data
from mtpverdict.report.decision import DECISION_FORMAT, DecisionDoc, load_decision, parse_decision
from mtpverdict.report.plots import Plot, report_plots
from mtpverdict.report.render import WrittenReport, build_blocks, render_html, render_markdown, write_report
from mtpverdict.report.tables import Table, report_tables

__all__ = [
    "DECISION_FORMAT",
    "DecisionDoc",
    "Plot",
    "ReportData",
    "Table",
    "WrittenReport",
    "build_blocks",
    "load_decision",
    "load_report_data",
    "parse_decision",
    "render_html",
    "render_markdown",
    "report_plots",
    "report_tables",
    "write_report",
]
