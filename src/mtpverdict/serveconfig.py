"""Serve configs read safely, and the speculative configuration each one asks its engine for.

A serve config is what a deployment runs: a docker compose file (one or several services, `command:`
and `entrypoint:` in list or string form), a JSON argv list, or one shell command line. Reading one
refuses anything that is not a regular file of at most MAX_BYTES, YAML anchors and aliases (an alias
bomb never expands), merge keys, duplicate keys and nesting deeper than MAX_DEPTH, each as a one-line
InputError naming the file and key.

extract_spec reads the speculative flags of vLLM (0.32), SGLang and llama.cpp into a ServeSpec, or a
SpecRefusal with the reasons it cannot: an unknown, removed, abbreviated, repeated or contradictory
speculative flag, a depth left to the engine's default, flags of two engines. It never guesses.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeGuard

from mtpverdict._shell import comment_start, interpolation, shell_metacharacter, shell_split
from mtpverdict.errors import InputError, Problem
from mtpverdict.formats._check import INT_RANGE_MESSAGE

__all__ = [
    "ENGINE_VARIABLE_PREFIXES",
    "MODEL_SOURCE_VARIABLES",
    "FLAGS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_K",
    "DepthRange",
    "Engine",
    "ServeConfig",
    "ServeSpec",
    "SpecRefusal",
    "extract_spec",
    "interpolation",
    "is_engine_variable",
    "is_speculative_flag",
    "is_speculative_variable",
    "load_yaml",
    "normalise_flag",
    "read_bounded",
    "read_serve_config",
    "settings_differences",
    "shell_metacharacter",
    "shell_split",
    "spec_of",
]

MAX_BYTES = 1 << 20  # 1 MiB: a compose or argv file is a few kB; this bounds what a hostile file costs
MAX_DEPTH = 32  # YAML nesting; a compose file nests about 6 levels (services.NAME.deploy.resources...)
MAX_K = 1024  # largest depth accepted; llama.cpp bounds its ngram draft lengths to 1024 (common/arg.cpp)
NGRAM_CACHE_K = 8  # llama.cpp's ngram-cache drafts 8 tokens (common/speculative.cpp common_speculative_n_max)
_DECIMAL = re.compile(r"[0-9]{1,9}")  # an integer argv value
SPEC_DEFAULT_K = 64  # llama.cpp --spec-default: ngram-mod with n_max 64 (common/arg.cpp)


class Engine(StrEnum):
    """The serving engines whose speculative flags are read."""

    VLLM = "vllm"
    SGLANG = "sglang"
    LLAMACPP = "llamacpp"


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
class ServeConfig:
    """The serve arguments of one service, its image and the environment it sets.

    `names_program`: True when the argv opens with the program that runs (compose's entrypoint, an
    argv file that does not open with a flag), False when it is the arguments of the image's
    entrypoint, None when unknown (read leniently). `refusals` say why what runs cannot be told.
    `compose` is the resolved compose service (mtpverdict.compose.ResolvedService) it came from.
    """

    argv: tuple[str, ...]
    image: str | None
    source: str
    environment: tuple[str, ...] = ()  # variable names the service sets
    unpinned: str | None = None  # why the engine version it runs cannot be known (a compose build)
    env_values: tuple[tuple[str, str | None], ...] = ()  # (name, value); None: from the host
    names_program: bool | None = None
    refusals: tuple[str, ...] = ()
    compose: Any = None


# --------------------------------------------------------------------------------------------------
# reading files


def read_bounded(path: str | os.PathLike[str], limit: int = MAX_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes; InputError for anything else.

    Opened non-blocking and checked with fstat before any read, so a FIFO cannot hang the reader and
    a device (a symlink to /dev/zero) is refused without being read.
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError([Problem(source, f"cannot be read: {exc.strerror or exc}")]) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(
                [Problem(source, f"is {_file_kind(info.st_mode)}, not a regular file; {_limit(limit)}")]
            )
        if info.st_size > limit:
            raise InputError([Problem(source, f"is {info.st_size} bytes; {_limit(limit)}")])
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise InputError([Problem(source, f"grew past the limit while it was read; {_limit(limit)}")])
    try:
        return b"".join(chunks).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError([Problem(source, f"is not UTF-8 text (byte {exc.start})")]) from None


def _limit(limit: int) -> str:
    return f"a serve config must be a regular file of at most {limit} bytes"


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def read_serve_config(
    path: str | os.PathLike[str], service: str | None = None, compose: Any = None
) -> ServeConfig:
    """A docker compose file (YAML; `compose`: mtpverdict.compose.ComposeOptions), a JSON argv list,
    or one shell command line."""
    source = str(path)
    text = read_bounded(path)
    stripped = text.strip()
    if stripped.startswith("["):
        argv = _json_argv(stripped, source)
        return ServeConfig(argv, None, source, names_program=not argv or not argv[0].startswith("-"))
    if Path(path).suffix in (".yaml", ".yml") or _has_services(text):
        from mtpverdict.compose import ComposeOptions, read_compose

        return read_compose(source, text, service, compose or ComposeOptions())
    argv, refusals = _shell_line(text, source)
    names = not argv or not argv[0].startswith("-")
    return ServeConfig(argv, None, source, names_program=names, refusals=refusals)


def _has_services(text: str) -> bool:
    """Whether a line opens with `services:` (a compose file without a .yaml name)."""
    return any(line.startswith("services") and line[8:].strip().startswith(":") for line in text.splitlines())


def _json_argv(text: str, source: str) -> tuple[str, ...]:
    try:
        argv = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError([Problem(source, f"not a valid JSON argv list: {str(exc)[:120]}")]) from None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise InputError([Problem(source, "must be a JSON list of strings")])
    return tuple(argv)


def _shell_line(text: str, source: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The argv of one shell command line (\\ continuations, # comment lines), and a refusal when
    the shell would expand or run anything in it ($, `, globs, operators)."""
    joined = text.replace("\\\r\n", " ").replace("\\\n", " ")
    lines = [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) != 1:
        raise InputError(
            [
                Problem(
                    source,
                    f"holds {len(lines)} command lines; an argv file is one command (continue with \\)",
                )
            ]
        )
    line = lines[0][: comment_start(lines[0])]
    found = shell_metacharacter(line)
    if found is not None and found in ";&|<>()":
        raise InputError(
            [Problem(source, f"shell operator {found!r}: an argv file is one command, not a script")]
        )
    try:
        tokens = tuple(shell_split(line))
    except ValueError as exc:
        raise InputError([Problem(source, f"not a valid command line: {exc}")]) from None
    if found is not None:
        return tokens, (
            f"{source}: the shell character {found!r} outside single quotes: the shell would expand it "
            "when the line runs; quote it",
        )
    return tokens, ()


