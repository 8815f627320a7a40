"""Policy format (TOML, policy_version 1): the typed policy a rules file becomes, and its strict reader.

A policy is data only: nothing in it is evaluated, imported or expanded. The rule kinds and their
parameters are not known here: the caller passes the registry (kind -> parameter model, contradiction
check), so the format stays below the rules that interpret it. Every problem names the file, the rule
and the key.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypeAlias

import msgspec
from msgspec import Meta, Struct

from mtpverdict.errors import InputError, PolicyError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats._check import Count, Fraction, Int, Nonneg, PositiveInt
from mtpverdict.formats.results import Metric

POLICY_VERSION = 1


class Severity(StrEnum):
    """veto: a failing rule rejects the arm; warn: it is reported."""

    VETO = "veto"
    WARN = "warn"


class OnMissing(StrEnum):
    """What missing evidence means for a rule."""

    INCONCLUSIVE = "inconclusive"
    REJECT = "reject"
    ACCEPT = "accept"


class ColdMode(StrEnum):
    """Whether the first run after each boot counts."""

    INCLUDE = "include"
    EXCLUDE = "exclude"


class PartialBoots(StrEnum):
    """Whether the runs of a boot that failed or was interrupted count in its cells."""

    EXCLUDE = "exclude"
    INCLUDE = "include"


class SetAside(StrEnum):
    """What a cell whose streams set aside differ by arm gets: no comparison, or one on the streams kept."""

    REFUSE = "refuse"
    COMPARE_KEPT = "compare_kept"


class FloorMode(StrEnum):
    """What comparisons do when the boot-to-boot variance is unknown."""

    INCONCLUSIVE = "inconclusive"
    WITHIN_BOOT = "within_boot"
    ASSUME = "assume"


class ControlAction(StrEnum):
    """What a failed drift or blind-harness control does to the decision."""

    INCONCLUSIVE = "inconclusive"
    WARN = "warn"


class SelectionMode(StrEnum):
    """How the selected arm is picked among the eligible ones."""

    FASTEST = "fastest"
    BORING = "boring"
    REFERENCE = "reference"
    SCHEDULE = "schedule"  # a depth per batch-size range (vLLM's num_speculative_tokens_per_batch_size)


class Beyond(StrEnum):
    """What a schedule runs at batch sizes no measured concurrency brackets."""

    BASELINE = "baseline"  # speculation off (or the reference): nothing measured supports a switch there
    EXTEND = "extend"  # the nearest measured concurrency's depth carries on


# vLLM 0.32's largest default max_num_seqs (engine/arg_utils.py: 1024 on large GPUs, 256 or 128 elsewhere):
# the last range of a schedule ends here; vLLM carries the last range's depth beyond its end anyway.
DEFAULT_MAX_BATCH = 1024


class Fallback(StrEnum):
    """What selection does when the reference arm is not eligible."""

    FASTEST = "fastest"
    BORING = "boring"
    INCONCLUSIVE = "inconclusive"


class Runs(Struct, frozen=True, forbid_unknown_fields=True):
    """[runs]: which runs count."""

    cold: Annotated[
        ColdMode, Meta(description="The first run after each boot: counted or only reported.")
    ] = ColdMode.INCLUDE
    max_missing_gap: Annotated[
        Fraction,
        Meta(
            description="At a cell, the largest difference between an arm's share of streams set aside "
            "(no decode measurement: read in a burst, too short) and its controls' share before the arm is "
            "not compared there, when Fisher's exact test on the counts also finds a difference at "
            "missing_alpha."
        ),
    ] = 0.10
    missing_alpha: Annotated[
        Fraction,
        Meta(
            description="The level of Fisher's exact test (two-sided) on the streams set aside by an arm "
            "and by its controls at a cell: a difference beyond max_missing_gap refuses the comparison "
            "only when the counts show it at this level."
        ),
    ] = 0.05
    set_aside: Annotated[
        SetAside,
        Meta(
            description="A cell where an arm's streams set aside differ from its controls' (max_missing_gap "
            "and missing_alpha): not compared (refuse), or compared on the streams each kept with the "
            "difference stated (compare_kept: the kept streams may be chosen by the arm)."
        ),
    ] = SetAside.REFUSE
    partial_boots: Annotated[
        PartialBoots,
        Meta(
            description="The runs of a boot that failed or was interrupted: left out of every cell "
            "(exclude), or counted like a finished boot's (include). Their acceptance counts either way."
        ),
    ] = PartialBoots.EXCLUDE

    @property
    def include_cold(self) -> bool:
        return self.cold is ColdMode.INCLUDE


class Floor(Struct, frozen=True, forbid_unknown_fields=True):
    """[floor]: what to do when the boot-to-boot variance is unknown."""

    when_unknown: FloorMode = FloorMode.INCONCLUSIVE
    assumed: Annotated[Fraction | None, Meta(description="The floor assumed by when_unknown = assume.")] = (
        None
    )
    lend_history: Annotated[
        bool,
        Meta(
            description="Lend archived A/A history (the controls' variance) to a candidate booted once. "
            "Off by default: a drafter can add its own noise, and a 2x noisier candidate promoted on "
            "borrowed variance."
        ),
    ] = False


class Controls(Struct, frozen=True, forbid_unknown_fields=True):
    """[controls]: the campaign-level controls' thresholds."""

    void_max_acceptance: Fraction = 0.05
    void_min_drafted: Count = 50
    blind_min_gain: Nonneg = 0.10
    max_drift: Fraction = 0.05
    on_drift: ControlAction = ControlAction.INCONCLUSIVE
    on_blind: ControlAction = ControlAction.INCONCLUSIVE


