"""Engine-text parsers: spec-decode acceptance and KV capacity from vLLM, SGLang and llama.cpp output.

    parse_text(text, engine="auto")   -> ParseResult   logs, /metrics expositions, response JSON
    parse_file(path, engine="auto")   -> ParseResult   the same, streamed from a file
    parse_metrics(text)               -> MetricsSnapshot
    acceptance_delta(before, after)   -> AcceptanceReading | VoidWindow | None
    observed_k(snapshot)              -> int | None

``mtpverdict.parse.llamacpp_server`` holds what driving llama.cpp's server needs (endpoints,
readiness, depth in force, KV window and slots, per-request acceptance). Each engine's line and
response parsers are named by its module in ``mtpverdict.engines`` (SGLang's live there).

Readings carry only what the text shows: rates are fractions, absent values are None, nothing is
derived. Content problems become warnings; only a malformed exposition given to ``parse_metrics``
(or an unreadable file) raises ``EngineTextError``.
"""

from mtpverdict.parse.metrics import MetricsSnapshot, acceptance_delta, observed_k, parse_metrics
from mtpverdict.parse.model import (
    ENGINE_CHOICES,
    ENGINES,
    AcceptanceReading,
    Engine,
    EngineChoice,
    KvCapacity,
    ParseResult,
    VoidWindow,
)
from mtpverdict.parse.reader import parse_file, parse_text

__all__ = [
    "ENGINES",
    "ENGINE_CHOICES",
    "AcceptanceReading",
    "Engine",
    "EngineChoice",
    "KvCapacity",
    "MetricsSnapshot",
    "ParseResult",
    "VoidWindow",
    "acceptance_delta",
    "observed_k",
    "parse_file",
    "parse_metrics",
    "parse_text",
]