def load_yaml(text: str, source: str) -> Any:
    """Safe YAML with no anchors, aliases, merge keys or duplicate keys, nested at most MAX_DEPTH deep.

    Anchors and depth are checked on the event stream, before any node is built, so an alias bomb or
    a deeply nested document costs no more than reading its text.
    """
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_events(yaml.parse(text, Loader=loader_class), source)
        loader = loader_class(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_keys(node, source)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        raise InputError(
            [Problem(source, f"not valid YAML: {exc.problem or exc.context}", line=line)]
        ) from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an integer past Python's digit limit
        raise InputError([Problem(source, f"not valid YAML: {str(exc).splitlines()[0][:120]}")]) from None


def _check_events(events: Iterable[Any], source: str) -> None:
    import yaml

    depth = 0
    for event in events:
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            raise InputError([Problem(source, "a YAML alias (*name): write the value out", line=line)])
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            raise InputError([Problem(source, "a YAML anchor (&name): write the value out", line=line)])
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError([Problem(source, f"nested deeper than {MAX_DEPTH} levels", line=line)])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_keys(root: Any, source: str) -> None:
    import yaml

    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = str(key.value) if isinstance(key, yaml.ScalarNode) else None
                line = key.start_mark.line + 1
                if name is None:
                    raise InputError([Problem(source, "a mapping key must be a plain value", line=line)])
                if key.tag == "tag:yaml.org,2002:merge":
                    raise InputError(
                        [Problem(source, "a YAML merge key (<<): write the values out", line=line)]
                    )
                if name in seen:
                    raise InputError([Problem(source, f"duplicate key {name!r}", line=line)])
                seen.add(name)
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.ScalarNode):
            _check_integer(node, source)


def check_integers(root: Any, source: str) -> None:
    """Refuse, by its line, an integer too long for any reader (before Python's digit limit says it
    in its own words); a composed YAML node tree, anchors allowed (each node is checked once)."""
    import yaml

    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(part for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.ScalarNode):
            _check_integer(node, source)


