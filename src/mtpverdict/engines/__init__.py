"""Serving engines as plug-ins: the Engine name, the interface each engine implements, the registry.

Importing the package loads nothing but the name type; `mtpverdict.engines.registry` loads every
engine module.
"""

from mtpverdict.engines.names import ENGINE_CHOICES, ENGINES, Engine, EngineChoice

__all__ = ["ENGINES", "ENGINE_CHOICES", "Engine", "EngineChoice"]
