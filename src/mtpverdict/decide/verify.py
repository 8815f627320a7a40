"""Tamper evidence: recompute a decision's input hashes and the decision itself, and compare."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from mtpverdict.decide import decide_results
from mtpverdict.errors import InputError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.decision import Decision, decision_json, parse_decision
from mtpverdict.formats.results_io import load_results
from mtpverdict.formats.what_if import is_what_if
from mtpverdict.rules.registry import load_policy, shipped_policies


@dataclass(frozen=True, slots=True)
class Verification:
    """Whether a decision file still matches its inputs and reproduces byte for byte."""

    matches: bool
    lines: tuple[str, ...]
    what_if: bool = False  # the file is a what-if (decide --what-if): a reading, never verified


def verify(
    decision_path: str | os.PathLike[str], results: str | os.PathLike[str], rules: str | None = None
) -> Verification:
    """Check a decision file against a results directory (and the policy it names, or `rules`)."""
    source = str(decision_path)
    text = _check.text_of(_check.read_document(decision_path, limit=_check.MAX_DECISION_BYTES), source)
    recorded = parse_decision(text, source)
    policy = load_policy(_policy_of(recorded, source) if rules is None else rules)
    loaded = load_results(results)
    inputs = recorded.inputs
    lines: list[str] = []
    ok = True
    for key, was, now in (
        ("campaign_sha256", inputs.campaign_sha256, loaded.campaign_sha256),
        ("records_sha256", inputs.records_sha256, loaded.records_sha256),
        ("rules_sha256", inputs.rules_sha256, policy.sha256),
    ):
        ok = ok and was == now
        lines.append(f"{key}: matches" if was == now else f"{key}: differs (decision {was}, now {now})")
    if inputs.noise_history:
        ok = False
        lines.append(
            "the decision used --noise-history; verify cannot recompute it without those directories"
        )
    what_if = is_what_if(recorded)
    if what_if:  # a reading re-derived as one, and never verified as a decision
        ok = False
        lines.append("the file is a what-if (decide --what-if): no look was taken, so it is no decision")
    again = decide_results(loaded, policy, what_if=what_if).decision
    again_text = decision_json(again)
    if again_text == text:
        lines.append("decision: reproduces byte for byte")
    else:
        ok = False
        lines.append(
            f"decision: does not reproduce (recorded {recorded.decision}, now {again.decision}; "
            f"sha256 {_short(text)} vs {_short(again_text)})"
        )
    return Verification(matches=ok, lines=tuple(lines), what_if=what_if)


def _policy_of(decision: Decision, source: str) -> str:
    name = decision.policy.name
    if name not in shipped_policies():
        raise InputError(
            [Problem(source, f"policy {name!r} is not shipped; pass --rules FILE", key="policy.name")]
        )
    return name


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


__all__ = ["Verification", "verify"]