class Selection(Struct, frozen=True, forbid_unknown_fields=True):
    """[selection]: how the selected arm is chosen among the eligible ones."""

    mode: SelectionMode = SelectionMode.FASTEST
    metric: Metric = Metric.DECODE_TPS
    workload: str | None = None
    concurrency: PositiveInt | None = None
    tolerance: Fraction = 0.10
    reference: str | None = None
    fallback: Fallback = Fallback.FASTEST
    beyond: Annotated[
        Beyond,
        Meta(
            description="mode schedule: batch sizes below the smallest or above the largest measured "
            "concurrency run the baseline, or the nearest measured concurrency's depth (extend)."
        ),
    ] = Beyond.BASELINE
    max_batch: Annotated[
        PositiveInt, Meta(description="mode schedule: the last batch size the schedule's ranges cover.")
    ] = DEFAULT_MAX_BATCH
    confirm: Annotated[
        bool,
        Meta(
            description="mode schedule: promote a schedule only when an arm that ran it confirms it "
            "(docs/rules-format.md)."
        ),
    ] = False


class Outside(StrEnum):
    """What `gate` does with what the evidence does not firmly show: refuse it, or accept it on purpose."""

    REFUSE = "refuse"
    ACCEPT = "accept"


class Gate(Struct, frozen=True, forbid_unknown_fields=True):
    """[gate]: what the promotion gate accepts beyond what the evidence shows."""

    outside_envelope: Annotated[
        Outside,
        Meta(
            description="A serve config whose context reaches the depth where a context_regime rule found "
            "the promoted arm not holding: refused, or accepted on purpose."
        ),
    ] = Outside.REFUSE
    provisional: Annotated[
        Outside,
        Meta(
            description="A provisional decision (fewer than 3 degrees of freedom for the boot-to-boot "
            "variance, e.g. one boot per arm): refused, or accepted on purpose."
        ),
    ] = Outside.REFUSE


Share = Annotated[float, Meta(gt=0)]


class Workloads(Struct, frozen=True, forbid_unknown_fields=True):
    """[workloads]: how the seat's traffic splits over the campaign's dataset categories."""

    weights: Annotated[
        dict[str, Share],
        Meta(
            description="Traffic share per dataset category (any positive numbers; they are normalised): "
            "decide also compares each candidate on the weighted mean over the categories."
        ),
    ] = {}


class _Top(Struct, frozen=True, forbid_unknown_fields=True):
    """The top-level keys of a policy file."""

    policy_version: Int
    name: str
    description: str = ""
    alpha: Fraction = 0.05
    equivalence_margin: Fraction = 0.03
    seed: Int = 20260910
    runs: Runs = Runs()
    floor: Floor = Floor()
    controls: Controls = Controls()
    selection: Selection = Selection()
    gate: Gate = Gate()
    workloads: Workloads = Workloads()
    rules: tuple[dict[str, Any], ...] = ()


class RuleCommon(Struct, frozen=True):
    """The keys every rule has, whatever its kind."""

    kind: str
    id: str | None = None
    severity: Severity = Severity.VETO
    on_missing: OnMissing = OnMissing.INCONCLUSIVE
    arms: tuple[str, ...] | None = None
    families: tuple[str, ...] | None = None
    why: str | None = None


