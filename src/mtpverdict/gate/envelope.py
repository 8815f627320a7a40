"""The context envelope: the prompts a serve config allows, against where the promotion holds."""

from __future__ import annotations

import re
from collections.abc import Sequence

from mtpverdict.engines import registry
from mtpverdict.gate.evidence import GateEvidence
from mtpverdict.gate.schedule import last_value
from mtpverdict.serveconfig import ServeConfig

__all__ = ["check_envelope", "context_limit"]

# every engine's context flags (engines/*.py `context_flags`): vLLM, SGLang, llama.cpp x2
CONTEXT_FLAGS = tuple(flag for parts in registry.ENGINES.values() for flag in parts.context_flags)
UNBOUNDED = ("-1", "auto", "0")  # vLLM's auto and llama.cpp's 0: the model's own (unknown) context
_LIMIT_CHARACTERS = 24  # a context limit longer than this is no number vLLM reads (float overflow)
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kmgtKMGT]?)")
_MULTIPLIER = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
}


def context_limit(argv: Sequence[str]) -> tuple[str, int | None] | None:
    """(flag, tokens) of the context a serve command allows (tokens None: the model's own, not bounded
    here); None when no flag sets it. Values as vLLM reads them: 32768, 32k (decimal) or 32K (binary)."""
    given = last_value(argv, CONTEXT_FLAGS)
    if given is None:
        return None
    flag, value = given[0], given[1].strip()
    found = _HUMAN.fullmatch(value) if len(value) <= _LIMIT_CHARACTERS else None
    if value in UNBOUNDED or found is None:
        return flag, None
    return flag, int(float(found.group(1)) * _MULTIPLIER[found.group(2)])


def check_envelope(
    evidence: GateEvidence, depths: Sequence[int | None], config: ServeConfig | None
) -> tuple[bool, list[str]]:
    """Whether the serve config keeps prompts inside the envelope of every proposed depth's arm."""
    ok, reasons = True, []
    for e in evidence.envelopes:
        arm = evidence.arm(e.arm)
        if e.fails_from is None or arm is None or arm.k not in depths:
            continue
        head = f"context envelope ({e.rule}): {e.detail}"
        if e.accepted:
            reasons.append(f"{head}; the policy accepts contexts beyond it")
            continue
        if config is None:
            reasons.append(f"{head}; no serve config, so the context a deployment allows is not checked")
            continue
        found = context_limit(config.argv)
        fix = (
            f"set it below {e.fails_from:,} tokens, or accept contexts beyond the envelope on purpose "
            '([gate] outside_envelope = "accept")'
        )
        if found is None or found[1] is None:
            what = (
                "sets no context limit" if found is None else f"leaves the context to the model ({found[0]})"
            )
            reasons.append(f"{head}; {config.source} {what}: {fix}")
            ok = False
        elif found[1] >= e.fails_from:
            reasons.append(f"{head}; {config.source} allows {found[1]:,} tokens ({found[0]}): {fix}")
            ok = False
        else:
            reasons.append(
                f"context within the envelope ({e.rule}): {found[0]} {found[1]:,} < {e.fails_from:,}"
            )
    return ok, reasons