def _check_integer(node: Any, source: str) -> None:
    if node.tag == _YAML_INT and len(node.value) > MAX_INT_CHARS:
        digits = sum(c.isdigit() for c in node.value)
        why = f"an integer of {digits} digits; {INT_RANGE_MESSAGE}"
        raise InputError([Problem(source, why, line=node.start_mark.line + 1)])


_YAML_INT = "tag:yaml.org,2002:int"
MAX_INT_CHARS = 64  # an integer's text longer than this is past 2**53 in any base (binary: 0b + 53 digits)


# --------------------------------------------------------------------------------------------------
# speculative flags, per engine


@dataclass(frozen=True, slots=True)
class _Flag:
    engine: Engine
    canonical: str
    values: int = 1  # how many argv tokens the flag takes
    removed: str | None = None  # why the engine no longer accepts it


# Each line: a flag and its aliases (the first is the canonical name).
# vLLM 0.32, vllm/engine/arg_utils.py: the speculative config and its three shorthands.
_VLLM_FLAGS = """
--speculative-config -sc
--spec-method
--spec-model
--spec-tokens
"""
# Flags of vLLM before 0.10 that 0.32 refuses ("unrecognized arguments").
_VLLM_REMOVED = """
--speculative-model
--num-speculative-tokens
--speculative-draft-tensor-parallel-size
--speculative-max-model-len
--speculative-disable-by-batch-size
--speculative-model-quantization
--speculative-disable-mqa-scorer
--ngram-prompt-lookup-max
--ngram-prompt-lookup-min
--spec-decoding-acceptance-method
--typical-acceptance-sampler-posterior-threshold
--typical-acceptance-sampler-posterior-alpha
--disable-logprobs-during-spec-decoding
"""
# SGLang, python/sglang/srt/server_args.py and docs/advanced_features/speculative_decoding.md.
_SGLANG_FLAGS = """
--speculative-algorithm
--speculative-num-steps
--speculative-num-draft-tokens
--speculative-eagle-topk
--speculative-draft-model-path
--speculative-draft-model-revision
--speculative-draft-model-quantization
--speculative-draft-load-format
--speculative-token-map
--speculative-accept-threshold-single
--speculative-accept-threshold-acc
--speculative-attention-mode
--speculative-moe-runner-backend
--speculative-moe-a2a-backend
--speculative-draft-attention-backend
--speculative-dflash-block-size
"""
# llama.cpp, common/arg.cpp (the tree vendored by llama-cpp-python 0.3.36), flags that take one value;
# the last three lines are older builds' flags (newer ones refuse them as removed parameters).
_LLAMACPP_FLAGS = """
--spec-type
--spec-draft-model -md --model-draft
--spec-draft-n-max
--spec-draft-n-min
--spec-draft-hf -hfd -hfrd --hf-repo-draft
--spec-draft-threads -td --threads-draft
--spec-draft-threads-batch -tbd --threads-batch-draft
--spec-draft-cpu-mask -Cd --cpu-mask-draft
--spec-draft-cpu-range -Crd --cpu-range-draft
--spec-draft-cpu-strict --cpu-strict-draft
--spec-draft-prio --prio-draft
--spec-draft-poll --poll-draft
--spec-draft-cpu-mask-batch -Cbd --cpu-mask-batch-draft
--spec-draft-cpu-range-batch -Crbd --cpu-range-batch-draft
--spec-draft-cpu-strict-batch --cpu-strict-batch-draft
--spec-draft-prio-batch --prio-batch-draft
--spec-draft-poll-batch --poll-batch-draft
--spec-draft-type-k -ctkd --cache-type-k-draft
--spec-draft-type-v -ctvd --cache-type-v-draft
--spec-draft-override-tensor -otd --override-tensor-draft
--spec-draft-n-cpu-moe --spec-draft-ncmoe -ncmoed --n-cpu-moe-draft
--spec-synth-len
--spec-synth-rates
--spec-draft-p-split --draft-p-split
--spec-draft-p-min --draft-p-min
--spec-draft-device -devd --device-draft
--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft
--spec-ngram-mod-n-min
--spec-ngram-mod-n-max
--spec-ngram-mod-n-match
--spec-ngram-simple-size-n
--spec-ngram-simple-size-m
--spec-ngram-simple-min-hits
--spec-ngram-map-k-size-n
--spec-ngram-map-k-size-m
--spec-ngram-map-k-min-hits
--spec-ngram-map-k4v-size-n
--spec-ngram-map-k4v-size-m
--spec-ngram-map-k4v-min-hits
--ctx-size-draft -cd
--draft-max --draft --draft-n
--draft-min --draft-n-min
"""
_LLAMACPP_SWITCHES = """
--spec-draft-cpu-moe -cmoed --cpu-moe-draft
--spec-draft-backend-sampling
--no-spec-draft-backend-sampling
--spec-default
"""
_LLAMACPP_REMOVED = """
--spec-ngram-size-n
--spec-ngram-size-m
--spec-ngram-min-hits
"""
_LLAMACPP_PRESETS = """
--fim-qwen-7b-spec
--fim-qwen-14b-spec
"""