COMMON_KEYS = RuleCommon.__struct_fields__


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: its kind, severity, what missing evidence means, selectors and typed parameters."""

    id: str
    kind: str
    severity: Severity
    on_missing: OnMissing
    arms: tuple[str, ...] | None
    families: tuple[str, ...] | None
    why: str | None
    params: Struct

    def applies_to(self, arm: str, family: str) -> bool:
        if self.arms is not None and arm not in self.arms:
            return False
        return self.families is None or family in self.families


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated policy file."""

    name: str
    description: str
    source: str
    sha256: str
    alpha: float
    equivalence_margin: float
    seed: int
    runs: Runs
    floor: Floor
    controls: Controls
    selection: Selection
    rules: tuple[Rule, ...]
    gate: Gate = Gate()
    workloads: Workloads = Workloads()
    shipped: bool = False  # its text is the shipped policy of its name, however it was named
    # the level of what only keeps arms off when a look split alpha for promotions: the policy's own
    # alpha (the controls' checks, equivalent, worse, below min_effect and futility, a void head, a
    # TTFT limit exceeded; docs/statistics.md, Settling); None: alpha
    keep_off_alpha: float | None = None

    @property
    def keep_off_level(self) -> float:
        return self.alpha if self.keep_off_alpha is None else self.keep_off_alpha

    @property
    def include_cold(self) -> bool:
        return self.runs.include_cold

    @property
    def can_veto(self) -> bool:
        """Whether any rule can reject an arm: with none, every arm that boots is eligible."""
        return any(r.severity is Severity.VETO for r in self.rules)

    def veto_problem(self) -> str | None:
        """Why the policy cannot block a promotion, or None when it can."""
        if self.can_veto:
            return None
        return (
            'cannot veto a promotion: no rule has severity = "veto", so any arm that boots is promoted, '
            "even one no faster than off; make at least one rule a veto (rules/default.toml vetoes on "
            "boot_ok, faster_than_off, stable_acceptance and coherence)"
        )


ParamCheck: TypeAlias = Callable[[Any], list[_check.Located]]


@dataclass(frozen=True, slots=True)
class KindSpec:
    """What the format needs to know about one rule kind: its parameter model and contradiction check."""

    params: type[Struct]
    check: ParamCheck


def toml_error_line(exc: tomllib.TOMLDecodeError) -> tuple[int | None, str]:
    """(line, message) of a TOML error; Python 3.11 keeps the line only in the message text."""
    text = str(exc)
    found = re.search(r" \(at line (\d+), column \d+\)", text)
    if found:
        return int(found.group(1)), text[: found.start()]
    return getattr(exc, "lineno", None), text.split(" (at ")[0]


