"""What the gate is asked: --proposed parsed, and the proposal it makes with the serve config."""

from __future__ import annotations

from dataclasses import dataclass

from mtpverdict.engines import registry
from mtpverdict.engines.names import DEFAULT_ENGINE, Engine
from mtpverdict.engines.spec import CONFIG_FLAG
from mtpverdict.errors import InputError, Problem
from mtpverdict.serveconfig import FLAGS, ServeSpec, SpecRefusal, extract_spec, settings_differences

__all__ = ["Proposal", "ProposedSpec", "json_spec", "parse_spec", "resolve_proposal"]

_METHOD_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz_0123456789")  # METHOD in METHOD:k=N
_DEPTH_DIGITS = 4  # k=N up to 9999 (serveconfig.MAX_K is 1024)


@dataclass(frozen=True, slots=True)
class ProposedSpec:
    """What --proposed says: speculation off, or a depth with or without a method; `settings`, the
    whole speculative config when it is the engine's JSON."""

    method: str | None
    k: int | None
    text: str
    settings: ServeSpec | None = None

    @property
    def off(self) -> bool:
        return self.method is None and not self.k


def parse_spec(text: str, engine: Engine = DEFAULT_ENGINE) -> ProposedSpec:
    """`off`, `k=3`, `mtp:k=3` / `ngram:k=2`, or the JSON of `engine`'s speculative config (vLLM's
    --speculative-config; json_spec)."""
    raw = text.strip()
    if raw.lower() in ("off", "none", "disabled", "k=0"):
        return ProposedSpec(None, None, raw)
    if raw.startswith("{"):
        spec = json_spec(raw, engine)
        return ProposedSpec(spec.method, spec.k, raw, spec)
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


def json_spec(config: str, engine: Engine) -> ServeSpec:
    """`config` read as `engine`'s speculative config JSON: through the flag of its table that takes
    it, and its own reading (the engine's `flags` and `read_spec`); InputError for an engine whose
    table takes no JSON config, or a config it cannot read."""
    flag = FLAGS.get(CONFIG_FLAG)
    if flag is None or flag.engine != engine or flag.removed is not None:
        title = registry.title(engine)
        why = (
            f"{title} takes no speculative config as JSON: write off, k=N or METHOD:k=N, "
            "or give --serve-config"
        )
        raise InputError([Problem("--proposed", why)])
    spec = extract_spec([flag.canonical, config])
    if isinstance(spec, SpecRefusal):
        raise InputError([Problem("--proposed", spec.reasons[0])])
    return spec


@dataclass(frozen=True, slots=True)
class Proposal:
    """What the gate checks: method and depth (method None with a depth: any method), and the full
    speculative settings when a serve config (or the engine's config JSON) gives them."""

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
    given = proposed.settings if proposed is not None else None
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