def _table() -> dict[str, _Flag]:
    table: dict[str, _Flag] = {}
    groups: tuple[tuple[Engine, str, int, str | None], ...] = (
        (Engine.VLLM, _VLLM_FLAGS, 1, None),
        (Engine.VLLM, _VLLM_REMOVED, 1, "removed from vLLM (0.32 takes --speculative-config)"),
        (Engine.SGLANG, _SGLANG_FLAGS, 1, None),
        (Engine.LLAMACPP, _LLAMACPP_FLAGS, 1, None),
        (Engine.LLAMACPP, _LLAMACPP_SWITCHES, 0, None),
        (Engine.LLAMACPP, "--spec-replace", 2, None),
        (
            Engine.LLAMACPP,
            _LLAMACPP_REMOVED,
            1,
            "removed from llama.cpp (use the --spec-ngram-<type>-* sizes)",
        ),
        (Engine.LLAMACPP, _LLAMACPP_PRESETS, 0, "a preset that turns speculation on; write its flags out"),
    )
    for engine, text, values, removed in groups:
        for line in text.strip().splitlines():
            names = line.split()
            for name in names:
                table[name] = _Flag(engine, names[0], values, removed)
    return table


FLAGS: Mapping[str, _Flag] = _table()
_LONG_SPEC = tuple(sorted(name for name in FLAGS if name.startswith("--")))
_CONFIG_FILE = "--config"


def normalise_flag(name: str) -> str:
    """A flag as the engines match it: in a long flag, `_` becomes `-` up to the first `.`."""
    if not name.startswith("--"):
        return name
    head, dot, tail = name.partition(".")
    return head.replace("_", "-") + dot + tail


def _in_namespace(name: str) -> bool:
    """Long flags that name speculation or drafting (vLLM's --specialize-active-lora does not)."""
    return (
        name.startswith(("--spec-", "--speculative", "--draft"))
        or name.endswith("-draft")
        or "-draft-" in name
    )


def is_speculative_flag(name: str) -> bool:
    """Whether a flag belongs to the speculative configuration (any engine), known or not."""
    norm = normalise_flag(name.split("=", 1)[0])
    return norm in FLAGS or norm.startswith("--speculative-config.") or _in_namespace(norm)


@dataclass(frozen=True, slots=True)
class _Found:
    flag: str  # canonical name (vLLM dotted keys keep their path)
    value: str | None
    given: str  # as written
    engine: Engine


def _scan(argv: Sequence[str]) -> tuple[list[_Found], list[str]]:
    """The speculative flags of an argv with their values, and the reasons any of them is refused."""
    found: list[_Found] = []
    reasons: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("-") or token in ("-", "--"):
            continue
        name, eq, inline = token.partition("=")
        norm = normalise_flag(name)
        if norm == _CONFIG_FILE:
            reasons.append(
                f"{name}: the serve arguments come from a file the gate does not read; inline them"
            )
            continue
        if norm.startswith("--speculative-config."):
            spec: _Flag | None = _Flag(Engine.VLLM, norm)
        else:
            spec = FLAGS.get(norm)
        if spec is None:
            if _in_namespace(norm):
                reasons.append(_unknown(name, norm))
            continue
        if spec.removed:
            reasons.append(f"{name}: {spec.removed}")
        values: list[str] = [inline] if eq else []
        while len(values) < spec.values and i < len(argv):
            values.append(argv[i])
            i += 1
        if len(values) != spec.values:
            reasons.append(f"{name}: takes {spec.values} value(s), got {len(values)}")
            continue
        found.append(_Found(spec.canonical, " ".join(values) if values else None, name, spec.engine))
    return found, reasons


