"""Small constructors for hand-made evidence (arms, cells, comparisons, acceptance, KV, boots) and rules.

The kinds read only the typed Evidence, never its tables: hand-made evidence carries a stand-in for
the tables that fails on any use, so a kind that reached for them would fail its tests.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest

from mtpverdict.errors import PolicyError
from mtpverdict.evidence.comparisons import BootValues
from mtpverdict.evidence.gather import _arm_cell_index, _arm_comparison_index
from mtpverdict.evidence.model import BootInfo, CellKey, CoherenceCase, Evidence, Tables
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.policy import OnMissing, Policy, Rule
from mtpverdict.formats.results import Arm, Campaign, Method, Role, Scope, Spec, Workload
from mtpverdict.rules import registry
from mtpverdict.stats.acceptance import ArmAcceptance, Surface
from mtpverdict.stats.capacity import KvCeiling
from mtpverdict.stats.procedure import CellComparison, Outcome, VarianceMethod
from mtpverdict.stats.runs import CellSummary

DECODE = "decode_tps"
OFF_A = "off_A"


class NoTables:
    """Stands in for Evidence.tables: the rules read typed values only (evidence/model.py)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a rule kind read evidence.tables.{name}; kinds read the typed values only")


# ---------------------------------------------------------------------------------------------------
# the campaign


def control(name: str = OFF_A, family: str = "default") -> Arm:
    """A control arm (speculation off)."""
    return Arm(name, Role.CONTROL, Spec(None, 0), 1, None, family=family)


def candidate(name: str = "k2", k: int | None = 2, family: str = "default") -> Arm:
    """An MTP candidate arm at depth k (None: depth not recorded)."""
    return Arm(name, Role.CANDIDATE, Spec(Method.MTP, k), 2, None, family=family)


def workload(
    wid: str = "short",
    prompt_tokens: int | None = None,
    max_tokens: int | None = None,
    identical: bool = False,
) -> Workload:
    return Workload(wid, prompt_tokens, max_tokens, identical)


def policy(alpha: float = 0.05) -> Policy:
    """A policy without rules: the kinds read only its alpha."""
    return registry.parse_rules(f'policy_version = 1\nname = "unit"\nalpha = {alpha}\n', "unit.toml")


# ---------------------------------------------------------------------------------------------------
# the values the kinds read


def cell(
    arm: str,
    values: Sequence[float],
    wl: str = "short",
    concurrency: int = 1,
    metric: str = DECODE,
    runs_known: bool = True,
) -> CellSummary:
    """One cell's runs; median, minimum and maximum computed from them."""
    return CellSummary(
        arm=arm,
        workload=wl,
        concurrency=concurrency,
        metric=metric,
        n=len(values),
        n_boots=1,
        n_cold=0,
        median=float(statistics.median(values)),
        minimum=min(values),
        maximum=max(values),
        iqr=0.0,
        runs_known=runs_known,
        origin="request" if runs_known else "summary",
        values=tuple(values),
    )


def comparison(
    ratio: float,
    outcome: str = "inconclusive",
    *,
    ci: tuple[float, float] | None = None,
    variance: VarianceMethod = VarianceMethod.WELCH,
    floor: float = 0.03,
    df: float = 4.0,
) -> CellComparison:
    """An arm-vs-off cell comparison given as ratios (the model keeps logs); ci None means no interval.

    Its arm and cell are filled in by make_evidence from the key it is stored under.
    """
    low, high = (math.nan, math.nan) if ci is None else (math.log(ci[0]), math.log(ci[1]))
    nan = math.nan
    return CellComparison(
        arm="",
        cell=("", 0),
        n_arm=2,
        n_control=2,
        estimate=math.log(ratio),
        se=0.01,
        sd_arm=nan,
        sd_control=nan,
        df=df,
        ci_low=low,
        ci_high=high,
        p_better=nan,
        p_worse=nan,
        p_equivalent=nan,
        p_below_min_effect=nan,
        floor_first=math.log1p(floor),
        floor_last=math.log1p(floor),
        variance=variance,
        variance_reason=str(variance),
        loo_p=nan,
        loo_estimate=nan,
        loo_boot=None,
        cell_outcome=Outcome(outcome),
    )


def surface(
    rate: float | None,
    draft_tokens: int | None = None,
    *,
    ci: tuple[float, float] | None = None,
    mal: float | None = None,
    positions: tuple[float, ...] | None = None,
    source: str = "metrics",
) -> Surface:
    """One acceptance surface of an arm."""
    accepted = None if rate is None or draft_tokens is None else round(rate * draft_tokens)
    return Surface(
        source=source,
        scoped="window",
        windows=1,
        drafts=None,
        draft_tokens=draft_tokens,
        accepted_tokens=accepted,
        rate=rate,
        ci_low=None if ci is None else ci[0],
        ci_high=None if ci is None else ci[1],
        mean_acceptance_length=mal,
        per_position_rate=positions,
        void_windows=0,
    )


