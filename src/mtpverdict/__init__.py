"""mtpverdict: evidence-based verdicts on MTP / speculative decoding for a serving seat.

    from mtpverdict import decide_directory
    run = decide_directory("fixtures/synthetic-clean-win", rules="default")
    run.decision.decision        # DecisionKind.PROMOTE
    run.json_text                # the canonical decision JSON

The names below are the library's public API (docs/python-api.md). They load on first use, so
`import mtpverdict` (and the CLI's start) stays cheap; tests/test_api.py pins the list.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

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
    UnknownArmError,
)

if TYPE_CHECKING:
    from mtpverdict.decide import DecisionRun, decide, decide_directory, decide_results, settled_arms
    from mtpverdict.formats.decision import Decision, DecisionKind, Verdict, decision_json, load_decision
    from mtpverdict.formats.policy import Policy
    from mtpverdict.formats.results import Arm, Campaign, Workload
    from mtpverdict.formats.results_io import Results, ResultsWriter, load_results
    from mtpverdict.gate import GateResult, gate
    from mtpverdict.report import write_report
    from mtpverdict.rules import load_policy, shipped_policies
    from mtpverdict.verify import Verification, verify

_LAZY = {
    "Arm": "mtpverdict.formats.results",
    "Campaign": "mtpverdict.formats.results",
    "Workload": "mtpverdict.formats.results",
    "Results": "mtpverdict.formats.results_io",
    "ResultsWriter": "mtpverdict.formats.results_io",
    "load_results": "mtpverdict.formats.results_io",
    "Policy": "mtpverdict.formats.policy",
    "load_policy": "mtpverdict.rules",
    "shipped_policies": "mtpverdict.rules",
    "Decision": "mtpverdict.formats.decision",
    "DecisionKind": "mtpverdict.formats.decision",
    "Verdict": "mtpverdict.formats.decision",
    "decision_json": "mtpverdict.formats.decision",
    "load_decision": "mtpverdict.formats.decision",
    "DecisionRun": "mtpverdict.decide",
    "decide": "mtpverdict.decide",
    "decide_directory": "mtpverdict.decide",
    "decide_results": "mtpverdict.decide",
    "settled_arms": "mtpverdict.decide",
    "GateResult": "mtpverdict.gate",
    "gate": "mtpverdict.gate",
    "write_report": "mtpverdict.report",
    "Verification": "mtpverdict.verify",
    "verify": "mtpverdict.verify",
}

__all__ = [
    "Arm",
    "Campaign",
    "CampaignError",
    "CollectError",
    "Decision",
    "DecisionKind",
    "DecisionRun",
    "EngineTextError",
    "GateResult",
    "InputError",
    "MtpverdictError",
    "Policy",
    "PolicyError",
    "Problem",
    "Results",
    "ResultsError",
    "ResultsWriter",
    "UnknownArmError",
    "Verdict",
    "Verification",
    "Workload",
    "__version__",
    "decide",
    "decide_directory",
    "decide_results",
    "decision_json",
    "gate",
    "load_decision",
    "load_policy",
    "load_results",
    "settled_arms",
    "shipped_policies",
    "verify",
    "write_report",
]


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mtpverdict' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


# Public functions named like the submodule that defines them (decide, gate, verify).
_SHADOWED = frozenset(name for name, module in _LAZY.items() if module == f"mtpverdict.{name}")


class _Package(types.ModuleType):
    """This package's module type: importing the submodule `mtpverdict.gate` binds it in sys.modules
    only, so `mtpverdict.gate` stays the function `gate`, whatever was imported first. (Reach such a
    submodule with `from mtpverdict.gate import ...`, never `import mtpverdict.gate as ...`.)"""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