def _unknown(name: str, norm: str) -> str:
    longer = [full for full in _LONG_SPEC if full.startswith(norm) and full != norm]
    if norm.startswith("--") and longer:
        return (
            f"{name}: an abbreviation the engine's parser may expand (to {', '.join(longer[:3])}); "
            "write the full flag"
        )
    return f"{name}: an unknown speculative flag; the gate cannot say what it changes"


# Variables engines read as configuration: llama.cpp reads every flag from LLAMA_ARG_* (common/arg.cpp
# set_env), vLLM its VLLM_* (vllm/envs.py), SGLang its SGLANG_* (SGLANG_ENABLE_SPEC_V2 switches its
# speculative scheduler).
ENGINE_VARIABLE_PREFIXES = ("LLAMA_ARG_", "VLLM_", "SGLANG_")
# Where the engines' Hugging Face and ModelScope clients fetch a model (and its drafter) named by id,
# the caches they read it from, and the certificates they trust doing so: another endpoint, cache or
# trusted certificate serves other weights under the same name.
MODEL_SOURCE_VARIABLES = frozenset(
    {
        "HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HUGGINGFACE_CO_RESOLVE_ENDPOINT",
        "TRANSFORMERS_CACHE", "HF_HUB_OFFLINE", "MODELSCOPE_CACHE", "MODELSCOPE_DOMAIN",
        "MODELSCOPE_ENDPOINT", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    }
)  # fmt: skip


def is_engine_variable(name: str) -> bool:
    """Whether an engine reads this environment variable as configuration (or as where its model
    comes from)."""
    return name.startswith(ENGINE_VARIABLE_PREFIXES) or name in MODEL_SOURCE_VARIABLES


def is_speculative_variable(name: str) -> bool:
    """An engine variable that sets speculation or drafting (LLAMA_ARG_SPEC_TYPE, ..._DRAFT_MAX,
    SGLANG_ENABLE_SPEC_V2, VLLM_SPEC_...)."""
    if not is_engine_variable(name):
        return False
    words = name.split("_")[1:]
    return any(w == "SPEC" or w.startswith(("SPECULAT", "DRAFT")) for w in words)


def _engine_hint(argv: Sequence[str], image: str | None) -> Engine | None:
    """The engine the program part of the command runs, else the one the image names."""
    from mtpverdict.servecommand import Command, split_command

    command = split_command(argv)
    if isinstance(command, Command) and command.engine is not None:
        return command.engine
    words = (image or "").lower()
    named = {
        Engine.VLLM: "vllm" in words,
        Engine.SGLANG: "sglang" in words,
        Engine.LLAMACPP: "llama-server" in words or "llama.cpp" in words or "llama-cpp" in words,
    }
    hits = [engine for engine, hit in named.items() if hit]
    return hits[0] if len(hits) == 1 else None


def extract_spec(
    argv: Sequence[str], *, image: str | None = None, environment: Iterable[str] = ()
) -> ServeSpec | SpecRefusal:
    """The speculative configuration an argv asks for, or why it cannot be read without a guess."""
    found, reasons = _scan(argv)
    reasons += [
        f"environment variable {name} sets speculation outside the command line; put it on the command line"
        for name in environment
        if is_speculative_variable(name)
    ]
    reasons += [
        f"{f.given} {f.value}: uses variable interpolation, so its value is only known at deploy time"
        for f in found
        if f.value is not None and interpolation(f.value) is not None
    ]
    engines = sorted({f.engine for f in found})
    if len(engines) > 1:
        by_engine = "; ".join(
            f"{e}: {', '.join(sorted({f.given for f in found if f.engine == e}))}" for e in engines
        )
        reasons.append(f"speculative flags of several engines ({by_engine})")
    hint = _engine_hint(argv, image)
    if len(engines) == 1 and hint is not None and hint != engines[0]:
        reasons.append(f"{engines[0]} speculative flags, but the image or program is {hint}")
    if reasons:
        return SpecRefusal(tuple(reasons))
    if not found:
        return ServeSpec(hint, None, None)
    builder = {Engine.VLLM: _vllm_spec, Engine.SGLANG: _sglang_spec, Engine.LLAMACPP: _llamacpp_spec}
    return builder[engines[0]](found)


def spec_of(config: ServeConfig) -> ServeSpec | SpecRefusal:
    """extract_spec over a serve config's argv, image and environment."""
    return extract_spec(config.argv, image=config.image, environment=config.environment)


# --------------------------------------------------------------------------------------------------
# vLLM