def acceptance(arm: str, primary: Surface | None, *others: Surface) -> ArmAcceptance:
    return ArmAcceptance(arm, primary, (*([] if primary is None else [primary]), *others))


def kv(arm: str, tokens: int | None, ratio_to_control: float | None = None) -> KvCeiling:
    """An arm's KV pool; the rule computes its own ceiling, so the stored one stays unset."""
    return KvCeiling(arm, tokens, 1, None, None, ratio_to_control)


def boot(
    n: int,
    status: str = "ready",
    *,
    error: str | None = None,
    observed_k: int | None = None,
    kv_cache_tokens: int | None = None,
) -> BootInfo:
    return BootInfo(n, n, status, error, observed_k, kv_cache_tokens)


def case(name: str, passed: bool = True, sha: str | None = None) -> CoherenceCase:
    return CoherenceCase(name, passed, sha)


def make_evidence(
    arms: Sequence[Arm],
    *,
    workloads: Sequence[Workload] = (workload(),),
    window_tokens: int | None = None,
    alpha: float = 0.05,
    cells: Sequence[CellSummary] = (),
    comparisons: Mapping[CellKey, CellComparison] | None = None,
    acceptance: Sequence[ArmAcceptance] = (),
    kv: Sequence[KvCeiling] = (),
    hashes: Mapping[tuple[str, str], frozenset[str]] | None = None,
    distinct_outputs: Mapping[tuple[str, str], int] | None = None,
    coherence: Mapping[str, tuple[CoherenceCase, ...]] | None = None,
    likelihood: Mapping[str, tuple[float, ...]] | None = None,
    boots: Mapping[str, tuple[BootInfo, ...]] | None = None,
    request_counts: Mapping[str, tuple[int, int]] | None = None,
) -> Evidence:
    """Evidence holding exactly what a test gives, indexed the way gather indexes it."""
    campaign = Campaign(
        format="mtpverdict.results/1",
        id="unit",
        title="hand-made evidence",
        scope=Scope(None, None, None, None, None),
        arms=tuple(arms),
        workloads=tuple(workloads),
        window_tokens=window_tokens,
    )
    by_key = {(c.arm, c.workload, c.concurrency, c.metric): c for c in cells}
    comps = {
        key: dataclasses.replace(c, arm=key[0], cell=(key[1], key[2]))
        for key, c in (comparisons or {}).items()
    }
    return Evidence(
        campaign=campaign,
        policy=policy(alpha),
        tables=cast(Tables, NoTables()),
        cells=by_key,
        values=BootValues({}, {}),
        archived={},
        runs=(),
        comparisons=comps,
        floors=(),
        acceptance={a.arm: a for a in acceptance},
        kv={k.arm: k for k in kv},
        history=(),
        hashes=dict(hashes or {}),
        distinct_outputs=dict(distinct_outputs or {}),
        coherence=dict(coherence or {}),
        likelihood=dict(likelihood or {}),
        boots=dict(boots or {}),
        request_counts=dict(request_counts or {}),
        arm_cell_index=_arm_cell_index(campaign, by_key),
        floor_index={},
        arm_comparison_index=_arm_comparison_index(comps),
    )


# ---------------------------------------------------------------------------------------------------
# rules, as a policy file states them


def policy_text(kind: str, body: str = "", on_missing: OnMissing | None = None) -> str:
    """A one-rule policy; `body` holds the rule's own keys as TOML lines."""
    extra = "" if on_missing is None else f'on_missing = "{on_missing}"\n'
    return f'policy_version = 1\nname = "unit"\n[[rules]]\nkind = "{kind}"\n{extra}{body}\n'


def rule(kind: str, body: str = "", on_missing: OnMissing | None = None) -> Rule:
    """The one rule of a policy, parsed (and so typed and checked) the way a policy file is."""
    (only,) = registry.parse_rules(policy_text(kind, body, on_missing), "unit.toml").rules
    return only


def params(kind: str, body: str = "") -> Any:
    """A kind's typed parameters, parsed from TOML lines."""
    return rule(kind, body).params


def refusals(kind: str, body: str) -> list[tuple[str | None, str]]:
    """(key, message) of every problem the policy reader finds in a one-rule policy."""
    with pytest.raises(PolicyError) as info:
        registry.parse_rules(policy_text(kind, body), "unit.toml")
    return [(p.key, p.message) for p in info.value.problems]


