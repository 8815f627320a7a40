"""The boot record as collect builds it: one typed value per boot, turned into its JSON by one function.

A boot's record is built when the boot is planned and replaced field by field as the boot learns
(`dataclasses.replace`, which mypy checks); `as_json` is the only place it becomes the dictionary
records.jsonl and the start files hold, so every boot record collect writes has the same fields:
the fifteen it always carries (null when unknown), then `slots`, `device`/`node`, `note` and what ran
before a launched boot (`container`, `before_boot`, `memory_check`, `host_state`) only
when known. formats.results.BootRecord validates it when it is appended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from msgspec import UNSET, UnsetType

from mtpverdict.collect.campaign import DevicePlan

BootStatus = Literal["ready", "failed", "interrupted"]
INTERRUPTED: BootStatus = "interrupted"  # the status of a boot collect stopped before it finished
INTERRUPTED_NOTE = "interrupted: collect stopped before this boot finished; its runs are kept"
DISCIPLINE_KEYS = ("container", "before_boot", "memory_check", "host_state")
UNREADABLE_NOTE = (
    "interrupted: collect stopped while writing this boot's start file, which is unreadable; "
    "what was known of the boot is lost, its runs are kept"
)


@dataclass(frozen=True, slots=True)
class RecordedBoot:
    """One boot's record: where it sits in the campaign, what became of it, what the server showed."""

    arm: str
    boot: int
    order: int
    status: BootStatus
    ready_seconds: float | None = None
    kv_cache_tokens: int | None = None
    block_size: int | None = None
    num_blocks: int | None = None
    max_model_len: int | None = None
    engine_version: str | None = None
    argv: tuple[str, ...] | None = None
    error: str | None = None
    observed_k: int | None = None
    log: str | None = None
    slots: int | None | UnsetType = UNSET  # written only once known (a start file may say null)
    device: str | None = None  # None: a campaign without [[devices]] (no device or node key)
    node: str | None = None
    note: str | None = None
    # what ran before a launched boot (collect/discipline.py), as JSON values; each written only when it ran
    container: Mapping[str, Any] | None = None
    before_boot: Sequence[Mapping[str, Any]] | None = None
    memory_check: Mapping[str, Any] | None = None
    host_state: Mapping[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def as_json(self) -> dict[str, Any]:
        """The record as records.jsonl and a start file hold it."""
        record: dict[str, Any] = {
            "kind": "boot",
            "arm": self.arm,
            "boot": self.boot,
            "order": self.order,
            "status": self.status,
            "ready_seconds": self.ready_seconds,
            "kv_cache_tokens": self.kv_cache_tokens,
            "block_size": self.block_size,
            "num_blocks": self.num_blocks,
            "max_model_len": self.max_model_len,
            "engine_version": self.engine_version,
            "argv": None if self.argv is None else list(self.argv),
            "error": self.error,
            "observed_k": self.observed_k,
            "log": self.log,
        }
        if self.note is not None:
            record["note"] = self.note
        if self.device is not None:
            record |= {"device": self.device, "node": self.node}
        if not isinstance(self.slots, UnsetType):
            record["slots"] = self.slots
        for key in DISCIPLINE_KEYS:
            if (value := getattr(self, key)) is not None:
                record[key] = value
        return record


def new_boot(
    arm: str,
    boot: int,
    order: int,
    status: BootStatus,
    *,
    argv: list[str] | None = None,
    log: str | None = None,
    note: str | None = None,
    device: DevicePlan | None = None,
) -> RecordedBoot:
    """A boot record with nothing measured yet (the boot fills it in as it learns)."""
    return RecordedBoot(
        arm,
        boot,
        order,
        status,
        argv=None if argv is None else tuple(argv),
        log=log,
        note=note,
        device=None if device is None else device.name,
        node=None if device is None else device.node,
    )
