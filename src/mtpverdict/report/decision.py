"""The decision file as the report reads it: mtpverdict.decision/1 parsed into frozen, typed values.

The report never decides: it shows a decision, either read from a file `mtpverdict decide` wrote or
computed the same way. Both paths go through `parse_decision`, so a file that is not a decision, or a
decision of another format version, is refused with the file and key named.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mtpverdict.errors import InputError, Problem

DECISION_FORMAT = "mtpverdict.decision/1"  # the format `mtpverdict decide` writes (decide/engine.py)
SHOWN_PROBLEMS = 20  # problems kept in one error before summarising the rest

T = TypeVar("T")
Number = int | float


@dataclass(frozen=True, slots=True)
class RuleEntry:
    """One rule's outcome for one arm."""

    rule: str
    kind: str
    severity: str
    status: str
    detail: str
    value: float | None  # the outcome value when it is a number
    threshold: float | None  # the threshold when it is a number
    params: tuple[tuple[str, float], ...]  # numeric threshold parameters when the threshold is a table

    def param(self, name: str) -> float | None:
        for key, value in self.params:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class SurfaceEntry:
    """Acceptance as read from one surface (metrics, response, log, report)."""

    source: str
    scoped: str
    windows: int
    void_windows: int
    drafts: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    rate: float | None
    ci_low: float | None
    ci_high: float | None
    mean_acceptance_length: float | None
    per_position_rate: tuple[float, ...] | None


@dataclass(frozen=True, slots=True)
class AcceptanceEntry:
    """An arm's acceptance: the primary surface, every surface, the wasted-draft fraction."""

    primary: SurfaceEntry
    surfaces: tuple[SurfaceEntry, ...]
    wasted_fraction: float | None


@dataclass(frozen=True, slots=True)
class KvEntry:
    """An arm's KV pool and its concurrency ceiling (pool / window)."""

    kv_cache_tokens: int | None
    window_tokens: int | None
    ceiling: float | None
    ratio_to_control: float | None


@dataclass(frozen=True, slots=True)
class ArmEntry:
    """One arm with its verdict and rule outcomes."""

    name: str
    role: str
    family: str
    method: str | None
    k: int | None
    verdict: str
    void_reason: str | None
    rules: tuple[RuleEntry, ...]
    acceptance: AcceptanceEntry | None
    kv: KvEntry

    @property
    def is_control(self) -> bool:
        return self.role == "control"

    @property
    def label(self) -> str:
        """The spec as `decide` prints it: `off`, `mtp k=3`, `ngram k=?`."""
        if self.method is None:
            return "off"
        return f"{self.method} k={'?' if self.k is None else self.k}"

    def rules_of(self, kind: str) -> tuple[RuleEntry, ...]:
        return tuple(r for r in self.rules if r.kind == kind)


@dataclass(frozen=True, slots=True)
class CellEntry:
    """The spread of one metric in one (arm, workload, concurrency) cell, as the decision counted it."""

    arm: str
    workload: str
    concurrency: int
    metric: str
    n: int
    n_boots: int
    n_cold: int
    median: float
    minimum: float
    maximum: float
    iqr: float
    runs_known: bool
    origin: str


@dataclass(frozen=True, slots=True)
class ComparisonEntry:
    """An arm against its family's control at one cell: ratio, interval, floor, outcome."""

    arm: str
    workload: str
    concurrency: int
    metric: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    method: str
    df: int
    n_arm_boots: int
    n_base_boots: int
    p_better_holm: float | None
    p_worse: float | None
    p_equivalent: float | None
    floor: float | None
    outcome: str
    bootstrap_ci: tuple[float, float] | None


@dataclass(frozen=True, slots=True)
class FloorEntry:
    """The sensitivity floor of one family at one cell."""

    family: str
    workload: str
    concurrency: int
    metric: str
    df: int
    boot_sd: float | None
    floor: float | None
    multiplier_vs_pair: float | None
    pair_difference: float | None
    variance_sources: tuple[str, ...]
    candidates: int


@dataclass(frozen=True, slots=True)
class ControlEntry:
    """One campaign control (floor, drift, blind harness, void arms, failed boots)."""

    name: str
    status: str
    detail: str
    value: float | None


