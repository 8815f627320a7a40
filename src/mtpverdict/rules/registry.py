"""The registry of rule kinds, the shipped policies, and applying one rule to one arm.

Adding a kind is one module under rules/kinds/ with its `KIND`, listed in `KINDS` below, a row in
docs/rules-format.md and unit tests in tests/rules/; tests/rules/test_registry.py fails for a kind
missing any of them.
"""

from __future__ import annotations

import os
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtpverdict.errors import PolicyError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.decision import RuleResult, RuleStatus
from mtpverdict.formats.policy import KindSpec, OnMissing, Policy, Rule, parse_policy
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import RuleKind
from mtpverdict.rules.kinds import (
    beats_target,
    boot_ok,
    coherence,
    context_regime,
    faster_than_off,
    identity,
    kv_ceiling,
    likelihood,
    round_economics,
    stable_acceptance,
    ttft,
)

if TYPE_CHECKING:
    from mtpverdict.evidence.model import Evidence

KINDS: dict[str, RuleKind[Any, Any]] = {
    kind.name: kind
    for kind in (
        beats_target.KIND,
        faster_than_off.KIND,
        stable_acceptance.KIND,
        kv_ceiling.KIND,
        coherence.KIND,
        identity.KIND,
        likelihood.KIND,
        context_regime.KIND,
        ttft.KIND,
        round_economics.KIND,
        boot_ok.KIND,
    )
}
RULE_KINDS = tuple(KINDS)
SPECS = {name: KindSpec(kind.params_type, kind.contradictions) for name, kind in KINDS.items()}
POLICY_SUFFIX = ".toml"


def evaluate(evidence: Evidence, arm: Arm, rule: Rule) -> RuleResult:
    """Apply one rule to one arm; the policy's on_missing decides what missing evidence means."""
    kind = KINDS[rule.kind]
    finding = kind.evaluate(evidence, arm, rule.params)
    detail = kind.render(finding, arm)
    passed: bool | None = None
    if finding.status is RuleStatus.PASS:
        passed = True
    elif finding.status is RuleStatus.FAIL:
        passed = False
    elif finding.status is RuleStatus.MISSING and rule.on_missing is OnMissing.REJECT:
        passed = False
        detail += " (rejected: the policy treats missing evidence as failing)"
    elif finding.status is RuleStatus.MISSING and rule.on_missing is OnMissing.ACCEPT:
        passed = True
        detail += " (on_missing = accept)"
    return RuleResult(
        rule=rule.id,
        kind=rule.kind,
        severity=rule.severity,
        passed=passed,
        status=finding.status,
        value=finding.value,
        threshold=finding.threshold,
        detail=detail,
    )


def policy_dir() -> Path:
    """Where the shipped policies are: in the package of an installed wheel, else the source tree's rules/."""
    packaged = resources.files("mtpverdict").joinpath("policies")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "rules"


def shipped_policies() -> list[str]:
    """Names of the shipped policies (rules/*.toml), sorted."""
    return sorted(p.stem for p in policy_dir().glob(f"*{POLICY_SUFFIX}"))


def parse_rules(text: str, source: str, sha256: str | None = None) -> Policy:
    """Validate policy text with the registry's kinds; raise PolicyError listing every problem."""
    return parse_policy(text, source, SPECS, sha256)


def load_policy(name_or_path: str | os.PathLike[str] | None = None) -> Policy:
    """A shipped policy by name (default: 'default'), or a policy file.

    A shipped name wins over a file of the same name in the working directory; write a path with a
    directory part or the .toml suffix (./default.toml) to load such a file.
    """
    import hashlib

    name = "default" if name_or_path is None else os.fspath(name_or_path)
    shipped = shipped_policies()
    if name in shipped:
        path, source = policy_dir() / f"{name}{POLICY_SUFFIX}", f"rules/{name}{POLICY_SUFFIX}"
    elif "/" in name or name.endswith(POLICY_SUFFIX) or Path(name).exists():
        path, source = Path(name), name
    else:
        message = f"no such shipped policy; choose one of {', '.join(shipped)} or give a .toml path"
        raise PolicyError([Problem(name, message)])
    if not path.exists():
        message = f"not found; give a rules file or a shipped policy name ({', '.join(shipped)})"
        raise PolicyError([Problem(source, message)])
    data = _check.read_document(path, what="a policy file", error=PolicyError)
    text = _check.text_of(data, source, PolicyError)
    policy = parse_rules(text, source, hashlib.sha256(data).hexdigest())
    # the shipped policy is the shipped policy however it is named (by name, by any path to it, a copy):
    # a decision must not depend on the spelling, so it is known by its name and bytes, not its path
    if policy.name in shipped:
        shipped_path = policy_dir() / f"{policy.name}{POLICY_SUFFIX}"
        if shipped_path == path or shipped_path.read_bytes() == data:
            return replace(policy, shipped=True)
    return policy
