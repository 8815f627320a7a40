"""Tamper evidence: recompute a decision's input hashes and the decision itself, and compare."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from mtpverdict.errors import InputError, Problem


@dataclass(frozen=True, slots=True)
class Verification:
    """Whether a decision file still matches its inputs and reproduces byte for byte."""

    matches: bool
    lines: tuple[str, ...]


def verify(decision_path: str | Path, results: str | Path, rules: str | None = None) -> Verification:
    """Check a decision file against a results directory (and the policy it names, or `rules`)."""
    from mtpverdict.decide import decide_directory
    from mtpverdict.decide.engine import DECISION_FORMAT
    from mtpverdict.formats.results_io import load_results
    from mtpverdict.rules import load_policy, shipped_policies

    source = str(decision_path)
    try:
        text = Path(decision_path).read_text(encoding="utf-8")
        recorded = json.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError([Problem(source, f"cannot be read as JSON: {exc}")]) from None
    if not isinstance(recorded, dict) or recorded.get("format") != DECISION_FORMAT:
        raise InputError([Problem(source, f"not a {DECISION_FORMAT} file", key="format")])
    inputs = recorded.get("inputs") or {}
    policy_name = (recorded.get("policy") or {}).get("name")
    if rules is None:
        if policy_name not in shipped_policies():
            raise InputError(
                [
                    Problem(
                        source, f"policy {policy_name!r} is not shipped; pass --rules FILE", key="policy.name"
                    )
                ]
            )
        rules = policy_name
    policy = load_policy(rules)
    loaded = load_results(results)
    lines: list[str] = []
    ok = True
    for key, now in (
        ("campaign_sha256", loaded.campaign_sha256),
        ("records_sha256", loaded.records_sha256),
        ("rules_sha256", policy.sha256),
    ):
        if inputs.get(key) == now:
            lines.append(f"{key}: matches")
        else:
            ok = False
            lines.append(f"{key}: differs (decision {inputs.get(key)}, now {now})")
    history = inputs.get("noise_history") or []
    if history:
        ok = False
        lines.append(
            "the decision used --noise-history; verify cannot recompute it without those directories"
        )
    run = decide_directory(results, rules)
    if run.json_text == text:
        lines.append("decision: reproduces byte for byte")
    else:
        ok = False
        again = json.loads(run.json_text)
        lines.append(
            f"decision: does not reproduce (recorded {recorded.get('decision')}, now {again['decision']}; "
            f"sha256 {hashlib.sha256(text.encode()).hexdigest()[:12]} vs "
            f"{hashlib.sha256(run.json_text.encode()).hexdigest()[:12]})"
        )
    return Verification(matches=ok, lines=tuple(lines))
