"""Frozen values the engine-text parsers return: acceptance readings, KV capacity, parse results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mtpverdict.engines.names import ENGINE_CHOICES, ENGINES, Engine, EngineChoice

__all__ = [
    "ENGINES",
    "ENGINE_CHOICES",
    "AcceptanceReading",
    "BlockRole",
    "Engine",
    "EngineChoice",
    "Found",
    "KvCapacity",
    "ParseResult",
    "ReadingKind",
    "ReadingScope",
    "ReadingSource",
    "VoidWindow",
]

ReadingSource = Literal["metrics", "log", "response"]
ReadingScope = Literal["run", "window"]
ReadingKind = Literal["counter_delta", "counter_total", "gauge", "log_window", "response"]
BlockRole = Literal["opens", "fills"]


@dataclass(frozen=True, slots=True)
class AcceptanceReading:
    """One acceptance figure as an engine surface shows it; None where the text does not say.

    ``source`` names the surface (``metrics``, ``log``, ``response``); ``scoped`` is ``run`` when the
    numbers cover exactly one request and ``window`` when they cover an engine-wide span; ``kind``
    says how the numbers were formed: a difference of two counter scrapes (``counter_delta``), a
    cumulative counter since boot (``counter_total``), a gauge of the latest interval that cannot be
    differenced (``gauge``), a periodic log window (``log_window``) or per-response fields
    (``response``). Rates are fractions; nothing is derived from other fields.
    """

    source: ReadingSource
    scoped: ReadingScope
    kind: ReadingKind
    drafts: int | None = None
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position_rate: tuple[float, ...] | None = None
    accepted_per_position: tuple[int, ...] | None = None
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "scoped": self.scoped,
            "kind": self.kind,
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted_tokens": self.accepted_tokens,
            "acceptance_rate": self.acceptance_rate,
            "mean_acceptance_length": self.mean_acceptance_length,
            "per_position_rate": None if self.per_position_rate is None else list(self.per_position_rate),
            "accepted_per_position": None
            if self.accepted_per_position is None
            else list(self.accepted_per_position),
            "line": self.line,
        }


@dataclass(frozen=True, slots=True)
class KvCapacity:
    """The KV cache pool as the engine reports it; a ceiling (pool / window), never a measurement.

    ``kv_cache_tokens`` is the whole pool in tokens; ``window_tokens`` the context one request may use
    (vLLM's max model length, llama.cpp's per-slot context); ``max_concurrency`` the engine's own
    ceiling (pool / window, vLLM); ``slots`` the requests llama.cpp serves at once (``--parallel``);
    ``memory_gib`` the pool's memory as printed (vLLM GiB; llama.cpp MiB / 1024).
    """

    kv_cache_tokens: int | None = None
    window_tokens: int | None = None
    max_concurrency: float | None = None
    num_blocks: int | None = None
    block_size: int | None = None
    slots: int | None = None
    memory_gib: float | None = None
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kv_cache_tokens": self.kv_cache_tokens,
            "window_tokens": self.window_tokens,
            "max_concurrency": self.max_concurrency,
            "num_blocks": self.num_blocks,
            "block_size": self.block_size,
            "slots": self.slots,
            "memory_gib": self.memory_gib,
            "line": self.line,
        }


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Everything read from one engine text: the engine, its version, readings and warnings."""

    engine: Engine | None
    engine_version: str | None
    acceptance: tuple[AcceptanceReading, ...]
    kv_capacity: tuple[KvCapacity, ...]
    warnings: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "engine_version": self.engine_version,
            "acceptance": [a.to_json() for a in self.acceptance],
            "kv_capacity": [k.to_json() for k in self.kv_capacity],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class VoidWindow:
    """A counter window that must not be used, and why (e.g. a counter went down: the server restarted)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Found:
    """One message a line parser recognised in a segment; the reader merges and deduplicates these."""

    start: int  # where the message begins in the segment; the text before it is the log prefix
    message: str
    acceptance: AcceptanceReading | None = None
    kv: KvCapacity | None = None
    version: str | None = None
    continues: bool = False  # completes the previous reading (a per-position or slot line printed apart)
    warnings: tuple[str, ...] = ()
    # A line of a multi-line block (the bench's spec block): "opens" starts a reading, "fills" sets
    # the fields it carries on the reading its block opened; ``position`` orders per-position lines.
    block: BlockRole | None = None
    position: int | None = None
    # True: KV lines from here on describe a context that is not the serving pool (a draft model, a
    # memory-fitting dry run, a sliding-window cache); False: the serving context is set up.
    side_context: bool | None = None
    cached_prompt_tokens: int | None = None  # a prefill line's prompt tokens served from the prefix cache
