"""What the gate is asked: --proposed parsed, and the proposal it makes with the serve config."""

from __future__ import annotations

from dataclasses import dataclass

from mtpverdict.engines.spec import config_argv
from mtpverdict.errors import InputError, Problem
from mtpverdict.serveconfig import ServeSpec, SpecRefusal, extract_spec, settings_differences

__all__ = ["Proposal", "ProposedSpec", "parse_spec", "resolve_proposal"]

_METHOD_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz_0123456789")  # METHOD in METHOD:k=N
_DEPTH_DIGITS = 4  # k=N up to 9999 (serveconfig.MAX_K is 1024)


@dataclass(frozen=True, slots=True)
class ProposedSpec:
    """What --proposed says: speculation off, or a depth with or without a method."""

    method: str | None
    k: int | None
    text: str

    @property
    def off(self) -> bool:
        return self.method is None and not self.k


def parse_spec(text: str) -> ProposedSpec:
    """`off`, `k=3`, `mtp:k=3` / `ngram:k=2`, or the JSON given to --speculative-config."""
    raw = text.strip()
    if raw.lower() in ("off", "none", "disabled", "k=0"):
        return ProposedSpec(None, None, raw)
    if raw.startswith("{"):
        spec = extract_spec(config_argv(raw))
        if isinstance(spec, SpecRefusal):
            raise InputError([Problem("--proposed", spec.reasons[0])])
        return ProposedSpec(spec.method, spec.k, raw)
    method, colon, rest = raw.partition(":") if ":" in raw else ("", "", raw)
    depth = rest.removeprefix("k=")
    if (
        depth == rest
        or not (depth.isascii() and depth.isdigit() and len(depth) <= _DEPTH_DIGITS)
        or (colon and not (method and set(method) <= _METHOD_CHARACTERS))
    ):
        raise InputError(
            [Problem("--proposed", f"{raw!r:.80}: write off, k=N, METHOD:k=N or the speculative config JSON")]
        )
    if method and int(depth) == 0:
        raise InputError(
            [Problem("--proposed", f"{raw!r}: a method needs k >= 1; write off for no speculation")]
        )
    return ProposedSpec(method or None, int(depth), raw)


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the gate checks: method and depth (method None with a depth: any method), and the full
    speculative settings when a serve config (or vLLM's config JSON) gives them."""

    method: str | None
    k: int | None
    label: str
    serve: ServeSpec | None = None

    @property
    def off(self) -> bool:
        return self.method is None and self.k is None


def resolve_proposal(
    proposed: ProposedSpec | None, serve: ServeSpec | SpecRefusal | None, source: str
) -> Proposal | list[str]:
    """The proposal from --proposed and the serve config, or the reasons it is refused."""
    if isinstance(serve, SpecRefusal):
        return [f"the speculative config of {source} cannot be read: {r}" for r in serve.reasons]
    given = None
    if proposed is not None and proposed.text.startswith("{"):
        found = extract_spec(config_argv(proposed.text))
        given = found if isinstance(found, ServeSpec) else None
    if serve is None:
        assert proposed is not None  # gate() refuses a call with neither
        return Proposal(proposed.method, proposed.k, proposed.text, given)
    if proposed is None:
        return Proposal(serve.method, serve.k, serve.label(), serve)
    disagree = (
        proposed.off != serve.off
        or (not serve.off and proposed.k != serve.k)
        or (proposed.method is not None and proposed.method != serve.method)
    )
    differences = settings_differences(given, serve) if given and serve.engine == given.engine else []
    if disagree or differences:
        return [
            f"--proposed {proposed.text} but {source} asks for {serve.label()}"
            + (f" ({'; '.join(differences)})" if differences else "")
            + ": the gate checks what will be deployed"
        ]
    return Proposal(serve.method, serve.k, proposed.text, serve)
