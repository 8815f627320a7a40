"""Serve configs read safely, and the speculative configuration each one asks its engine for.

A serve config is what a deployment runs: a docker compose file (one or several services, `command:`
and `entrypoint:` in list or string form), a JSON argv list, or one shell command line. Reading one
refuses anything that is not a regular file of at most MAX_BYTES, YAML anchors and aliases (an alias
bomb never expands), merge keys, duplicate keys and nesting deeper than MAX_DEPTH, each as a one-line
InputError naming the file and key.

extract_spec reads the speculative flags of vLLM (0.32), SGLang and llama.cpp into a ServeSpec, or a
SpecRefusal with the reasons it cannot: an unknown, removed, abbreviated, repeated or contradictory
speculative flag, a depth left to the engine's default, flags of two engines. It never guesses. The
flag tables and each engine's reading of its flags are the engine modules' (mtpverdict.engines).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict._shell import comment_start, interpolation, shell_metacharacter, shell_split
from mtpverdict.engines import registry
from mtpverdict.engines.names import Engine
from mtpverdict.engines.spec import CONFIG_FLAG, MAX_K, DepthRange, Flag, FoundFlag, ServeSpec, SpecRefusal
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
    "scan_speculation",
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
# speculative flags, of every engine in the registry


def _table() -> dict[str, Flag]:
    """Every spelling of every engine's speculative flags (engines/*.py `flags`)."""
    table: dict[str, Flag] = {}
    for parts in registry.ENGINES.values():
        for group in parts.flags:
            for line in group.text.strip().splitlines():
                names = line.split()
                for name in names:
                    table[name] = Flag(parts.name, names[0], group.values, group.removed)
    return table


FLAGS: Mapping[str, Flag] = _table()
_LONG_SPEC = tuple(sorted(name for name in FLAGS if name.startswith("--")))
_CONFIG_FILE = "--config"
_DOTTED_CONFIG = CONFIG_FLAG  # the flag whose keys a `--<flag>.<key> value` sets one by one


def normalise_flag(name: str) -> str:
    """A flag as the engines match it: in a long flag, `_` becomes `-` up to the first `.`."""
    if not name.startswith("--"):
        return name
    head, dot, tail = name.partition(".")
    return head.replace("_", "-") + dot + tail


def _in_namespace(name: str) -> bool:
    """Flags that name an engine's speculation or drafting, each engine's `spec_namespace` (vLLM's
    --specialize-active-lora names none; llama.cpp's one-dash `-draft-max` misspelt does)."""
    return any(parts.spec_namespace.holds(name) for parts in registry.ENGINES.values())


def is_speculative_flag(name: str) -> bool:
    """Whether a flag belongs to the speculative configuration (any engine), known or not."""
    norm = normalise_flag(name.split("=", 1)[0])
    return norm in FLAGS or norm.startswith(f"{_DOTTED_CONFIG}.") or _in_namespace(norm)


def _scan(argv: Sequence[str]) -> tuple[list[FoundFlag], list[str]]:
    """The speculative flags of an argv with their values, and the reasons any of them is refused."""
    found: list[FoundFlag] = []
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
        if norm.startswith(f"{_DOTTED_CONFIG}."):  # one key of the JSON config: the config's engine
            spec: Flag | None = Flag(FLAGS[_DOTTED_CONFIG].engine, norm)
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
        found.append(FoundFlag(spec.canonical, " ".join(values) if values else None, name, spec.engine))
    return found, reasons


def _unknown(name: str, norm: str) -> str:
    longer = [full for full in _LONG_SPEC if full.startswith(norm) and full != norm]
    if norm.startswith("--") and longer:
        return (
            f"{name}: an abbreviation the engine's parser may expand (to {', '.join(longer[:3])}); "
            "write the full flag"
        )
    return f"{name}: an unknown speculative flag; the gate cannot say what it changes"


# Variables engines read as configuration (engines/*.py `config_variables`)
ENGINE_VARIABLE_PREFIXES = tuple(p for parts in registry.ENGINES.values() for p in parts.config_variables)
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
    hits = [e for e, parts in registry.ENGINES.items() if any(w in words for w in parts.image_words)]
    return hits[0] if len(hits) == 1 else None


def scan_speculation(
    argv: Sequence[str], environment: Iterable[str] = ()
) -> tuple[list[FoundFlag], list[str]]:
    """The speculative flags of an argv, and why its speculation cannot be told from them alone: a
    `--config FILE`, an unknown, abbreviated or removed speculative flag, a flag short of its values,
    an environment variable that sets speculation. The gate refuses a deployment for these reasons, and
    collect a compose service it would derive arms from (every arm would keep what the arms cannot
    replace)."""
    found, reasons = _scan(argv)
    reasons += [
        f"environment variable {name} sets speculation outside the command line; put it on the command line"
        for name in environment
        if is_speculative_variable(name)
    ]
    return found, reasons


def extract_spec(
    argv: Sequence[str], *, image: str | None = None, environment: Iterable[str] = ()
) -> ServeSpec | SpecRefusal:
    """The speculative configuration an argv asks for, or why it cannot be read without a guess."""
    found, reasons = scan_speculation(argv, environment)
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
    return registry.get(engines[0]).read_spec(found)


def spec_of(config: ServeConfig) -> ServeSpec | SpecRefusal:
    """extract_spec over a serve config's argv, image and environment."""
    return extract_spec(config.argv, image=config.image, environment=config.environment)


# --------------------------------------------------------------------------------------------------
# helpers


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
