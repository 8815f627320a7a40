"""(3) Freshness: the serve config runs what the evidence measured: the same image and engine build
on every boot the decision relies on, and the same serve arguments but for the speculative flags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mtpverdict.engines import registry
from mtpverdict.engines.names import Engine
from mtpverdict.gate.evidence import ArmEvidence, GateEvidence
from mtpverdict.servecommand import Command, split_command
from mtpverdict.serveconfig import (
    FLAGS,
    ServeConfig,
    is_engine_variable,
    is_speculative_flag,
    is_speculative_variable,
    normalise_flag,
)

__all__ = [
    "LISTEN_FLAGS",
    "ImageRef",
    "argv_differences",
    "check_fresh",
    "image_version",
    "normalise_argv",
    "parse_image",
    "short_flags",
]

# Flags allowed to differ between the evidence and the proposal besides the speculative ones: where
# the server listens, which cannot change what it computes, as long as both sides are plain literals.
LISTEN_FLAGS = ("--host", "--port")
_HOST_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:-[]")
_VERSION_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+-")
_DOCKER_HUB = ("docker.io/library/", "index.docker.io/library/", "docker.io/", "index.docker.io/")


def _command(argv: Sequence[str]) -> Command:
    """A recorded or proposed command split leniently (a program the gate models opens it, or none)."""
    found = split_command(argv)
    return found if isinstance(found, Command) else Command((), tuple(argv), None)


def short_flags(argv: Sequence[str], image: str | None = None) -> Mapping[str, str]:
    """The short flags of the engine a command line runs: vLLM's when its serving program is vLLM (a
    `vllm` executable or a `vllm.` module), or when it names no program and its image is vLLM's; none
    otherwise (llama.cpp's -n is not --nnodes)."""
    command = _command(argv)
    engine: Engine | None
    if command.program:
        engine = command.engine
    else:
        found = parse_image(image) if image else None
        name = found.repository.rsplit("/", 1)[-1].lower() if found is not None else ""
        named = (
            e for e, parts in registry.ENGINES.items() if name and any(w in name for w in parts.image_words)
        )
        engine = next(named, None)
    return (registry.present(registry.get(engine).short_flags) or {}) if engine is not None else {}


def normalise_argv(
    argv: Sequence[str], short: Mapping[str, str] | None = None
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Flags (names with _ as -, values in order) and the positionals of a serve command line.

    The program part (servecommand.split_command) is skipped; a positional where the settings start
    is the model (`vllm serve MODEL`, or a command for an image whose entrypoint is `vllm serve`) and
    is compared as --model. A short flag is named by its long name when `short` (the engine's,
    short_flags) has it, and is a setting of its own otherwise.
    """
    short = short_flags(argv) if short is None else short
    settings = list(_command(argv).settings)
    flags: dict[str, list[str]] = {}
    positionals: list[str] = []
    i = 0
    if settings and not settings[0].startswith("-"):
        flags.setdefault("--model", []).append(settings[0])
        i = 1
    while i < len(settings):
        token = settings[i]
        if token.startswith("-"):
            name, eq, value = token.partition("=")
            name = normalise_flag(short.get(name, name))
            spec = FLAGS.get(name)
            if spec is not None and spec.values == 0 and not eq:
                flags.setdefault(name, []).append("")  # a speculative switch takes no value
                i += 1
            elif eq:
                flags.setdefault(name, []).append(value)
                i += 1
            elif i + 1 < len(settings) and not settings[i + 1].startswith("--"):
                flags.setdefault(name, []).append(settings[i + 1])
                i += 2
            else:
                flags.setdefault(name, []).append("")
                i += 1
        else:
            positionals.append(token)
            i += 1
    return {k: tuple(v) for k, v in flags.items()}, positionals


def _plain_listen(name: str, values: Sequence[str] | None) -> bool:
    """A listen address or port written as a literal (8000, 0.0.0.0, ::, localhost)."""
    if values is None:
        return True
    if name == "--port":
        return all(v.isdigit() and len(v) <= 5 for v in values)
    return all(v and set(v) <= _HOST_CHARACTERS for v in values)


def argv_differences(
    evidence: Sequence[str], proposed: Sequence[str], ignore: tuple[str, ...] = (), image: str | None = None
) -> list[str]:
    """Arguments that differ, excluding the speculative flags, a literal listen address and `ignore`
    (`image`: the proposed config's, naming its engine when its command names no program)."""
    skip = {normalise_flag(f) for f in ignore}
    short = short_flags(proposed, image) or short_flags(evidence)  # one engine: one reading of both
    ev, ev_pos = normalise_argv(evidence, short)
    pr, pr_pos = normalise_argv(proposed, short)
    out = []
    for name in sorted((set(ev) | set(pr)) - skip):
        if is_speculative_flag(name) or ev.get(name) == pr.get(name):
            continue
        if name in LISTEN_FLAGS and _plain_listen(name, ev.get(name)) and _plain_listen(name, pr.get(name)):
            continue
        before = " ".join(ev[name]) if name in ev else "(absent)"
        after = " ".join(pr[name]) if name in pr else "(absent)"
        out.append(f"{name}: evidence {before or '(set)'} vs proposed {after or '(set)'}")
    if ev_pos != pr_pos:
        out.append(f"positional arguments: evidence {ev_pos} vs proposed {pr_pos}")
    return out


# --------------------------------------------------------------------------------------------------
# images and engine builds


@dataclass(frozen=True, slots=True)
class ImageRef:
    """An image reference: its repository (Docker Hub's prefixes dropped), tag and digest."""

    repository: str
    tag: str | None
    digest: str | None

    def __str__(self) -> str:
        return (
            self.repository
            + (f":{self.tag}" if self.tag else "")
            + (f"@{self.digest}" if self.digest else "")
        )


def parse_image(text: str | None) -> ImageRef | None:
    """vllm/vllm-openai:v0.32.0, registry:5000/x/y:tag@sha256:...; None for text that is no image
    reference (a version, a sentence)."""
    if not text or any(c.isspace() for c in text):
        return None
    name, _, digest = text.partition("@")
    head, slash, last = name.rpartition("/")
    repository, colon, tag = last.partition(":")
    repository = head + slash + repository
    if not repository or (colon and not tag):
        return None
    repository = next(
        (repository.removeprefix(p) for p in _DOCKER_HUB if repository.startswith(p)), repository
    )
    if repository.startswith("library/") and repository.count("/") == 1:
        repository = repository.removeprefix("library/")
    return ImageRef(repository, tag or None, digest or None)


def image_version(image: str | None) -> str | None:
    """The version in an image tag (vllm/vllm-openai:v0.32.0 -> 0.32.0), if it has one: digits, a dot,
    digits, then letters, digits and . + - (a build such as 0.32.0+cpu or 0.32.0rc1)."""
    found = parse_image(image) if image else None
    tag = None if found is None or found.digest else found.tag
    if tag is None:
        return None
    version = tag.removeprefix("v")
    major, dot, rest = version.partition(".")
    if not (major.isdigit() and dot and rest[:1].isdigit() and set(version) <= _VERSION_CHARACTERS):
        return None
    return None if version[-1] in ".+-" or ".." in version else version


def _same_version(image: str, recorded: str) -> bool:
    """Equal versions, or one is the other with a local build suffix (0.32.0 and 0.32.0+cpu)."""
    recorded = recorded.removeprefix("v")
    return image == recorded or recorded.startswith(image + "+") or image.startswith(recorded + "+")


def _relied_on(arm: ArmEvidence, evidence: GateEvidence) -> list[ArmEvidence]:
    """The arms a verdict on `arm` rests on: it and the controls of its family."""
    controls = [a for a in evidence.arms if a.control and a.family == arm.family and a is not arm]
    return [arm, *controls]


def _image_reasons(arm: ArmEvidence, evidence: GateEvidence, image: str) -> list[str]:
    """Why the proposed image is not the build the evidence ran: its repository and tag (or digest)
    against the evidence's image, and every boot's engine version against the tag's."""
    proposed = parse_image(image)
    if proposed is None:
        return [f"image {image!r} is not an image reference the gate can read"]
    recorded = parse_image(arm.image)
    if recorded is None:
        return [
            f"the evidence records no image for {arm.name}: image {image} cannot be compared with it "
            "(record the image in the campaign's scope engine_version, or an arm label image)"
        ]
    if proposed.repository != recorded.repository:
        return [
            "stale evidence, image repository: "
            f"evidence {recorded.repository} vs proposed {proposed.repository}"
        ]
    if not proposed.digest and image_version(image) is None:
        return [
            f"image {image} names no engine version (a floating tag): pin the version tag the evidence "
            f"names ({recorded})"
        ]
    if (recorded.digest or proposed.digest) and proposed.digest != recorded.digest:
        return [f"stale evidence, image digest: evidence {recorded} vs proposed {image}"]
    if proposed.tag != recorded.tag and not (proposed.digest and proposed.digest == recorded.digest):
        return [f"stale evidence, image tag: evidence {recorded} vs proposed {image}"]
    version = image_version(str(recorded)) if proposed.digest else image_version(image)
    if version is None:
        return [
            f"image {image} names no engine version (a floating tag or a digest): pin a version tag so "
            "the gate can compare it with the engine version every boot recorded"
        ]
    return _boot_versions(arm, evidence, version, image)


def _boot_versions(arm: ArmEvidence, evidence: GateEvidence, version: str, image: str) -> list[str]:
    out = []
    for one in _relied_on(arm, evidence):
        if not one.boot_versions:
            out.append(f"the evidence records no boots for {one.name}: the engine version it ran is unknown")
        for boot, ran in enumerate(one.boot_versions, 1):
            if ran is None:
                out.append(
                    f"boot {boot} of {one.name} recorded no engine version: image {image} cannot be checked"
                )
            elif not _same_version(version, ran):
                out.append(
                    f"stale evidence, engine version: boot {boot} of {one.name} ran {ran} "
                    f"vs proposed image {image}"
                )
    return out


def _environment_reasons(config: ServeConfig, ignore: tuple[str, ...]) -> list[str]:
    """Engine settings passed through the environment: the evidence records none for its boots."""
    out = []
    for name, value in config.env_values:
        if not is_engine_variable(name) or is_speculative_variable(name) or name in ignore:
            continue
        shown = "(from the deploying host)" if value is None else value
        out.append(
            f"stale evidence, environment {name}: the evidence records no environment vs proposed "
            f"{shown:.80}; pass it as a flag, or --ignore-arg {name} on purpose"
        )
    return out


def _entrypoint_reasons(recorded: Sequence[str], config: ServeConfig) -> list[str]:
    """A service without entrypoint runs the image's, which the evidence must have run too."""
    ran = _command(recorded)
    if config.names_program is not False or not ran.program:
        return []
    return [
        f"stale evidence, program: the evidence ran {' '.join(ran.program)}, but {config.source} sets no "
        "entrypoint, so the image's default entrypoint runs, which the evidence did not record: set "
        "entrypoint: to the program"
    ]


def check_fresh(
    arm: ArmEvidence | None, evidence: GateEvidence, config: ServeConfig, ignore: tuple[str, ...] = ()
) -> list[str]:
    """Reasons the evidence is stale for this serve config (empty when it is fresh)."""
    if arm is None:
        return []
    recorded = arm.boot_argvs or ((arm.argv,) if arm.argv is not None else ())
    if not recorded:
        return [f"the evidence records no serve argv for {arm.name}: freshness cannot be checked"]
    found: list[str] = []
    for argv in dict.fromkeys(recorded):
        found += [d for d in argv_differences(argv, config.argv, ignore, config.image) if d not in found]
    reasons = [f"stale evidence, {d}" for d in found]
    reasons += _entrypoint_reasons(recorded[0], config) + _environment_reasons(config, ignore)
    if config.unpinned is not None:
        reasons.append(
            f"{config.unpinned}: the engine version it runs is unknown; serve a pinned image tag so the "
            "gate can compare it with the evidence"
        )
    if config.image is not None:
        reasons += _image_reasons(arm, evidence, config.image)
    return reasons