@dataclass(frozen=True, slots=True)
class DecisionDoc:
    """A whole decision, typed: what was decided, why, and the evidence it cites."""

    source: str  # the file it was read from, or "computed"
    decision: str
    selected: str | None
    provisional: bool
    reasons: tuple[str, ...]
    policy_name: str
    policy_file: str
    alpha: float
    selection: str
    arms: tuple[ArmEntry, ...]
    controls: tuple[ControlEntry, ...]
    floors: tuple[FloorEntry, ...]
    comparisons: tuple[ComparisonEntry, ...]
    cells: tuple[CellEntry, ...]
    campaign_id: str | None
    campaign_title: str | None
    synthetic: bool
    claim: str | None
    device: str | None
    engine: str | None
    engine_version: str | None
    model: str | None
    campaign_sha256: str
    records_sha256: str
    rules_sha256: str
    tool_version: str

    def arm(self, name: str) -> ArmEntry | None:
        for arm in self.arms:
            if arm.name == name:
                return arm
        return None

    def cell(self, arm: str, workload: str, concurrency: int, metric: str) -> CellEntry | None:
        for c in self.cells:
            if (c.arm, c.workload, c.concurrency, c.metric) == (arm, workload, concurrency, metric):
                return c
        return None

    def floor(self, family: str, workload: str, concurrency: int, metric: str) -> FloorEntry | None:
        for f in self.floors:
            if (f.family, f.workload, f.concurrency, f.metric) == (family, workload, concurrency, metric):
                return f
        return None

    @property
    def families(self) -> tuple[str, ...]:
        """Families in the order their first arm appears."""
        return tuple(dict.fromkeys(a.family for a in self.arms))


class _Fields:
    """Typed access to one JSON object, collecting a Problem (file and key path) per mismatch."""

    def __init__(self, obj: Any, path: str, source: str, problems: list[Problem]) -> None:
        self.path = path
        self.source = source
        self.problems = problems
        self.obj: dict[str, Any] = obj if isinstance(obj, dict) else {}
        if not isinstance(obj, dict):
            self._problem(path or "(top level)", "must be a JSON object")

    def _problem(self, key: str, message: str) -> None:
        self.problems.append(Problem(self.source, message, key=key))

    def _key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def _get(self, name: str, check: Callable[[Any], bool], what: str, default: T, nullable: bool) -> Any:
        if name not in self.obj:
            self._problem(self._key(name), "missing; this is not a complete mtpverdict.decision/1 file")
            return default
        value = self.obj[name]
        if value is None and nullable:
            return None
        if not check(value):
            self._problem(
                self._key(name), f"must be {what}{' or null' if nullable else ''}, got {value!r:.60}"
            )
            return default
        return value

    def text(self, name: str) -> str:
        return str(self._get(name, lambda v: isinstance(v, str), "a string", "", False))

    def opt_text(self, name: str) -> str | None:
        value = self._get(name, lambda v: isinstance(v, str), "a string", None, True)
        return None if value is None else str(value)

    def integer(self, name: str) -> int:
        return int(self._get(name, _is_int, "an integer", 0, False))

    def opt_integer(self, name: str) -> int | None:
        value = self._get(name, _is_int, "an integer", None, True)
        return None if value is None else int(value)

    def number(self, name: str) -> float:
        return float(self._get(name, _is_number, "a number", math.nan, False))

    def opt_number(self, name: str) -> float | None:
        value = self._get(name, _is_number, "a number", None, True)
        return None if value is None else float(value)

    def flag(self, name: str) -> bool:
        return bool(self._get(name, lambda v: isinstance(v, bool), "true or false", False, False))

    def items(self, name: str) -> list[Any]:
        value = self._get(name, lambda v: isinstance(v, list), "a list", [], False)
        return list(value)

    def opt_items(self, name: str) -> list[Any] | None:
        value = self._get(name, lambda v: isinstance(v, list), "a list", None, True)
        return None if value is None else list(value)

    def child(self, name: str) -> _Fields:
        return _Fields(self.obj.get(name), self._key(name), self.source, self.problems)

    def raw(self, name: str) -> Any:
        return self.obj.get(name)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _as_number(value: Any) -> float | None:
    return float(value) if _is_number(value) else None


def _numbers(values: list[Any] | None, key: str, fields: _Fields) -> tuple[float, ...] | None:
    if values is None:
        return None
    if not all(_is_number(v) for v in values):
        fields.problems.append(Problem(fields.source, "must be a list of numbers", key=key))
        return None
    return tuple(float(v) for v in values)


