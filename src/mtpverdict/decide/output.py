"""Decision JSON (mtpverdict.decision/1) and the seed-style text summary, both pure renderings."""

from __future__ import annotations

import math
from typing import Any

from mtpverdict._jsonio import canonical
from mtpverdict._version import __version__
from mtpverdict.decide.engine import DECISION_FORMAT, Decision
from mtpverdict.stats.acceptance import Surface
from mtpverdict.stats.runs import METRIC_LABELS


def _num(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(x)


def _ratio(log_value: float) -> float | None:
    return _num(math.exp(log_value)) if math.isfinite(log_value) else None


def _surface(s: Surface) -> dict[str, Any]:
    return {
        "source": s.source,
        "scoped": s.scoped,
        "windows": s.windows,
        "drafts": s.drafts,
        "draft_tokens": s.draft_tokens,
        "accepted_tokens": s.accepted_tokens,
        "acceptance_rate": _num(s.rate),
        "ci_low": _num(s.ci_low),
        "ci_high": _num(s.ci_high),
        "mean_acceptance_length": _num(s.mean_acceptance_length),
        "per_position_rate": None if s.per_position_rate is None else list(s.per_position_rate),
        "void_windows": s.void_windows,
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return _num(value)
    if hasattr(value, "item"):  # numpy scalar
        return _jsonable(value.item())
    return value


def decision_dict(
    d: Decision, *, rules_sha256: str, history: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The decision as a JSON-ready dict (sorted and rounded when serialised)."""
    ev = d.evidence
    campaign = ev.campaign
    arms = []
    for v in d.arms:
        acc = ev.acceptance.get(v.arm.name)
        kv = ev.kv[v.arm.name]
        arms.append(
            {
                "name": v.arm.name,
                "role": v.arm.role,
                "family": v.arm.family,
                "spec": v.arm.spec.as_dict(),
                "verdict": v.verdict,
                "void_reason": v.void_reason,
                "rules": [
                    {
                        "rule": o.rule,
                        "kind": o.kind,
                        "severity": o.severity,
                        "passed": o.passed,
                        "status": o.status,
                        "value": _jsonable(o.value),
                        "threshold": _jsonable(o.threshold),
                        "detail": o.detail,
                    }
                    for o in v.outcomes
                ],
                "acceptance": None
                if acc is None or acc.primary is None
                else {
                    "primary": _surface(acc.primary),
                    "surfaces": [_surface(s) for s in acc.surfaces],
                    "wasted_fraction": _num(acc.wasted_fraction),
                },
                "kv": {
                    "kv_cache_tokens": kv.kv_cache_tokens,
                    "window_tokens": kv.window_tokens,
                    "ceiling": _num(kv.ceiling),
                    "ratio_to_control": _num(kv.ratio_to_control),
                },
            }
        )
    cells = [
        {
            "arm": c.arm,
            "workload": c.workload,
            "concurrency": c.concurrency,
            "metric": c.metric,
            "n": c.n,
            "n_boots": c.n_boots,
            "n_cold": c.n_cold,
            "median": c.median,
            "min": c.minimum,
            "max": c.maximum,
            "iqr": c.iqr,
            "runs_known": c.runs_known,
            "origin": c.origin,
        }
        for _, c in sorted(ev.cells.items())
    ]
    comparisons = [
        {
            "arm": arm,
            "workload": wl,
            "concurrency": conc,
            "metric": metric,
            "ratio": _ratio(c.estimate),
            "ci_low": _ratio(c.ci_low),
            "ci_high": _ratio(c.ci_high),
            "method": c.method,
            "df": c.df,
            "n_arm_boots": c.n_arm,
            "n_base_boots": c.n_base,
            "p_better": _num(c.p_better),
            "p_better_holm": _num(c.p_better_adjusted),
            "p_worse": _num(c.p_worse),
            "p_equivalent": _num(c.p_equivalent),
            "floor": None if not math.isfinite(c.floor) else math.expm1(c.floor),
            "outcome": c.outcome,
            "bootstrap_ci": None
            if (arm, wl, conc, metric) not in ev.bootstraps
            else [_ratio(x) for x in ev.bootstraps[(arm, wl, conc, metric)]],
        }
        for (arm, wl, conc, metric), c in sorted(ev.comparisons.items())
    ]
    floors = [
        {
            "family": f.family,
            "workload": f.workload,
            "concurrency": f.concurrency,
            "metric": f.metric,
            "df": f.df,
            "boot_sd": _num(f.s),
            "floor": None if not math.isfinite(f.floor) else math.expm1(f.floor),
            "multiplier_vs_pair": _num(f.multiplier_vs_pair),
            "pair_difference": None if f.pair_difference is None else math.expm1(f.pair_difference),
            "variance_sources": list(f.sources),
            "candidates": f.n_candidates,
        }
        for f in ev.floors
    ]
    selected = None
    if d.selected is not None:
        selected = {
            "arm": d.selected.name,
            "spec": d.selected.spec.as_dict(),
            "serve_argv": None if d.selected.serve_argv is None else list(d.selected.serve_argv),
        }
    return {
        "format": DECISION_FORMAT,
        "decision": d.decision,
        "selected": selected,
        "provisional": d.provisional,
        "reasons": list(d.reasons),
        "policy": {
            "name": ev.policy.name,
            "file": ev.policy.source.replace("\\", "/").rsplit("/", 1)[-1],
            "alpha": ev.policy.alpha,
            "selection": ev.policy.selection_mode,
        },
        "arms": arms,
        "controls": [
            {"name": c.name, "status": c.status, "detail": c.detail, "value": _num(c.value)}
            for c in d.controls
        ],
        "floors": floors,
        "comparisons": comparisons,
        "cells": cells,
        "campaign": {
            "id": campaign.id,
            "title": campaign.title,
            "synthetic": campaign.synthetic,
            "claim": campaign.scope.claim,
            "device": campaign.scope.device,
            "engine": campaign.scope.engine,
            "engine_version": campaign.scope.engine_version,
            "model": campaign.scope.model,
        },
        "inputs": {
            "campaign_sha256": ev.results.campaign_sha256,
            "records_sha256": ev.results.records_sha256,
            "rules_sha256": rules_sha256,
            "noise_history": history or [],
            "tool_version": __version__,
        },
    }


def decision_json(d: Decision, *, rules_sha256: str, history: list[dict[str, str]] | None = None) -> str:
    """Canonical decision JSON text: sorted keys, 6 significant digits, trailing newline."""
    return canonical(decision_dict(d, rules_sha256=rules_sha256, history=history))


def render_summary(d: Decision) -> str:
    """A seed-style text summary: per-arm table of the selection metric, acceptance, KV; then reasons."""
    from tabulate import tabulate

    ev = d.evidence
    metric = ev.policy.selection_metric
    rows = []
    for v in d.arms:
        name = v.arm.name
        cells = ev.arm_cells(name, metric)
        runs = "; ".join(
            f"{c.workload} c={c.concurrency}: {c.median:.1f} [{c.minimum:.1f}-{c.maximum:.1f}] n={c.n}"
            for c in cells[:3]
        ) + ("; ..." if len(cells) > 3 else "")
        comp = [ev.comparison(name, c.workload, c.concurrency, metric) for c in cells[:1]]
        ratio = "" if not comp or comp[0] is None else f"{math.exp(comp[0].estimate):.3f}x"
        acc = ev.acceptance.get(name)
        acc_text = ""
        if acc is not None and acc.primary is not None and acc.primary.rate is not None:
            n = acc.primary.draft_tokens
            acc_text = f"{acc.primary.rate * 100:.1f}%" + (f" n={n}" if n is not None else " n=?")
        kv = ev.kv[name]
        kv_text = "" if kv.kv_cache_tokens is None else f"{kv.kv_cache_tokens:,}"
        if kv.ceiling is not None:
            kv_text += f" ({kv.ceiling:.2f}x)"
        rows.append([name, v.arm.spec.label(), runs or "-", ratio, acc_text, kv_text, v.verdict])
    table = tabulate(
        rows,
        headers=[
            "arm",
            "spec",
            METRIC_LABELS[metric] + " median [min-max]",
            "vs off",
            "acceptance",
            "KV pool (ceiling)",
            "verdict",
        ],
        tablefmt="simple",
        disable_numparse=True,
    )
    head = f"decision: {d.decision}"
    if d.selected is not None:
        head += f"  selected: {d.selected.name} ({d.selected.spec.label()})"
    if d.provisional and d.decision != "inconclusive":
        head += "  (provisional)"
    lines = [f"{ev.campaign.id}: {ev.campaign.title}", "", table, "", head, "", "reasons:"]
    lines.extend(f"  - {r}" for r in d.reasons)
    return "\n".join(lines) + "\n"
