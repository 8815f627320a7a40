"""What a collect run reports as it goes and returns at the end: progress events, the summary, the outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from mtpverdict.collect.signals import Terminated


@dataclass(frozen=True, slots=True)
class Event:
    """Progress reported to the caller (the CLI renders it; the library never prints)."""

    kind: str  # plan | boot | ready | run | arm_done | note
    arm: str = ""
    boot: int = 0
    detail: str = ""
    done: int = 0
    total: int = 0


class CollectOutcome(StrEnum):
    """How a collect run ended; the CLI gives each its exit code (README, Exit codes)."""

    COMPLETE = "complete"  # every boot it ran became ready and ran to the end
    BOOTS_FAILED = "boots_failed"  # it ran to the end, but a boot failed or was refused
    INTERRUPTED = "interrupted"  # stopped (Ctrl-C) before the end; --resume continues
    TERMINATED = "terminated"  # stopped by SIGTERM (a CI cancellation, systemd) before the end; --resume


@dataclass(slots=True)
class CollectSummary:
    """What a collect run did."""

    boots: int = 0
    failed_boots: int = 0
    requests: int = 0
    request_errors: int = 0
    records: int = 0
    interrupted: bool = False
    signal: int | None = None  # the signal that interrupted it (SIGINT or SIGTERM)
    stopped_early: bool = False
    skipped_boots: int = 0
    per_arm: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "arm boot N: why", one per failed boot

    @property
    def outcome(self) -> CollectOutcome:
        if self.interrupted:
            return (
                CollectOutcome.TERMINATED if self.signal == Terminated.signum else CollectOutcome.INTERRUPTED
            )
        return CollectOutcome.BOOTS_FAILED if self.failed_boots else CollectOutcome.COMPLETE