def _rule(f: _Fields) -> RuleEntry:
    threshold = f.raw("threshold")
    params: tuple[tuple[str, float], ...] = ()
    if isinstance(threshold, dict):
        params = tuple(sorted((str(k), float(v)) for k, v in threshold.items() if _is_number(v)))
    return RuleEntry(
        rule=f.text("rule"),
        kind=f.text("kind"),
        severity=f.text("severity"),
        status=f.text("status"),
        detail=f.text("detail"),
        value=_as_number(f.raw("value")),
        threshold=_as_number(threshold),
        params=params,
    )


def _surface(f: _Fields) -> SurfaceEntry:
    return SurfaceEntry(
        source=f.text("source"),
        scoped=f.text("scoped"),
        windows=f.integer("windows"),
        void_windows=f.integer("void_windows"),
        drafts=f.opt_integer("drafts"),
        draft_tokens=f.opt_integer("draft_tokens"),
        accepted_tokens=f.opt_integer("accepted_tokens"),
        rate=f.opt_number("acceptance_rate"),
        ci_low=f.opt_number("ci_low"),
        ci_high=f.opt_number("ci_high"),
        mean_acceptance_length=f.opt_number("mean_acceptance_length"),
        per_position_rate=_numbers(f.opt_items("per_position_rate"), f"{f.path}.per_position_rate", f),
    )


def _arm(f: _Fields) -> ArmEntry:
    spec = f.child("spec")
    acceptance = None
    if f.raw("acceptance") is not None:
        acc = f.child("acceptance")
        acceptance = AcceptanceEntry(
            primary=_surface(acc.child("primary")),
            surfaces=tuple(
                _surface(_Fields(s, f"{acc.path}.surfaces[{i}]", f.source, f.problems))
                for i, s in enumerate(acc.items("surfaces"))
            ),
            wasted_fraction=acc.opt_number("wasted_fraction"),
        )
    kv = f.child("kv")
    return ArmEntry(
        name=f.text("name"),
        role=f.text("role"),
        family=f.text("family"),
        method=spec.opt_text("method"),
        k=spec.opt_integer("k"),
        verdict=f.text("verdict"),
        void_reason=f.opt_text("void_reason"),
        rules=tuple(
            _rule(_Fields(r, f"{f.path}.rules[{i}]", f.source, f.problems))
            for i, r in enumerate(f.items("rules"))
        ),
        acceptance=acceptance,
        kv=KvEntry(
            kv_cache_tokens=kv.opt_integer("kv_cache_tokens"),
            window_tokens=kv.opt_integer("window_tokens"),
            ceiling=kv.opt_number("ceiling"),
            ratio_to_control=kv.opt_number("ratio_to_control"),
        ),
    )


def _cell(f: _Fields) -> CellEntry:
    return CellEntry(
        arm=f.text("arm"),
        workload=f.text("workload"),
        concurrency=f.integer("concurrency"),
        metric=f.text("metric"),
        n=f.integer("n"),
        n_boots=f.integer("n_boots"),
        n_cold=f.integer("n_cold"),
        median=f.number("median"),
        minimum=f.number("min"),
        maximum=f.number("max"),
        iqr=f.number("iqr"),
        runs_known=f.flag("runs_known"),
        origin=f.text("origin"),
    )


def _comparison(f: _Fields) -> ComparisonEntry:
    boot = _numbers(f.opt_items("bootstrap_ci"), f"{f.path}.bootstrap_ci", f)
    return ComparisonEntry(
        arm=f.text("arm"),
        workload=f.text("workload"),
        concurrency=f.integer("concurrency"),
        metric=f.text("metric"),
        ratio=f.opt_number("ratio"),
        ci_low=f.opt_number("ci_low"),
        ci_high=f.opt_number("ci_high"),
        method=f.text("method"),
        df=f.integer("df"),
        n_arm_boots=f.integer("n_arm_boots"),
        n_base_boots=f.integer("n_base_boots"),
        p_better_holm=f.opt_number("p_better_holm"),
        p_worse=f.opt_number("p_worse"),
        p_equivalent=f.opt_number("p_equivalent"),
        floor=f.opt_number("floor"),
        outcome=f.text("outcome"),
        bootstrap_ci=(boot[0], boot[1]) if boot is not None and len(boot) == 2 else None,
    )


