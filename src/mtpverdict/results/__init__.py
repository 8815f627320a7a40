"""Results format v1: the contract between collectors and the decision engine."""

from mtpverdict.results.load import load_campaign, load_results
from mtpverdict.results.model import Arm, Campaign, Results, Scope, Spec, Workload
from mtpverdict.results.spec import RESULTS_FORMAT
from mtpverdict.results.writer import ResultsWriter, record_key

__all__ = [
    "RESULTS_FORMAT",
    "Arm",
    "Campaign",
    "Results",
    "ResultsWriter",
    "Scope",
    "Spec",
    "Workload",
    "load_campaign",
    "load_results",
    "record_key",
]