# vllm/config/speculative.py (0.32): MTPModelTypes become mtp; the rest map to the results methods.
_VLLM_METHODS = {
    "mtp": "mtp", "ngram": "ngram", "[ngram]": "ngram", "ngram_gpu": "ngram", "eagle": "eagle",
    "eagle3": "eagle3", "draft_model": "draft_model", "medusa": "medusa", "suffix": "suffix",
    "mlp_speculator": "other", "dflash": "other", "dspark": "other", "custom_class": "other",
    "extract_hidden_states": "other",
}  # fmt: skip
_VLLM_MTP_SUFFIX = "_mtp"  # deepseek_mtp, qwen3_5_mtp, ...: vLLM replaces them with mtp


def _json_value(text: str) -> Any:
    """JSON that refuses duplicate keys and non-finite numbers (ValueError), or RecursionError."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def _vllm_config(found: list[_Found]) -> tuple[dict[str, Any], list[str]]:
    """vLLM's speculative config dict as its parser builds it from the flags, with any contradiction."""
    reasons: list[str] = []
    whole = [f for f in found if f.flag == "--speculative-config"]
    dotted = [f for f in found if f.flag.startswith("--speculative-config.")]
    config: dict[str, Any] = {}
    if len(whole) > 1:
        reasons.append("--speculative-config is given more than once; vLLM keeps only the last")
    if whole and dotted:
        reasons.append(
            f"--speculative-config and {dotted[0].given} together: vLLM replaces the whole object "
            "with the dotted keys"
        )
    for f in whole:
        try:
            parsed = _json_value(f.value or "")
        except (ValueError, RecursionError) as exc:
            reasons.append(f"{f.given} {f.value!r:.80}: not valid JSON ({str(exc)[:80]})")
            continue
        if not isinstance(parsed, dict) or not parsed:
            reasons.append(f"{f.given}: must be a non-empty JSON object")
            continue
        config.update({k.replace("-", "_"): v for k, v in parsed.items()})
    for f in dotted:
        path = f.flag.split(".")[1:]
        path[0] = path[0].replace("-", "_")
        try:
            value: Any = _json_value(f.value or "")
        except (ValueError, RecursionError):
            value = f.value
        _set_path(config, path, value, f.given, reasons)
    return config, reasons


def _set_path(config: dict[str, Any], path: list[str], value: Any, given: str, reasons: list[str]) -> None:
    target = config
    for key in path[:-1]:
        nested = target.setdefault(key, {})
        if not isinstance(nested, dict):
            reasons.append(f"{given}: {key} is not an object")
            return
        target = nested
    if path[-1] in target:
        reasons.append(f"{given}: sets {'.'.join(path)} twice")
    target[path[-1]] = value


def _vllm_spec(found: list[_Found]) -> ServeSpec | SpecRefusal:
    config, reasons = _vllm_config(found)
    shorthand = {
        "--spec-method": "method",
        "--spec-model": "model",
        "--spec-tokens": "num_speculative_tokens",
    }
    for f in found:
        key = shorthand.get(f.flag)
        if key is None:
            continue
        if key in config:
            reasons.append(f"{f.given} and --speculative-config['{key}'] together: vLLM refuses both")
            continue
        config[key] = _int_or_text(f.value or "") if key == "num_speculative_tokens" else f.value
    if reasons:
        return SpecRefusal(tuple(reasons))
    method, why = _vllm_method(config)
    k = config.get("num_speculative_tokens")
    if method is None:
        return SpecRefusal((why,))
    if not _is_depth(k):
        return SpecRefusal(
            (
                f"num_speculative_tokens must be an integer from 1 to {MAX_K}, got {k!r}: without it "
                "the depth comes from the draft model's own config, which the gate does not read",
            )
        )
    schedule = _schedule(config.get("num_speculative_tokens_per_batch_size"), k)
    if isinstance(schedule, SpecRefusal):
        return schedule
    return ServeSpec(Engine.VLLM, method, k, _canonical(config), schedule)


def _vllm_method(config: Mapping[str, Any]) -> tuple[str | None, str]:
    method = config.get("method")
    model = config.get("model")
    if method is None:
        # vLLM 0.32 infers the method from `model` alone (SpeculativeConfig.__post_init__)
        if not isinstance(model, str) or not model:
            return None, "the speculative config names neither a method nor a model"
        if model in ("ngram", "[ngram]"):
            return "ngram", ""
        parts = model.split(".")
        custom = "/" not in model and len(parts) >= 2 and all(p.isidentifier() for p in parts)
        return ("other" if custom else "draft_model"), ""
    if not isinstance(method, str):
        return None, f"method must be a string, got {method!r}"
    if method.endswith(_VLLM_MTP_SUFFIX):
        return "mtp", ""
    if method not in _VLLM_METHODS:
        return None, f"method {method!r} is not one vLLM 0.32 knows"
    return _VLLM_METHODS[method], ""