def load_toml(text: str, source: str, error: type[InputError] = InputError) -> dict[str, Any]:
    """TOML text as Python values, or an `error` naming the line; deep nesting is refused."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, message = toml_error_line(exc)
        raise error([Problem(source, f"not valid TOML: {message}", line=line)]) from None
    except RecursionError:
        raise error(
            [Problem(source, f"not valid TOML: nested deeper than {_check.MAX_DEPTH} levels")]
        ) from None


def parse_policy(text: str, source: str, kinds: Mapping[str, KindSpec], sha256: str | None = None) -> Policy:
    """Validate policy text against the rule kinds given; raise PolicyError listing every problem."""
    data = load_toml(text, source, PolicyError)
    if "campaign_version" in data and "policy_version" not in data:
        raise PolicyError(
            [
                Problem(
                    source,
                    "a campaign file (campaign_version), not a policy; run it with `mtpverdict collect "
                    f"{source} --out RESULTS`; a policy has policy_version, name and [[rules]] "
                    "(rules/default.toml), or name a shipped one (--rules default)",
                )
            ]
        )
    located = _check.check(data, _Top)
    if located:
        raise PolicyError([Problem(source, message, key=key) for key, message in located])
    top = msgspec.convert(data, _Top, strict=True)
    problems = _top_problems(top)
    rules: list[Rule] = []
    ids: set[str] = set()
    for i, raw in enumerate(top.rules):
        rule, found = _rule(i, raw, kinds)
        problems.extend(found)
        if rule is not None:
            if rule.id in ids:
                where = _where(i, raw)
                problems.append(
                    (f"{where}id", f"rule id {rule.id!r} is used twice; give each rule its own id")
                )
            ids.add(rule.id)
            rules.append(rule)
    if problems:
        raise PolicyError([Problem(source, message, key=key) for key, message in problems])
    digest = sha256 if sha256 is not None else hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Policy(
        name=top.name,
        description=top.description,
        source=source,
        sha256=digest,
        alpha=top.alpha,
        equivalence_margin=top.equivalence_margin,
        seed=top.seed,
        runs=top.runs,
        floor=top.floor,
        controls=top.controls,
        selection=top.selection,
        rules=tuple(rules),
        gate=top.gate,
        workloads=top.workloads,
    )


def _top_problems(top: _Top) -> list[_check.Located]:
    out: list[_check.Located] = []
    if top.policy_version != POLICY_VERSION:
        out.append(
            (
                "policy_version",
                f"policy_version {top.policy_version} is not supported; this mtpverdict reads policy_version "
                f"{POLICY_VERSION}",
            )
        )
    if top.selection.mode is SelectionMode.REFERENCE and not top.selection.reference:
        out.append(("selection.reference", "mode reference needs selection.reference (the arm to keep)"))
    if top.floor.when_unknown is FloorMode.ASSUME and top.floor.assumed is None:
        out.append(("floor.assumed", 'when_unknown = "assume" needs floor.assumed (a fraction, e.g. 0.05)'))
    return out + _margin_problems(top)


# a schedule tests each depth at each concurrency alone: below this margin the nuisance matrix shows
# false promotions above alpha (missing not at random 7.7%, candidates 2x noisier 5.6% at a margin of
# 0; at 1% at most 3.0%: docs/performance.md, The nuisance matrix)
SCHEDULE_MIN_MARGIN = 0.01


def _margin_problems(top: _Top) -> list[_check.Located]:
    if top.equivalence_margin <= 0.0:
        return [("equivalence_margin", "must be above 0 (the 'no practical effect' band, e.g. 0.03)")]
    if top.selection.mode is SelectionMode.SCHEDULE and top.equivalence_margin < SCHEDULE_MIN_MARGIN:
        return [
            (
                "equivalence_margin",
                f"{top.equivalence_margin:g} is below {SCHEDULE_MIN_MARGIN:g}, the smallest margin schedule "
                "mode is calibrated at: it tests each depth at each concurrency alone, and below that "
                "promotes falsely more often than alpha (docs/performance.md, The nuisance matrix)",
            )
        ]
    return []


def _where(i: int, raw: Mapping[str, Any]) -> str:
    rule_id = raw.get("id")
    return f"rules[{i}]" + (f" ({rule_id})" if isinstance(rule_id, str) else "") + "."


def _rule(
    i: int, raw: Mapping[str, Any], kinds: Mapping[str, KindSpec]
) -> tuple[Rule | None, list[_check.Located]]:
    """One [[rules]] table: its common keys, then its kind's parameters; (rule or None, problems)."""
    where = _where(i, raw)
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in kinds:
        return None, [(f"{where}kind", f"unknown rule kind {kind!r}; kinds are {', '.join(kinds)}")]
    spec = kinds[kind]
    param_keys = spec.params.__struct_fields__
    allowed = ", ".join(sorted({*COMMON_KEYS, *param_keys}))
    problems: list[_check.Located] = [
        (f"{where}{key}", f"unknown key; allowed keys are {allowed}")
        for key in raw
        if key not in COMMON_KEYS and key not in param_keys
    ]
    common = {k: v for k, v in raw.items() if k in COMMON_KEYS}
    params = {k: v for k, v in raw.items() if k in param_keys}
    problems += _check.check(common, RuleCommon, where) + _check.check(params, spec.params, where)
    if problems:
        return None, problems
    head = msgspec.convert(common, RuleCommon, strict=True)
    typed = msgspec.convert(params, spec.params, strict=True)
    contradictions: list[_check.Located] = [
        (f"{where}{key}" if key else where.rstrip("."), msg) for key, msg in spec.check(typed)
    ]
    if contradictions:
        return None, contradictions
    rule = Rule(
        id=head.id or head.kind,
        kind=head.kind,
        severity=head.severity,
        on_missing=head.on_missing,
        arms=head.arms,
        families=head.families,
        why=head.why,
        params=typed,
    )
    return rule, []
