"""Collectors: run a campaign against OpenAI-compatible servers and record results format v1."""

from mtpverdict.collect.campaign import CampaignPlan, load_campaign_file, parse_campaign
from mtpverdict.collect.runner import Collector, CollectSummary, Event, dry_run_plan

__all__ = [
    "CampaignPlan",
    "CollectSummary",
    "Collector",
    "Event",
    "dry_run_plan",
    "load_campaign_file",
    "parse_campaign",
]
