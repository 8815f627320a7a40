"""mtpverdict: evidence-based verdicts on MTP / speculative decoding for a serving seat."""

from mtpverdict._version import __version__
from mtpverdict.errors import (
    CampaignError,
    CollectError,
    EngineTextError,
    InputError,
    MtpverdictError,
    PolicyError,
    Problem,
    ResultsError,
)

__all__ = [
    "CampaignError",
    "CollectError",
    "EngineTextError",
    "InputError",
    "MtpverdictError",
    "PolicyError",
    "Problem",
    "ResultsError",
    "__version__",
]
