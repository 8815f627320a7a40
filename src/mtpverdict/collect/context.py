"""What every boot of one collect shares: the plan, the writer, the redactor, progress and the summary."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtpverdict.collect import client as cl
from mtpverdict.collect import served as sv
from mtpverdict.collect.campaign import CampaignPlan
from mtpverdict.collect.progress import CollectSummary, Event
from mtpverdict.collect.redact import Redactor
from mtpverdict.collect.signals import deferred
from mtpverdict.engines import registry
from mtpverdict.engines.interface import COLLECT_PARTS, BootLog, Readiness, ServerFields
from mtpverdict.formats.results_io import ResultsWriter


@dataclass(slots=True)
class CollectContext:
    """One collect's shared state; every byte it writes or reports passes its redactor."""

    plan: CampaignPlan
    results: Path
    variables: dict[str, str]
    writer: ResultsWriter
    redactor: Redactor  # in every byte collect writes (collect/redact.py)
    headers: dict[str, str]
    report: Callable[[Event], None]
    clock: cl.Clock
    summary: CollectSummary = field(default_factory=CollectSummary)
    said: set[str] = field(default_factory=set)  # evidence the engine does not show, said once per collect

    def _part(self, name: str) -> object | None:
        """One part of the campaign's engine (None for an engine the registry does not know)."""
        engine = self.plan.server.engine
        return getattr(registry.get(engine), name) if engine in registry.ENGINES else None

    @property
    def readiness(self) -> Readiness | None:
        """What the engine's server is asked once /health answers, and how the answers are judged."""
        part = self._part("readiness")
        return part if isinstance(part, Readiness) else None

    @property
    def boot_log(self) -> BootLog | None:
        """What collect reads of a launched boot's log beyond its windows, and says when missing."""
        part = self._part("boot_log")
        return part if isinstance(part, BootLog) else None

    @property
    def server_fields(self) -> tuple[ServerFields, ...]:
        """The response objects each request's own fields are read from (collect/served.py)."""
        return sv.engine_fields(self.plan.server.engine)

    def say_absent(self) -> None:
        """Say once the reason of each part collect would use that the engine declares absent (and
        needs: vLLM needs no readiness probe, so nothing is missing)."""
        for reason in registry.missing_parts(self.plan.server.engine, COLLECT_PARTS):
            self.missing((f"absent: {reason}", reason), "", 0)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record, redacted; ValueError when the results format refuses it."""
        self.append_many([record])

    def append_many(self, records: list[dict[str, Any]]) -> None:
        """Append records together (one write, one fsync), redacted; ValueError when the results
        format refuses one of them, after the others are written (and counted)."""
        before = len(self.writer.records)
        try:
            with deferred():  # a signal waits: the write and its bookkeeping agree with the disk
                self.writer.append_many([self.redactor.value(r) for r in records])
        finally:
            self.summary.records += len(self.writer.records) - before

    def redact(self, text: str) -> str:
        return self.redactor.text(text)

    def event(self, event: Event) -> None:
        """Report progress to the caller, redacted: a note may quote a server's answer."""
        self.report(dataclasses.replace(event, detail=self.redact(event.detail)))

    def note(self, arm: str, boot: int, detail: str) -> None:
        self.event(Event("note", arm, boot, detail))

    def missing(self, note: tuple[str, str], arm: str, boot: int) -> None:
        """Say once per collect that the engine does not show a piece of evidence (never a failure)."""
        key, sentence = note
        if key not in self.said:
            self.said.add(key)
            self.note(arm, boot, f"missing evidence: {sentence}")
