"""The speculative configuration a serve command asks for, as every engine module reads it.

Each engine's `read_spec` turns the speculative flags found on an argv (`FoundFlag`, scanned by
mtpverdict.serveconfig against the engines' flag tables) into a ServeSpec, or a SpecRefusal with the
reasons it cannot be read without guessing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from mtpverdict.engines.names import Engine

__all__ = [
    "CONFIG_FLAG",
    "DEPTH_KEY",
    "DEPTH_KEYS",
    "MAX_K",
    "NO_SCHEDULE",
    "SCHEDULE_KEY",
    "DepthRange",
    "Flag",
    "FlagGroup",
    "FoundFlag",
    "ServeSpec",
    "SpecRefusal",
    "canonical",
    "config_argv",
    "depth_free",
    "int_or_text",
    "is_depth",
    "is_int",
    "single_values",
]

MAX_K = 1024  # largest depth accepted; llama.cpp bounds its ngram draft lengths to 1024 (common/arg.cpp)
NO_SCHEDULE = "only vLLM 0.32 runs a per-batch-size schedule"  # engines without compile_schedule
# vLLM's speculative config, the one engine setting that runs a per-batch-size schedule: the flag that
# takes it as JSON, its depth key and its schedule key (vllm/config/speculative.py)
CONFIG_FLAG = "--speculative-config"
DEPTH_KEY = "num_speculative_tokens"
SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
DEPTH_KEYS = (DEPTH_KEY, SCHEDULE_KEY)  # what a schedule varies; every other setting it shares
_DECIMAL = re.compile(r"[0-9]{1,9}")  # an integer argv value


@dataclass(frozen=True, slots=True)
class DepthRange:
    """One entry of vLLM's num_speculative_tokens_per_batch_size: batch sizes first..last draft k."""

    first_batch: int
    last_batch: int  # inclusive, as vLLM reads it
    k: int


@dataclass(frozen=True, slots=True)
class ServeSpec:
    """The speculation a serve config asks for: off (method None), or a method at depth k.

    `method` is one of the results format's methods (mtp, ngram, eagle, eagle3, draft_model, medusa,
    suffix, other). `settings` is canonical JSON of every speculative setting as the engine reads it
    (vLLM: the speculative config object; SGLang and llama.cpp: flag -> value), compared whole against
    the evidence. `schedule` is vLLM's per-batch-size depth schedule, when given (k is then its maximum).
    """

    engine: Engine | None
    method: str | None
    k: int | None
    settings: str = "{}"
    schedule: tuple[DepthRange, ...] = ()

    @property
    def off(self) -> bool:
        return self.method is None

    def settings_dict(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.settings)
        return loaded

    def label(self) -> str:
        if self.off:
            return "off"
        return f"{self.method} k={self.k}" + (" (per-batch-size schedule)" if self.schedule else "")


@dataclass(frozen=True, slots=True)
class SpecRefusal:
    """Why the speculative configuration cannot be read without guessing (one reason per line)."""

    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FlagGroup:
    """Lines of flags in an engine's table: each line a flag and its aliases (the first canonical)."""

    text: str
    values: int = 1  # how many argv tokens each flag takes
    removed: str | None = None  # why the engine no longer accepts them


@dataclass(frozen=True, slots=True)
class Flag:
    """One spelling of a speculative flag: the engine, its canonical name and its value count."""

    engine: Engine
    canonical: str
    values: int = 1  # how many argv tokens the flag takes
    removed: str | None = None  # why the engine no longer accepts it


@dataclass(frozen=True, slots=True)
class FoundFlag:
    """A speculative flag as an argv gives it."""

    flag: str  # canonical name (vLLM dotted keys keep their path)
    value: str | None
    given: str  # as written
    engine: Engine


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_depth(value: object) -> TypeGuard[int]:
    return is_int(value) and 1 <= value <= MAX_K


def int_or_text(text: str) -> int | str:
    """An argv value as an integer when it is one (plain decimal digits), else the text."""
    return int(text) if _DECIMAL.fullmatch(text.strip()) else text


def canonical(settings: Mapping[str, Any]) -> str:
    """Settings as canonical JSON (sorted keys, no spaces), compared whole against the evidence."""
    return json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def depth_free(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A speculative config without its DEPTH_KEYS: what the depths of one schedule share."""
    return {key: value for key, value in settings.items() if key not in DEPTH_KEYS}


def config_argv(config: str) -> list[str]:
    """The argv that serves `config`, vLLM's speculative config JSON, as the engines' flag tables read it."""
    return [CONFIG_FLAG, config]


def single_values(
    found: list[FoundFlag], repeatable: tuple[str, ...] = ()
) -> tuple[dict[str, str | None], list[str]]:
    """flag -> value, and a reason for each flag given twice that the engine keeps only once."""
    values: dict[str, str | None] = {}
    reasons: list[str] = []
    for f in found:
        if f.flag in values and f.flag not in repeatable:
            reasons.append(f"{f.given} is given more than once; the engine keeps only the last")
        values[f.flag] = f.value
    return values, reasons