def _floor(f: _Fields) -> FloorEntry:
    sources = f.items("variance_sources")
    return FloorEntry(
        family=f.text("family"),
        workload=f.text("workload"),
        concurrency=f.integer("concurrency"),
        metric=f.text("metric"),
        df=f.integer("df"),
        boot_sd=f.opt_number("boot_sd"),
        floor=f.opt_number("floor"),
        multiplier_vs_pair=f.opt_number("multiplier_vs_pair"),
        pair_difference=f.opt_number("pair_difference"),
        variance_sources=tuple(str(s) for s in sources),
        candidates=f.integer("candidates"),
    )


def _control(f: _Fields) -> ControlEntry:
    return ControlEntry(
        name=f.text("name"), status=f.text("status"), detail=f.text("detail"), value=f.opt_number("value")
    )


def _each(f: _Fields, name: str, make: Callable[[_Fields], T]) -> tuple[T, ...]:
    return tuple(
        make(_Fields(item, f"{name}[{i}]", f.source, f.problems)) for i, item in enumerate(f.items(name))
    )


def parse_decision(obj: Any, source: str) -> DecisionDoc:
    """A decision JSON value as typed values; InputError naming `source` and every bad key otherwise."""
    if not isinstance(obj, dict) or "format" not in obj:
        raise InputError(
            [
                Problem(
                    source,
                    f"not a decision file: it has no format key (expected {DECISION_FORMAT!r}); "
                    "pass the JSON that `mtpverdict decide` wrote",
                    key="format",
                )
            ]
        )
    if obj["format"] != DECISION_FORMAT:
        raise InputError(
            [
                Problem(
                    source,
                    f"format is {obj['format']!r}, expected {DECISION_FORMAT!r}; pass the JSON that "
                    "`mtpverdict decide` wrote, or run `mtpverdict decide` again with this version",
                    key="format",
                )
            ]
        )
    problems: list[Problem] = []
    top = _Fields(obj, "", source, problems)
    policy = top.child("policy")
    campaign = top.child("campaign")
    inputs = top.child("inputs")
    selected: str | None = None
    if top.raw("selected") is not None:
        selected = top.child("selected").text("arm")
    reasons = top.items("reasons")
    if not all(isinstance(r, str) for r in reasons):
        problems.append(Problem(source, "must be a list of strings", key="reasons"))
    doc = DecisionDoc(
        source=source,
        decision=top.text("decision"),
        selected=selected,
        provisional=top.flag("provisional"),
        reasons=tuple(str(r) for r in reasons),
        policy_name=policy.text("name"),
        policy_file=policy.text("file"),
        alpha=policy.number("alpha"),
        selection=policy.text("selection"),
        arms=_each(top, "arms", _arm),
        controls=_each(top, "controls", _control),
        floors=_each(top, "floors", _floor),
        comparisons=_each(top, "comparisons", _comparison),
        cells=_each(top, "cells", _cell),
        campaign_id=campaign.opt_text("id"),
        campaign_title=campaign.opt_text("title"),
        synthetic=campaign.flag("synthetic"),
        claim=campaign.opt_text("claim"),
        device=campaign.opt_text("device"),
        engine=campaign.opt_text("engine"),
        engine_version=campaign.opt_text("engine_version"),
        model=campaign.opt_text("model"),
        campaign_sha256=inputs.text("campaign_sha256"),
        records_sha256=inputs.text("records_sha256"),
        rules_sha256=inputs.text("rules_sha256"),
        tool_version=inputs.text("tool_version"),
    )
    if problems:
        raise InputError(problems[:SHOWN_PROBLEMS], total=len(problems))
    if doc.selected is not None and doc.arm(doc.selected) is None:
        raise InputError(
            [Problem(source, f"selected arm {doc.selected!r} is not among arms", key="selected")]
        )
    return doc


def load_decision(path: str | os.PathLike[str]) -> DecisionDoc:
    """Read and parse a decision file; InputError (file, line or key, how to fix) when it is not one."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            [Problem(source, "no such file; pass the JSON that `mtpverdict decide` wrote")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem(source, f"cannot read the decision file: {exc}")]) from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError([Problem(source, f"not JSON: {exc.msg}", line=exc.lineno)]) from None
    return parse_decision(obj, source)
