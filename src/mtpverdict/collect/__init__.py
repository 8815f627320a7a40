"""Collectors: run a campaign against OpenAI-compatible servers and record results format v1."""

from mtpverdict.collect.campaign import CampaignPlan, load_campaign_file, parse_campaign
from mtpverdict.collect.runner import (
    Collector,
    CollectOutcome,
    CollectSummary,
    Event,
    dry_run_plan,
    dry_run_report,
)

__all__ = [
    "CampaignPlan",
    "CollectOutcome",
    "CollectSummary",
    "Collector",
    "Event",
    "dry_run_plan",
    "dry_run_report",
    "load_campaign_file",
    "parse_campaign",
]
