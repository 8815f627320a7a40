"""What a serve command runs: its program proved from a short allow-list, or why it cannot be told.

A serve command is one argv (compose's entrypoint + command, or an argv file). In front of the
server's settings only programs whose behaviour is fixed and modelled here are accepted: the wrappers
`nice`, `taskset` and `numactl` with their own options, a serving executable by its file name
(`vllm serve`, `llama-server` and its builds), and a Python interpreter running an engine's own module
with `-m`. Anything else before the server (a shell, `env`, a `-c` script, a script file, a program
the gate does not know) is Unproven: the gate cannot tell what runs, so it refuses rather than
guessing. A command that opens with a setting (a flag, or the model an image's `vllm serve`
entrypoint takes) names no program: the image's entrypoint runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mtpverdict.engines import registry
from mtpverdict.engines.names import Engine

__all__ = [
    "ENGINE_MODULES",
    "PROGRAM_VARIABLES",
    "WRAPPERS",
    "Command",
    "Unproven",
    "known_program",
    "module_path_from_cwd",
    "program_name",
    "split_command",
]


@dataclass(frozen=True, slots=True)
class _Wrapper:
    """A wrapper's options: those that take a value, those that do not, and how many positionals
    (taskset's mask without -c) come before the wrapped command."""

    valued: frozenset[str]
    switches: frozenset[str]
    positionals: int = 0
    numeric_short: bool = False  # nice -10


# Options as util-linux (taskset), coreutils (nice) and numactl 2.0 document them.
WRAPPERS: Mapping[str, _Wrapper] = {
    "nice": _Wrapper(frozenset({"-n", "--adjustment"}), frozenset(), numeric_short=True),
    "taskset": _Wrapper(frozenset(), frozenset({"-a", "--all-tasks"}), positionals=1),
    "numactl": _Wrapper(
        frozenset(
            {
                "-N", "--cpunodebind", "-m", "--membind", "-C", "--physcpubind", "-i", "--interleave",
                "-p", "--preferred", "-P", "--preferred-many", "-w", "--weighted-interleave",
            }
        ),
        frozenset({"-l", "--localalloc", "-a", "--all", "-b", "--balancing"}),
    ),
}  # fmt: skip
# taskset -c LIST: the list is the option's value and no mask follows
_TASKSET_LIST = ("-c", "--cpu-list")

# Engine modules an interpreter may run with -m (engines/*.py `programs`); True: the subcommand follows
ENGINE_MODULES: Mapping[str, tuple[Engine, bool]] = {
    module: (engine, subcommand)
    for engine, parts in registry.ENGINES.items()
    for module, subcommand in parts.programs.modules
}
# CPython options that change nothing a server computes from its arguments (the -X and -W values are
# developer and warning settings); -c, a script file and anything else are not accepted.
_PYTHON_SWITCHES = frozenset({"-u", "-B", "-O", "-OO", "-s", "-S", "-E", "-I", "-P", "-q", "-b", "-bb"})
_PYTHON_VALUED = frozenset({"-X", "-W"})
# -X settings that make the interpreter load code from elsewhere: compiled modules from another
# directory (a forged .pyc under the prefix runs instead of the image's source), a module before site
_PYTHON_LOADING = frozenset({"pycache_prefix", "presite"})
# options that keep the working directory off sys.path (which python -m otherwise puts first)
_PYTHON_SAFE_PATH = frozenset({"-P", "-I"})


# Environment variables that change which code a process runs (the dynamic loader's preloads and
# search path, the program search path, Python's module path, home, startup file and compiled-module
# directory, HOME, under which Python's user site directory is, and the OpenSSL configuration and
# glibc converter paths, which load shared objects, and the caches of compiled code vLLM, PyTorch and
# Triton load: XDG_CACHE_HOME holds vLLM's torch.compile cache): set anywhere, what runs cannot be told.
PROGRAM_VARIABLES = frozenset(
    {
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PATH", "HOME", "PYTHONPATH", "PYTHONHOME",
        "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONEXECUTABLE", "PYTHONINSPECT",
        "PYTHONPYCACHEPREFIX", "OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES", "GCONV_PATH",
        "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Command:
    """A serve command split: the program part (wrappers, the server, its `serve`) and the settings."""

    program: tuple[str, ...]
    settings: tuple[str, ...]
    engine: Engine | None  # the engine the program runs; None when the command names no program


@dataclass(frozen=True, slots=True)
class Unproven:
    """Why the gate cannot tell what a command runs."""

    reason: str


def program_name(token: str) -> str:
    """A token's file name, without a Windows path or .exe: /b/llama-server, C:\\x\\llama-server.exe."""
    return token.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".exe")


def _is_python(name: str) -> bool:
    """python, python3, python3.12, python3.13t (a free-threaded build)."""
    rest = name.removeprefix("python")
    if rest == name:
        return False
    rest = rest.removesuffix("t")
    return all(c.isdigit() or c == "." for c in rest) and not rest.startswith(".")


def _server_engine(name: str) -> Engine | None:
    """The engine whose server a program name runs (vllm, llama-server and its builds), if any."""
    return next((e for e, parts in registry.ENGINES.items() if parts.programs.runs(name)), None)


def known_program(token: str) -> bool:
    """Whether a token names a program the gate models (a wrapper, a server or an interpreter)."""
    name = program_name(token)
    return name in WRAPPERS or _server_engine(name) is not None or _is_python(name)


def _wrapper_end(argv: Sequence[str], i: int, wrapper: _Wrapper, name: str) -> int | Unproven:
    """The index of the wrapped command after a wrapper at argv[i]."""
    j = i + 1
    positionals = wrapper.positionals
    while j < len(argv) and argv[j].startswith("-") and argv[j] != "--":
        option, eq, _ = argv[j].partition("=")
        if name == "taskset" and option in _TASKSET_LIST:
            positionals = 0
            j += 1 if eq else 2
        elif option in wrapper.valued:
            j += 1 if eq else 2
        elif option in wrapper.switches and not eq:
            j += 1
        elif wrapper.numeric_short and option[1:].isdigit():
            j += 1
        elif len(option) > 2 and option[:2] in wrapper.valued and not option.startswith("--"):
            j += 1  # -N0, -n10: a short option with its value attached
        else:
            return Unproven(f"{name} option {argv[j]!r} is not one the gate models")
    if j < len(argv) and argv[j] == "--":
        j += 1
    j += positionals
    if j >= len(argv):
        return Unproven(f"{name} wraps no command")
    return j


def _python_end(argv: Sequence[str], i: int) -> tuple[int, Engine] | Unproven:
    """After an interpreter at argv[i]: its options, then -m and an engine module (and `serve`)."""
    j = i + 1
    while j < len(argv) and argv[j] != "-m":
        token = argv[j]
        if token in _PYTHON_SWITCHES:
            j += 1
        elif token in _PYTHON_VALUED or (token[:2] in _PYTHON_VALUED and len(token) > 2):
            value = (argv[j + 1] if j + 1 < len(argv) else "") if token in _PYTHON_VALUED else token[2:]
            if token.startswith("-X") and value.partition("=")[0] in _PYTHON_LOADING:
                return Unproven(f"{program_name(argv[i])} option -X {value} loads code from elsewhere")
            j += 2 if token in _PYTHON_VALUED else 1
        elif token.startswith("-c") or not token.startswith("-"):
            what = "a -c script" if token.startswith("-c") else f"the script {token!r}"
            return Unproven(f"{program_name(argv[i])} runs {what}, not an engine's module")
        else:
            return Unproven(f"{program_name(argv[i])} option {token!r} is not one the gate models")
    if j + 1 >= len(argv):
        return Unproven(f"{program_name(argv[i])} runs no module (-m)")
    module = argv[j + 1]
    found = ENGINE_MODULES.get(module)
    if found is None:
        return Unproven(f"{program_name(argv[i])} -m {module}: not an engine's own serving module")
    engine, needs_subcommand = found
    end = j + 2
    subcommand = registry.get(engine).programs.subcommand
    if needs_subcommand and subcommand is not None:
        if end >= len(argv) or argv[end] != subcommand:
            return Unproven(f"-m {module} without the {subcommand} subcommand")
        end += 1
    return end, engine


def _program(argv: Sequence[str], i: int) -> tuple[int, Engine] | Unproven:
    """After the serving program at argv[i] (wrappers already skipped)."""
    token = argv[i]
    name = program_name(token)
    engine = _server_engine(name)
    if engine is not None:
        subcommand = registry.get(engine).programs.subcommand
        if subcommand is None:
            return i + 1, engine
        if i + 1 >= len(argv) or argv[i + 1] != subcommand:
            return Unproven(f"{token} without the {subcommand} subcommand")
        return i + 2, engine
    if _is_python(name):
        return _python_end(argv, i)
    return Unproven(f"{token!r} runs before the server: not a program the gate models")


def split_command(argv: Sequence[str], *, names_program: bool | None = None) -> Command | Unproven:
    """The program part and the settings of a serve command.

    `names_program` True: the command must open with its program (compose's entrypoint, an argv
    file that does not open with a setting). False: it is the arguments of the image's entrypoint
    and must not open with a program (whether that program runs depends on the entrypoint). None:
    read leniently, for comparing recorded evidence: a known program opens it, or it has none.
    """
    argv = list(argv)
    if not argv:
        return Command((), (), None)
    first = argv[0]
    opens_with_program = not first.startswith("-") and known_program(first)
    if names_program is None:
        names_program = opens_with_program
    if not names_program:
        if opens_with_program:
            return Unproven(
                f"the service sets no entrypoint, so the image's entrypoint decides whether {first!r} "
                "runs: set entrypoint: to the serving program"
            )
        return Command((), tuple(argv), None)
    i = 0
    while i < len(argv) and program_name(argv[i]) in WRAPPERS:
        name = program_name(argv[i])
        end = _wrapper_end(argv, i, WRAPPERS[name], name)
        if isinstance(end, Unproven):
            return end
        i = end
    if i >= len(argv):
        return Unproven("no serving program")
    found = _program(argv, i)
    if isinstance(found, Unproven):
        return found
    end, engine = found
    for token in argv[:end]:
        path = token.replace("\\", "/")
        absolute = path.startswith("/") or path[1:3] == ":/"  # C:/..., a Windows path
        if "/" in path and not absolute and known_program(token):
            return Unproven(
                f"{token!r} is a relative path: it runs from the working directory, which the evidence "
                "does not record"
            )
    return Command(tuple(argv[:end]), tuple(argv[end:]), engine)


def module_path_from_cwd(command: Command) -> str | None:
    """The interpreter of a `python -m` program part that puts the working directory first on its
    module path (no -P or -I), else None: whatever is mounted there is imported before the image's
    packages."""
    program = list(command.program)
    i = next((k for k, t in enumerate(program) if _is_python(program_name(t))), None)
    if i is None or "-m" not in program[i + 1 :]:
        return None
    options = program[i + 1 : program.index("-m", i + 1)]  # numactl -m before it is numactl's
    return None if any(t in _PYTHON_SAFE_PATH for t in options) else program_name(program[i])
