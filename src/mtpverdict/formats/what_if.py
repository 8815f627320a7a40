"""What marks a decision JSON as a what-if (decide --what-if), and the refusal where a decision is needed."""

from __future__ import annotations

from mtpverdict.errors import InputError, Problem
from mtpverdict.formats.decision import Decision

# the last reason of a what-if's JSON (decide --what-if): what verify, report and the live commands
# read to refuse it as a decision
WHAT_IF_REASON = (
    "what-if: read as the campaign's first look (decide --what-if counts no recorded look and records "
    "none); not a decision to act on: deciding without --what-if takes a look, at what the recorded "
    "ones left of alpha"
)


def is_what_if(decision: Decision) -> bool:
    """Whether the decision is a what-if (its reasons carry WHAT_IF_REASON)."""
    return WHAT_IF_REASON in decision.reasons


def refuse_what_if(decision: Decision, source: str) -> None:
    """Refuse a what-if where a decision is needed (InputError naming the file)."""
    if is_what_if(decision):
        raise InputError(
            [Problem(source, "a what-if (decide --what-if) is no decision: decide without --what-if")]
        )