def _schedule(value: object, k: int) -> tuple[DepthRange, ...] | SpecRefusal:
    """num_speculative_tokens_per_batch_size as vLLM validates it (v1/spec_decode/dynamic/utils.py)."""
    if value is None:
        return ()
    bad = "num_speculative_tokens_per_batch_size"
    if not isinstance(value, list) or not value:
        return SpecRefusal((f"{bad} must be a non-empty list of [first, last, k] entries",))
    ranges: list[DepthRange] = []
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 3 and all(_is_int(v) for v in entry)):
            return SpecRefusal((f"{bad}: {entry!r} is not [first batch, last batch, k] integers",))
        first, last, depth = entry
        if not 1 <= first <= last or depth < 0:
            return SpecRefusal((f"{bad}: {entry!r} needs 1 <= first <= last and k >= 0",))
        if depth > k:
            return SpecRefusal((f"{bad}: {entry!r} drafts more than num_speculative_tokens {k}",))
        ranges.append(DepthRange(first, last, depth))
    ranges.sort(key=lambda r: r.first_batch)
    if ranges[0].first_batch != 1:
        return SpecRefusal((f"{bad}: the first range must start at batch size 1",))
    if any(b.first_batch <= a.last_batch for a, b in zip(ranges, ranges[1:], strict=False)):
        return SpecRefusal((f"{bad}: ranges overlap",))
    return tuple(ranges)


# --------------------------------------------------------------------------------------------------
# SGLang

_SGLANG_METHODS = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "mtp",
    "STANDALONE": "draft_model",
    "NGRAM": "ngram",
}


def _single_values(
    found: list[_Found], repeatable: tuple[str, ...] = ()
) -> tuple[dict[str, str | None], list[str]]:
    values: dict[str, str | None] = {}
    reasons: list[str] = []
    for f in found:
        if f.flag in values and f.flag not in repeatable:
            reasons.append(f"{f.given} is given more than once; the engine keeps only the last")
        values[f.flag] = f.value
    return values, reasons


def _sglang_spec(found: list[_Found]) -> ServeSpec | SpecRefusal:
    values, reasons = _single_values(found)
    algorithm = (values.get("--speculative-algorithm") or "").upper()
    if reasons:
        return SpecRefusal(tuple(reasons))
    if not algorithm:
        return SpecRefusal(("SGLang speculative flags without --speculative-algorithm",))
    method = _SGLANG_METHODS.get(algorithm)
    if method is None:
        return SpecRefusal(
            (f"--speculative-algorithm {algorithm}: the gate does not know how it sets the depth",)
        )
    depth_flag = "--speculative-num-draft-tokens" if algorithm == "NGRAM" else "--speculative-num-steps"
    k = _int_or_text(values.get(depth_flag) or "")
    if not _is_depth(k):
        return SpecRefusal(
            (f"{algorithm} needs {depth_flag} (1 to {MAX_K}); left out, SGLang chooses it per model",)
        )
    topk = _int_or_text(values.get("--speculative-eagle-topk") or "")
    drafts = _int_or_text(values.get("--speculative-num-draft-tokens") or "")
    if algorithm != "NGRAM" and topk == 1 and _is_int(drafts) and drafts != k + 1:
        return SpecRefusal(
            (
                f"--speculative-num-draft-tokens {drafts} with --speculative-eagle-topk 1 and "
                f"--speculative-num-steps {k}: SGLang resets it to num_steps + 1 = {k + 1}",
            )
        )
    settings = dict(values)
    settings["--speculative-algorithm"] = algorithm
    return ServeSpec(Engine.SGLANG, method, k, _canonical(settings))


# --------------------------------------------------------------------------------------------------
# llama.cpp

