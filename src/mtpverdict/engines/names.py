"""The one name type of the serving engines mtpverdict reads, at the bottom layer for every format.

Each member of `Engine` is an engine's one registry line: mtpverdict.engines.registry loads the module
mtpverdict.engines.<value> of every member, and every list of engine names derives from the members.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal

__all__ = [
    "AUTO",
    "DEFAULT_ENGINE",
    "ENGINES",
    "ENGINE_CHOICES",
    "SCHEDULE_ENGINE",
    "ChoiceText",
    "Chosen",
    "Engine",
    "EngineChoice",
]


class Engine(StrEnum):
    """A serving engine; the value is how campaign files, results and the CLI spell it, and the name
    of its module in mtpverdict/engines/.

    The order of the members is the registry's (mtpverdict.engines.registry): where two engines'
    text scores alike, the first one wins.
    """

    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"


AUTO: Literal["auto"] = "auto"  # `parse --engine auto`: the reader chooses the engine from the text
# what a caller may pass as the engine of a text: a member, its value as text, or auto (checked where
# it is read: ENGINE_CHOICES holds every text a caller may pass)
ChoiceText = str
EngineChoice = Engine | ChoiceText
Chosen = Engine | Literal["auto"]  # an EngineChoice once checked
ENGINES: tuple[Engine, ...] = tuple(Engine)
ENGINE_CHOICES: tuple[str, ...] = (AUTO, *(e.value for e in ENGINES))  # auto, then ENGINES
DEFAULT_ENGINE: Final = Engine.VLLM  # a campaign's engine when its file names none
# whose serve setting a schedule of arms without a serve config is written in
SCHEDULE_ENGINE: Final = Engine.VLLM
