"""The one name type of the serving engines mtpverdict reads, at the bottom layer for every format."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

__all__ = ["AUTO", "ENGINES", "ENGINE_CHOICES", "Chosen", "Engine", "EngineChoice"]


class Engine(StrEnum):
    """A serving engine; the value is how campaign files, results and the CLI spell it.

    The order of the members is the registry's (mtpverdict.engines.registry): where two engines'
    text scores alike, the first one wins.
    """

    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"


AUTO: Literal["auto"] = "auto"  # `parse --engine auto`: the reader chooses the engine from the text
# what a caller may pass as the engine of a text: a member, its value as text, or auto
ChoiceText = Literal["auto", "vllm", "sglang", "llamacpp"]
EngineChoice = Engine | ChoiceText
Chosen = Engine | Literal["auto"]  # an EngineChoice once checked
ENGINES: tuple[Engine, ...] = tuple(Engine)
ENGINE_CHOICES: tuple[ChoiceText, ...] = ("auto", "vllm", "sglang", "llamacpp")  # auto, then ENGINES