def refused(kind: str, body: str, key: str | None, fragment: str) -> bool:
    """Whether the policy reader refuses the rule naming `key` with a message holding `fragment`."""
    return any(k == key and fragment in m for k, m in refusals(kind, body))


def assert_on_missing(evidence: Evidence, arm: Arm, kind: str, body: str = "") -> None:
    """Missing evidence means what on_missing says: undecided, a failure, or a stated acceptance."""
    judged = {mode: registry.evaluate(evidence, arm, rule(kind, body, mode)) for mode in OnMissing}
    kind_ = registry.KINDS[kind]
    sentence = kind_.render(kind_.evaluate(evidence, arm, params(kind, body)), arm)
    assert all(r.status is RuleStatus.MISSING for r in judged.values())
    undecided, rejected, accepted = (
        judged[m] for m in (OnMissing.INCONCLUSIVE, OnMissing.REJECT, OnMissing.ACCEPT)
    )
    assert undecided.passed is None and undecided.detail == sentence
    assert rejected.passed is False
    assert rejected.detail == sentence + " (rejected: the policy treats missing evidence as failing)"
    assert accepted.passed is True and accepted.detail == sentence + " (on_missing = accept)"


# ---------------------------------------------------------------------------------------------------
# evidence gathered from records, for kinds that read the family procedure


BootCells = Mapping[tuple[str, int], float]  # (workload, concurrency) -> decode tok/s of one boot
TOKENS = 101  # completion tokens of every generated request: a decode window of 100 tokens


def gathered(
    boots: Mapping[str, Sequence[BootCells]],
    *,
    policy_text_: str = 'policy_version = 1\nname = "unit"\n',
    concurrency: Sequence[int] | None = None,
) -> Evidence:
    """Evidence gathered (results_from_records + gather) from boots given as decode rates per cell.

    Arms named off* are controls, others MTP candidates at k=2; every boot runs each of its cells
    three times at exactly its rate, so a boot's statistic is that rate. Boots are ordered arm by arm
    in the order given, the controls' second boot last (off_A first, off_B last).
    """
    from mtpverdict.evidence.gather import gather
    from mtpverdict.formats.results_io import results_from_records

    names = list(boots)
    arms = [
        {
            "name": name,
            "role": "control" if name.startswith("off") else "candidate",
            "spec": {"method": None, "k": 0} if name.startswith("off") else {"method": "mtp", "k": 2},
            "order": i + 1,
            "serve_argv": None,
        }
        for i, name in enumerate(names)
    ]
    workloads = sorted({w for cells in boots.values() for b in cells for w, _ in b})
    campaign: dict[str, Any] = {
        "format": "mtpverdict.results/1",
        "id": "unit",
        "title": "gathered",
        "scope": {"device": None, "engine": None, "engine_version": None, "model": None, "claim": None},
        "arms": arms,
        "workloads": [
            {"id": w, "prompt_tokens": None, "max_tokens": TOKENS, "expect_identical": False}
            for w in workloads
        ],
        "window_tokens": None,
    }
    if concurrency is not None:
        campaign["concurrency"] = list(concurrency)
    records: list[dict[str, Any]] = []
    order = 0
    for name in names:
        for b, cells in enumerate(boots[name], start=1):
            order += 1
            records.append(_boot_record(name, b, order))
            records += [
                _request(name, b, w, c, rep, rate) for (w, c), rate in cells.items() for rep in (1, 2, 3)
            ]
    results = results_from_records(campaign, records)
    return gather(results, registry.parse_rules(policy_text_, "unit.toml"))


def _boot_record(arm: str, boot: int, order: int) -> dict[str, Any]:
    return {
        "kind": "boot",
        "arm": arm,
        "boot": boot,
        "order": order,
        "status": "ready",
        "ready_seconds": 1.0,
        "kv_cache_tokens": None,
        "block_size": None,
        "num_blocks": None,
        "max_model_len": None,
        "engine_version": None,
        "argv": None,
        "error": None,
    }


def _request(arm: str, boot: int, wl: str, conc: int, rep: int, rate: float) -> dict[str, Any]:
    start = 10.0 * rep
    return {
        "kind": "request",
        "arm": arm,
        "boot": boot,
        "workload": wl,
        "concurrency": conc,
        "rep": rep,
        "warmup": False,
        "t_start": start,
        "t_first": start + 0.1,
        "t_end": start + 0.1 + (TOKENS - 1) / rate,
        "prompt_tokens": 10,
        "completion_tokens": TOKENS,
        "status": "ok",
    }
