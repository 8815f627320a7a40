"""The registry of engines: every Engine member's module, in the order the reader breaks ties between them.

A new engine is one module mtpverdict/engines/<name>.py exposing ENGINE (an interface.EngineParts) plus
its one line, the member `NAME = "<name>"` of mtpverdict.engines.names.Engine; this module loads
mtpverdict.engines.<name> for every member. tests/engines/test_registry.py fails for an engine missing a
part, a docs row or its recorded samples.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence

from mtpverdict.engines.interface import Absent, EngineParts, ScheduleCompiler, present
from mtpverdict.engines.names import Engine
from mtpverdict.engines.spec import NO_SCHEDULE

__all__ = ["ENGINES", "get", "has", "load", "missing_parts", "present", "schedule_compiler", "title"]


def load(engine: Engine) -> EngineParts:
    """The ENGINE of an engine's own module, mtpverdict.engines.<name>; TypeError for a module whose
    ENGINE is not one engine's parts."""
    module = importlib.import_module(f"{__package__}.{engine.value}")
    parts = getattr(module, "ENGINE", None)
    if not isinstance(parts, EngineParts):
        raise TypeError(f"{module.__name__}.ENGINE is not an EngineParts (mtpverdict.engines.interface)")
    return parts


ENGINES: Mapping[Engine, EngineParts] = {engine: load(engine) for engine in Engine}


def get(engine: str) -> EngineParts:
    """The parts of an engine by its name (an Engine or its text); ValueError for another name."""
    return ENGINES[Engine(engine)]


def has(engine: str | None, part: str) -> bool:
    """Whether a named engine provides a part (False for no engine or an unknown name)."""
    if engine is None or engine not in ENGINES:
        return False
    return not isinstance(getattr(get(engine), part), Absent)


def missing_parts(engine: str | None, parts: Sequence[str]) -> tuple[str, ...]:
    """The reasons, each once and in order, of the named parts a known engine declares absent and
    needs (what a caller that would use them says); none for an engine the registry does not know."""
    if engine is None or engine not in ENGINES:
        return ()
    found = (getattr(get(engine), part) for part in parts)
    reasons = (part.reason for part in found if isinstance(part, Absent) and part.needed)
    return tuple(dict.fromkeys(reasons))


def title(engine: str) -> str:
    """How prose names an engine: vLLM, SGLang, llama.cpp."""
    return get(engine).title


def schedule_compiler(engine: str | None) -> ScheduleCompiler | Absent:
    """How an engine's serve setting runs a per-batch-size schedule, or why it has none."""
    return get(engine).compile_schedule if engine is not None else Absent(NO_SCHEDULE)
