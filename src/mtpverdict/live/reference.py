"""What a live seat is judged against: one arm's measured acceptance and break-even, from a decision file.

The arm is the decision's selected one unless another is named. Its measured acceptance is the
primary surface's rate with its interval; its mean acceptance length's interval is 1 + k̄ · that
interval (k̄ drafted tokens per step). The break-even bound is the decision's conservative bound at the
arm's most demanding cell (formats/decision.py `BreakEvenSummary`).

An arm is refused when it has nothing to hold a live seat to (neither a measured interval's low end nor
a break-even bound), when its verdict is void (its evidence is not evidence), and when a name that goes
into rules (the arm's name, its bound cell's workload) is not a results-format name or any text of
the arm holds `{{` or `}}`: Prometheus expands labels and annotations as Go templates, so a
hand-edited decision must not run a query in them.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from mtpverdict.errors import InputError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.decision import ArmDecision, Decision, Verdict, parse_decision
from mtpverdict.formats.results import NAME_PATTERN
from mtpverdict.formats.what_if import refuse_what_if

HASH_CHARS = 12  # of the decision's sha256 in labels and rule names: a git-style short hash
_NAME = re.compile(NAME_PATTERN)
_TEMPLATE = ("{{", "}}")  # Go template delimiters: never written into a label or an annotation


@dataclass(frozen=True, slots=True)
class Reference:
    """One arm of one decision, as a live seat is judged against it."""

    source: str
    sha256: str
    arm: str
    label: str  # `mtp k=3`
    engine: str | None
    drafted_per_step: float | None
    rate: float | None
    rate_low: float | None
    rate_high: float | None
    length: float | None
    length_low: float | None
    bound_length: float | None  # the conservative break-even bound (mean acceptance length per step)
    bound_rate: float | None
    bound_cell: str | None  # `deep c=1`
    alpha: float = 0.10  # of a live interval: two-sided 1 - alpha, the decision's 1 - 2 x policy alpha

    @property
    def short_hash(self) -> str:
        return self.sha256[:HASH_CHARS]


def load_reference(path: str | os.PathLike[str], arm: str | None = None) -> Reference:
    """Read a decision file and the arm to judge a live seat against (the selected one by default)."""
    source = str(path)
    data = _check.read_document(path, limit=_check.MAX_DECISION_BYTES, what="a decision file")
    decision = parse_decision(_check.text_of(data, source), source)
    refuse_what_if(decision, source)  # a live seat is judged against a decision taken
    return reference(decision, hashlib.sha256(data).hexdigest(), source, arm)


def reference(decision: Decision, sha256: str, source: str, arm: str | None = None) -> Reference:
    """The reference of one arm; InputError when the decision has no speculative arm to judge by."""
    found = _arm(decision, source, arm)
    acc = None if found.acceptance is None else found.acceptance.primary
    k_bar = None
    if acc is not None and acc.drafts and acc.draft_tokens is not None:
        k_bar = acc.draft_tokens / acc.drafts
    elif found.k is not None:
        k_bar = float(found.k)
    low = None if acc is None else acc.ci_low
    be = found.break_even
    bound = None if be is None else be.bound_length
    if low is None and bound is None:
        raise InputError(
            [
                Problem(
                    source,
                    f"arm {found.name!r} has no threshold in the decision (neither a measured acceptance "
                    "interval nor a break-even bound): nothing to judge a live seat against",
                    key="arms",
                )
            ]
        )
    return Reference(
        source=source,
        sha256=sha256,
        arm=found.name,
        label=found.label,
        engine=decision.campaign.engine,
        drafted_per_step=k_bar,
        rate=None if acc is None else acc.acceptance_rate,
        rate_low=low,
        rate_high=None if acc is None else acc.ci_high,
        length=None if acc is None else acc.mean_acceptance_length,
        length_low=None if low is None or k_bar is None else 1.0 + k_bar * low,
        bound_length=bound,
        bound_rate=None if be is None else be.bound_rate,
        bound_cell=None if be is None else f"{be.bound_workload} c={be.bound_concurrency}",
        alpha=2 * decision.policy.alpha,
    )


def _arm(decision: Decision, source: str, name: str | None) -> ArmDecision:
    if name is None:
        name = decision.selected_arm
        if name is None:
            raise InputError(
                [
                    Problem(
                        source,
                        f"the decision ({decision.decision}) selects no single arm; pass --arm NAME to "
                        "judge the seat against one of its candidates",
                        key="selected",
                    )
                ]
            )
    found = decision.find_arm(name)
    if found is None:
        known = ", ".join(a.name for a in decision.arms if not a.is_control)
        raise InputError(
            [Problem(source, f"no arm {name!r} in the decision (candidates: {known})", key="arms")]
        )
    if found.is_control:
        raise InputError([Problem(source, f"arm {name!r} is a control: it does not speculate", key="arms")])
    if found.verdict is Verdict.VOID:
        why = found.void_reason or "no reason recorded"
        raise InputError(
            [Problem(source, f"arm {name!r} is void ({why}): its evidence cannot be watched", key="arms")]
        )
    _check_names(found, source)
    return found


def _check_names(arm: ArmDecision, source: str) -> None:
    """Refuse names and text of the arm that would be wrong, or run as templates, in Prometheus rules."""
    workload = None if arm.break_even is None else arm.break_even.bound_workload
    names = [("arms[].name", arm.name), ("arms[].break_even.bound_workload", workload)]
    problems = [
        Problem(source, f"{value!r} is not a name (letters, digits, _ . + -, at most 64)", key=key)
        for key, value in names
        if value is not None and not _NAME.fullmatch(value)
    ]
    if not problems and any(t in arm.label for t in _TEMPLATE):
        problems.append(
            Problem(
                source, f"arm {arm.name!r}: its spec holds a template delimiter ({{{{ or }}}})", key="spec"
            )
        )
    if problems:
        raise InputError(problems)