# --spec-type names (common/speculative.cpp) -> results method and the flag that sets the depth
_LLAMACPP_TYPES: dict[str, tuple[str, str | None]] = {
    "draft-simple": ("draft_model", "--spec-draft-n-max"),
    "draft-eagle3": ("eagle3", "--spec-draft-n-max"),
    "draft-mtp": ("mtp", "--spec-draft-n-max"),
    "draft-dflash": ("other", "--spec-draft-n-max"),
    "draft-dspark": ("other", "--spec-draft-n-max"),
    "ngram-simple": ("ngram", "--spec-ngram-simple-size-m"),
    "ngram-map-k": ("ngram", "--spec-ngram-map-k-size-m"),
    "ngram-map-k4v": ("ngram", "--spec-ngram-map-k4v-size-m"),
    "ngram-mod": ("ngram", "--spec-ngram-mod-n-max"),
    "ngram-cache": ("ngram", None),  # a fixed depth, NGRAM_CACHE_K
}
_OLD_LLAMACPP = ("--draft-max", "--draft-min", "--ctx-size-draft")


def _llamacpp_spec(found: list[_Found]) -> ServeSpec | SpecRefusal:
    values, reasons = _single_values(found, repeatable=("--spec-type",))
    types = [
        t.strip() for f in found if f.flag == "--spec-type" for t in (f.value or "").split(",") if t.strip()
    ]
    if "--spec-default" in values:
        types.append("ngram-mod")
        if "--spec-ngram-mod-n-max" in values:
            reasons.append("--spec-default and --spec-ngram-mod-n-max together: the last one wins")
        values.setdefault("--spec-ngram-mod-n-max", str(SPEC_DEFAULT_K))
    old = [f.given for f in found if f.flag in _OLD_LLAMACPP]
    if reasons:
        return SpecRefusal(tuple(reasons))
    settings = _canonical({name: True if value is None else value for name, value in values.items()})
    if not types:
        return _llamacpp_untyped(values, old, settings)
    if old:
        return SpecRefusal((f"{', '.join(old)} with --spec-type: builds that have --spec-type removed them",))
    if types == ["none"]:
        if len(values) > 1:
            return SpecRefusal(("--spec-type none with other speculative flags",))
        return ServeSpec(Engine.LLAMACPP, None, None)
    if len(types) != 1:
        return SpecRefusal(
            (f"--spec-type {','.join(types)}: several types; the gate compares one at a time",)
        )
    if types[0] not in _LLAMACPP_TYPES:
        return SpecRefusal((f"--spec-type {types[0]}: not a type llama.cpp lists",))
    method, depth_flag = _LLAMACPP_TYPES[types[0]]
    k = NGRAM_CACHE_K if depth_flag is None else _int_or_text(values.get(depth_flag) or "")
    if not _is_depth(k):
        return SpecRefusal(
            (f"--spec-type {types[0]} needs {depth_flag} (1 to {MAX_K}); the build's default is not assumed",)
        )
    return ServeSpec(Engine.LLAMACPP, method, int(k), settings)


def _llamacpp_untyped(
    values: Mapping[str, str | None], old: list[str], settings: str
) -> ServeSpec | SpecRefusal:
    """Builds before --spec-type: a draft model (-md) drafts --draft-max tokens."""
    model = values.get("--spec-draft-model")
    if model is None:
        return SpecRefusal(("llama.cpp speculative flags without --spec-type or a draft model (-md)",))
    if not old:
        return SpecRefusal(
            (
                "-md without --spec-type: llama.cpp reads the type from the draft's metadata; "
                "add --spec-type and its depth",
            )
        )
    k = _int_or_text(values.get("--draft-max") or "")
    if not _is_depth(k):
        return SpecRefusal((f"--draft-max must be 1 to {MAX_K} with -md in builds before --spec-type",))
    return ServeSpec(Engine.LLAMACPP, "draft_model", int(k), settings)


# --------------------------------------------------------------------------------------------------
# helpers


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_depth(value: object) -> TypeGuard[int]:
    return _is_int(value) and 1 <= value <= MAX_K


def _int_or_text(text: str) -> int | str:
    """An argv value as an integer when it is one (plain decimal digits), else the text."""
    return int(text) if _DECIMAL.fullmatch(text.strip()) else text


def _canonical(settings: Mapping[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def settings_differences(evidence: ServeSpec, proposed: ServeSpec) -> list[str]:
    """Speculative settings that differ between two specs, one `key: evidence X vs proposed Y` each."""
    before, after = evidence.settings_dict(), proposed.settings_dict()
    out = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            old = json.dumps(before[key]) if key in before else "(absent)"
            new = json.dumps(after[key]) if key in after else "(absent)"
            out.append(f"{key}: evidence {old:.80} vs proposed {new:.80}")
    return out
