"""Typed, frozen values for a loaded results directory: the campaign and its record tables."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class Spec:
    """What speculation an arm runs; method None means speculation off; k None means not recorded."""

    method: str | None
    k: int | None
    config: str | None = None  # the engine's config as canonical JSON text, when given

    @property
    def off(self) -> bool:
        return self.method is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "k": self.k,
            "config": None if self.config is None else json.loads(self.config),
        }

    def label(self) -> str:
        if self.off:
            return "off"
        return f"{self.method} k={'?' if self.k is None else self.k}"


@dataclass(frozen=True, slots=True)
class Arm:
    """One server configuration of the campaign."""

    name: str
    role: str  # control | candidate
    spec: Spec
    order: int
    serve_argv: tuple[str, ...] | None
    family: str = "default"
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def is_control(self) -> bool:
        return self.role == "control"


@dataclass(frozen=True, slots=True)
class Workload:
    """One prompt shape of the campaign."""

    id: str
    prompt_tokens: int | None
    max_tokens: int | None
    expect_identical: bool
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Scope:
    """Where the evidence comes from and what it may be used to claim."""

    device: str | None
    engine: str | None
    engine_version: str | None
    model: str | None
    claim: str | None


@dataclass(frozen=True, slots=True)
class Campaign:
    """campaign.json, validated."""

    id: str
    title: str
    scope: Scope
    arms: tuple[Arm, ...]
    workloads: tuple[Workload, ...]
    window_tokens: int | None
    notes: str | None = None
    synthetic: bool = False
    source: str | None = None
    sequential_looks: int = 1  # interim decisions planned (adaptive campaigns); alpha is split over them

    def arm(self, name: str) -> Arm:
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(name)

    def workload(self, workload_id: str) -> Workload:
        for workload in self.workloads:
            if workload.id == workload_id:
                return workload
        raise KeyError(workload_id)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted({arm.family for arm in self.arms}))

    def controls(self, family: str) -> tuple[Arm, ...]:
        return tuple(a for a in self.arms if a.family == family and a.is_control)

    def candidates(self, family: str | None = None) -> tuple[Arm, ...]:
        return tuple(a for a in self.arms if not a.is_control and (family is None or a.family == family))


@dataclass(frozen=True, slots=True)
class Results:
    """A loaded results directory: the campaign, one table per record kind, and input hashes.

    Tables are sorted by their key columns, so the order of lines in records.jsonl never matters.
    """

    path: str
    campaign: Campaign
    requests: pd.DataFrame
    acceptance: pd.DataFrame
    boots: pd.DataFrame
    coherence: pd.DataFrame
    likelihood: pd.DataFrame
    summaries: pd.DataFrame
    campaign_sha256: str
    records_sha256: str
    warnings: tuple[str, ...] = field(default=())

    def counts(self) -> dict[str, dict[str, int]]:
        """Records per kind and arm, for `validate`."""
        out: dict[str, dict[str, int]] = {}
        for kind, table in (
            ("request", self.requests),
            ("acceptance", self.acceptance),
            ("boot", self.boots),
            ("coherence", self.coherence),
            ("likelihood", self.likelihood),
            ("summary", self.summaries),
        ):
            per_arm = table.groupby("arm").size().to_dict() if len(table) else {}
            out[kind] = {str(k): int(v) for k, v in sorted(per_arm.items())}
        return out
