"""kv_ceiling: the KV pool left beside the drafter allows the concurrency the seat needs."""

from __future__ import annotations

from dataclasses import dataclass

from msgspec import Struct

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats._check import Fraction, Located, Nonneg, PositiveInt
from mtpverdict.formats.decision import RuleStatus, Threshold
from mtpverdict.formats.results import Arm
from mtpverdict.rules.kind import Finding, RuleKind


class Params(Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a kv_ceiling rule (min_concurrency, max_loss or both)."""

    min_concurrency: Nonneg | None = None
    window_tokens: PositiveInt | None = None
    workload: str | None = None
    max_loss: Fraction | None = None


@dataclass(frozen=True, slots=True)
class KvFinding(Finding):
    """The pool, its ceiling (pool / window) and its share of the control's pool."""

    kv_cache_tokens: int | None
    window: int | None
    ceiling: float | None
    ratio_to_control: float | None
    min_concurrency: float | None
    max_loss: float | None
    missing: str | None


class KvCeiling(RuleKind[Params, KvFinding]):
    """pool / window reaches min_concurrency, and the pool keeps at least 1 - max_loss of the control's."""

    name = "kv_ceiling"
    params_type = Params
    summary = (
        "the KV pool (a ceiling: pool / window) allows the concurrency needed and loses little to a drafter"
    )

    def contradictions(self, params: Params) -> list[Located]:
        out: list[Located] = []
        if params.min_concurrency is None and params.max_loss is None:
            out.append((None, "sets no threshold; give min_concurrency or max_loss"))
        if params.window_tokens is not None and params.workload is not None:
            out.append(("window_tokens", "give window_tokens or workload, not both"))
        return out

    def evaluate(self, evidence: Evidence, arm: Arm, params: Params) -> KvFinding:
        kv = evidence.kv[arm.name]
        window = _window(evidence, params)
        thresholds: Threshold = {
            "min_concurrency": params.min_concurrency,
            "max_loss": params.max_loss,
            "window_tokens": window,
        }
        if params.workload is not None and window is None:
            missing = f"the campaign has no workload {params.workload!r} to take the window from"
            return self._finding(evidence, arm, params, RuleStatus.MISSING, None, thresholds, missing)
        if kv.kv_cache_tokens is None:
            return self._finding(evidence, arm, params, RuleStatus.MISSING, None, None, "no KV pool recorded")
        ceiling = None
        failed = False
        if params.min_concurrency is not None:
            if not window:
                missing = "no window to divide the KV pool by"
                return self._finding(evidence, arm, params, RuleStatus.MISSING, None, thresholds, missing)
            ceiling = kv.kv_cache_tokens / window
            failed = ceiling < params.min_concurrency
        if params.max_loss is not None:
            if kv.ratio_to_control is None:
                if not failed:
                    missing = "no control KV pool to compare with"
                    return self._finding(
                        evidence, arm, params, RuleStatus.MISSING, ceiling, thresholds, missing
                    )
            elif 1.0 - kv.ratio_to_control > params.max_loss:
                failed = True
        status = RuleStatus.FAIL if failed else RuleStatus.PASS
        return self._finding(evidence, arm, params, status, ceiling, thresholds, None)

    def _finding(
        self,
        evidence: Evidence,
        arm: Arm,
        params: Params,
        status: RuleStatus,
        ceiling: float | None,
        threshold: Threshold,
        missing: str | None,
    ) -> KvFinding:
        kv = evidence.kv[arm.name]
        return KvFinding(
            status=status,
            value=ceiling,
            threshold=threshold,
            kv_cache_tokens=kv.kv_cache_tokens,
            window=_window(evidence, params),
            ceiling=ceiling,
            ratio_to_control=kv.ratio_to_control,
            min_concurrency=params.min_concurrency,
            max_loss=params.max_loss,
            missing=missing,
        )

    def render(self, finding: KvFinding, arm: Arm) -> str:
        if finding.missing is not None:
            return f"{arm.name}: {finding.missing}"
        assert finding.kv_cache_tokens is not None
        notes = [f"KV pool {finding.kv_cache_tokens:,} tokens"]
        failures = []
        if finding.ceiling is not None and finding.min_concurrency is not None:
            notes.append(f"ceiling {finding.ceiling:.2f}x at {finding.window:,} tokens")
            if finding.ceiling < finding.min_concurrency:
                failures.append(
                    f"ceiling {finding.ceiling:.2f}x is below the {finding.min_concurrency}x minimum"
                )
        if finding.max_loss is not None and finding.ratio_to_control is not None:
            notes.append(f"{finding.ratio_to_control * 100:.0f}% of the control's pool")
            if 1.0 - finding.ratio_to_control > finding.max_loss:
                failures.append(
                    f"keeps {finding.ratio_to_control * 100:.0f}% of the control's pool, a loss "
                    f"beyond {finding.max_loss * 100:.0f}%"
                )
        detail = f"{arm.name}: " + ", ".join(notes)
        if failures:
            return detail + "; " + "; ".join(failures)
        return detail + " (a ceiling, not measured concurrency)"


def _window(evidence: Evidence, params: Params) -> int | None:
    """The window the pool is divided by: the rule's, its workload's prompt + completion, the campaign's."""
    if params.window_tokens is not None:
        return params.window_tokens
    if params.workload is not None:
        wl = next((w for w in evidence.campaign.workloads if w.id == params.workload), None)
        if wl is None:
            return None  # a workload this campaign lacks gives no window: missing evidence, said so
        if wl.prompt_tokens is not None and wl.max_tokens is not None:
            return wl.prompt_tokens + wl.max_tokens
    return evidence.campaign.window_tokens


KIND = KvCeiling()
