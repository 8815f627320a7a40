"""The decision: evidence from results, rules applied per arm, a verdict with stated reasons."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtpverdict.decide.engine import DECISION_FORMAT, DECISIONS, Decision, decide
from mtpverdict.decide.evidence import NoiseHistory, history_from
from mtpverdict.decide.output import decision_dict, decision_json, render_summary
from mtpverdict.formats.results_io import load_results
from mtpverdict.rules.policy import Policy, load_policy

__all__ = [
    "DECISIONS",
    "DECISION_FORMAT",
    "Decision",
    "DecisionRun",
    "decide",
    "decide_directory",
    "decision_dict",
    "decision_json",
    "render_summary",
]


@dataclass(frozen=True, slots=True)
class DecisionRun:
    """A decision together with its canonical JSON text and the policy it used."""

    decision: Decision
    policy: Policy
    json_text: str


def decide_directory(
    results: str | os.PathLike[str],
    rules: str | os.PathLike[str] | None = None,
    noise_history: Sequence[str | os.PathLike[str]] = (),
) -> DecisionRun:
    """Load a results directory and a policy (a path or a shipped name), decide, render the JSON."""
    policy = load_policy(None if rules is None else str(rules))
    loaded = load_results(results)
    histories: list[NoiseHistory] = []
    for path in noise_history:
        archived = load_results(path)
        histories.append(history_from(archived, policy.include_cold, Path(path).name))
    decision = decide(loaded, policy, histories)
    text = decision_json(
        decision,
        rules_sha256=policy.sha256,
        history=[{"label": h.label, "records_sha256": h.sha256} for h in histories],
    )
    return DecisionRun(decision=decision, policy=policy, json_text=text)
