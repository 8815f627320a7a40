"""The evidence as the gate reads it: a small typed view of a decision and its results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpverdict.formats.decision import ContextEnvelope, Decision, Schedule
from mtpverdict.formats.deployment import Deployment
from mtpverdict.formats.policy import Severity

if TYPE_CHECKING:
    from mtpverdict.formats.results_io import Results

__all__ = ["ArmEvidence", "FailingRule", "GateEvidence", "evidence_from"]


@dataclass(frozen=True, slots=True)
class FailingRule:
    """A rule an arm did not pass: its outcome and the rule's own words."""

    rule: str
    severity: str  # veto | warn
    status: str  # fail | inconclusive | missing
    detail: str


@dataclass(frozen=True, slots=True)
class ArmEvidence:
    """One arm: its spec and verdict, the rules it failed, and what it was served with."""

    name: str
    control: bool
    method: str | None
    k: int | None
    verdict: str
    failing: tuple[FailingRule, ...]
    serve_argv: tuple[str, ...] | None  # the campaign's serve_argv
    boot_argv: tuple[str, ...] | None  # the argv of the arm's first boot that recorded one
    engine_versions: tuple[str, ...]  # as the arm's boots recorded them
    boot_versions: tuple[str | None, ...] = ()  # per boot, in boot order (None: not recorded)
    boot_argvs: tuple[tuple[str, ...], ...] = ()  # every boot's argv, in boot order
    image: str | None = None  # the image the evidence names for the arm (label, or the scope's)
    family: str = "default"

    @property
    def label(self) -> str:
        if self.method is None and not self.k:
            return "off"
        return f"{self.method} k={'?' if self.k is None else self.k}"

    @property
    def argv(self) -> tuple[str, ...] | None:
        return self.boot_argv or self.serve_argv


@dataclass(frozen=True, slots=True)
class GateEvidence:
    """What the gate needs of a decision and its results: kind, selection, reasons, arms."""

    decision: str
    selected: str | None
    reasons: tuple[str, ...]
    arms: tuple[ArmEvidence, ...]
    engine_version: str | None  # the campaign scope's, used when no boot recorded one
    schedule: Schedule | None = None  # the decision's depth per batch-size range
    envelopes: tuple[ContextEnvelope, ...] = ()  # prompt-token envelopes of the promoted arms
    provisional: bool = False  # the decision rests on too few degrees of freedom to be firm
    accept_provisional: bool = False  # the policy's [gate] provisional = "accept"
    deployment: Deployment | None = None  # the compose service the arms were derived from, if any

    def arm(self, name: str | None) -> ArmEvidence | None:
        return next((a for a in self.arms if a.name == name), None)


def evidence_from(decision: Decision, results: Results, accept_provisional: bool = False) -> GateEvidence:
    """The adapter: GateEvidence from a decision and the results it was made on."""
    argvs: dict[str, list[tuple[str, ...]]] = {}
    versions: dict[str, list[str | None]] = {}
    boots = results.boots.sort_values(["arm", "boot"]) if len(results.boots) else results.boots
    columns = (boots["arm"], boots["argv"], boots["engine_version"], boots["status"])
    for name, argv, version, status in zip(*columns, strict=True):
        if isinstance(argv, list | tuple):
            argvs.setdefault(str(name), []).append(tuple(argv))
        ran = version if isinstance(version, str) else None
        if status == "ready" or ran is not None:  # a boot that never served and recorded nothing ran nothing
            versions.setdefault(str(name), []).append(ran)
    scope_image = results.campaign.scope.engine_version
    arms = []
    for arm in decision.arms:
        failing = tuple(
            FailingRule(r.rule, str(r.severity), str(r.status), r.detail)
            for r in sorted(arm.rules, key=lambda r: r.severity is not Severity.VETO)
            if not r.passed
        )
        measured = argvs.get(arm.name, [])
        campaign_arm = results.campaign.arm(arm.name)
        arms.append(
            ArmEvidence(
                name=arm.name,
                control=arm.is_control,
                method=None if arm.spec.method is None else str(arm.spec.method),
                k=arm.spec.k,
                verdict=str(arm.verdict),
                failing=failing,
                serve_argv=campaign_arm.serve_argv,
                boot_argv=measured[0] if measured else None,
                engine_versions=tuple(sorted({v for v in versions.get(arm.name, ()) if v is not None})),
                boot_versions=tuple(versions.get(arm.name, ())),
                boot_argvs=tuple(measured),
                image=campaign_arm.labels.get("image") or _image_text(scope_image),
                family=campaign_arm.family,
            )
        )
    return GateEvidence(
        decision=str(decision.decision),
        selected=decision.selected_arm,
        reasons=decision.reasons,
        arms=tuple(arms),
        engine_version=results.campaign.scope.engine_version,
        schedule=decision.schedule,
        envelopes=decision.envelopes,
        provisional=decision.provisional,
        accept_provisional=accept_provisional,
        deployment=results.campaign.deployment,
    )


def _image_text(text: str | None) -> str | None:
    """The campaign scope's engine_version when it names an image (vllm/vllm-openai:v0.32.0), not a
    version or a sentence."""
    if not text or any(c.isspace() for c in text):
        return None
    return text if "/" in text or ":" in text or "@" in text else None
