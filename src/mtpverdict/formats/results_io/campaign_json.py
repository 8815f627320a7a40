"""campaign.json: read, checked (types, then what they cannot say), and known by its content hash."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mtpverdict.errors import InputError, Problem, ResultsError
from mtpverdict.formats import _check
from mtpverdict.formats.results import (
    Campaign,
)
from mtpverdict.formats.results_io.common import (
    CAMPAIGN_FILE,
    content_sha256,
)

if TYPE_CHECKING:
    pass


def campaign_from_json(obj: Any, source: str) -> Campaign:
    """Validate a campaign.json object; raise ResultsError listing every problem (file and key)."""
    if not isinstance(obj, dict):
        raise ResultsError([Problem(source, "must hold one JSON object")])
    problems = _check.check(obj, Campaign)
    if not problems:
        campaign = msgspec.convert(obj, Campaign, strict=True)
        problems = _campaign_problems(campaign)
    if problems:
        raise ResultsError([Problem(source, message, key=key) for key, message in problems])
    arms = tuple(sorted(campaign.arms, key=lambda a: (a.order, a.name)))
    return msgspec.structs.replace(campaign, arms=arms)


def _campaign_problems(campaign: Campaign) -> list[_check.Located]:
    """What the types cannot say: speculation per role, unique names and orders, a control per family."""
    out: list[_check.Located] = []
    for i, arm in enumerate(campaign.arms):
        if arm.is_control and not (arm.spec.off and not arm.spec.k):
            out.append((f"arms[{i}].spec", "a control arm must run with speculation off (method null, k 0)"))
        if not arm.is_control and (arm.spec.off or arm.spec.k == 0):
            out.append(
                (
                    f"arms[{i}].spec",
                    "a candidate arm needs a speculative method and k >= 1 (k null when not recorded)",
                )
            )
    if not campaign.arms:
        out.append(("arms", "no arms; list at least one control and one candidate"))
    if not campaign.workloads:
        out.append(("workloads", "no workloads; list at least one"))
    out.extend(_arm_set_problems(campaign))
    ids = [w.id for w in campaign.workloads]
    out.extend(
        ("workloads", f"workload id {dup!r} appears twice; ids must be unique")
        for dup in sorted({w for w in ids if ids.count(w) > 1})
    )
    return out


def _arm_set_problems(campaign: Campaign) -> list[_check.Located]:
    arms = campaign.arms
    names = Counter(a.name for a in arms)  # counted once: list.count per arm was quadratic
    out: list[_check.Located] = [
        ("arms", f"arm name {dup!r} appears twice; names must be unique")
        for dup in sorted(n for n, times in names.items() if times > 1)
    ]
    orders = Counter(a.order for a in arms)
    out.extend(
        ("arms", f"two arms share order {order}; each arm boots at its own position")
        for order in sorted(o for o, times in orders.items() if times > 1)
    )
    if arms and not any(a.is_control for a in arms):
        out.append(
            (
                "arms",
                'no control arm; add an arm with role "control" and speculation off '
                "(e.g. off_A first and off_B last)",
            )
        )
    for family in campaign.families:
        members = [a for a in arms if a.family == family]
        if any(not a.is_control for a in members) and not any(a.is_control for a in members):
            out.append(("arms", f"family {family!r} has candidates but no control arm to compare with"))
    return out


def load_campaign(directory: Path) -> tuple[Campaign, str]:
    """Read and validate campaign.json; return it and the SHA-256 of its content."""
    path = directory / CAMPAIGN_FILE
    source = str(path)
    try:
        data = _check.read_document(path, what="campaign.json")
    except InputError as exc:
        if exc.problems[0].message == "not found":
            message = "not found; a results directory needs campaign.json (see docs/results-format.md)"
            if directory.is_dir() and any(directory.glob("*.json")):
                message += (  # what a folder of `vllm bench serve --save-result` files needs first
                    "; for `vllm bench serve --save-result` files, make one with: mtpverdict import "
                    f"vllm-bench {shlex.quote(str(directory))}/*.json --arm NAME --out RESULTS"
                )
            raise ResultsError([Problem(source, message)]) from None
        raise ResultsError(exc.problems) from None
    text = _text(data, source)
    try:
        obj = _check.loads_strict(text)
    except ValueError as exc:
        raise ResultsError([Problem(source, str(exc), line=_check.json_line(exc))]) from None
    campaign = campaign_from_json(obj, source)
    return campaign, content_sha256(obj)


def _text(data: bytes, source: str) -> str:
    try:
        return _check.text_of(data, source)
    except InputError as exc:
        raise ResultsError(exc.problems) from None
