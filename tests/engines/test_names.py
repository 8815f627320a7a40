"""One Engine name type: outside mtpverdict/engines/, no module spells an engine's name as a string (nor
inside a longer string or a regex, in any case, glued to `_` or `-`, followed by a version, as bytes), nor
any other word the engine is known by (its title, programs, image words, variable and metric prefixes:
"llama.cpp", "llama-server", "LLAMA_ARG_"), imports an engine's module or its parsers'
(`mtpverdict.parse.<engine>_*`, absolutely or relatively), or names a class, function, variable,
argument or attribute after an engine (`engines.sglang`, `Engine.VLLM`, `LlamaTimings`); engine
knowledge asks the registry. Docstrings and comments are prose and are not counted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mtpverdict.engines import registry
from mtpverdict.engines.names import ENGINE_CHOICES, ENGINES, Engine

from ..conftest import ROOT

SRC = ROOT / "src" / "mtpverdict"
ENGINES_DIR = SRC / "engines"
NAMES = frozenset(e.value for e in Engine)


def engine_words() -> tuple[str, ...]:
    """Every word an engine is known by, from its parts: its name and title, the programs that run its
    server, the words of its images, the prefixes of its variables and of its /metrics names."""
    words: set[str] = set()
    for parts in registry.ENGINES.values():
        words |= {parts.name.value, parts.title, parts.metric_prefix, *parts.image_words}
        words |= {*parts.programs.executables, *parts.config_variables}
    return tuple(sorted(words, key=lambda w: (-len(w), w)))


def _word_pattern(word: str) -> str:
    """A word alone: no letter or digit before it; none after it either (a version may follow) unless
    the word ends as a prefix does (`VLLM_`, `vllm:`)."""
    after = "" if not word[-1].isalnum() else r"(?:(?![A-Za-z0-9])|(?=[-_.]?\d+(?:\.\d+)+))"
    return rf"(?<![A-Za-z0-9]){re.escape(word)}{after}"


# any engine word inside a longer string, in any case, alone, glued to `_` or `-` ("VLLM_", "x-sglang")
# or to a version ("vllm0.32"); `vllm bench` is another tool (vLLM's benchmark, an importer's name)
MENTION_RE = re.compile(
    rf"(?!(?:{'|'.join(sorted(NAMES))})[-_ ]bench)(?:{'|'.join(_word_pattern(w) for w in engine_words())})",
    re.IGNORECASE,
)
# the stems an identifier is split into that name an engine: its name, and its title's first word
# (`LlamaTimings`, `llama_counts`, `.llama`, `Engine.VLLM`)
STEMS = frozenset(NAMES | {re.split(r"[^a-z0-9]", registry.title(e).lower())[0] for e in Engine})
# a stem as a word of an identifier: from its start, a `_` or a capital after a lower-case letter or
# digit, to its end, a `_` or digit, or a capital after a lower-case letter (CamelCase: `SGLangReader`,
# not `VLLMX`); a stem followed by `bench` is vLLM's benchmark tool (`import_vllm_bench`, `VllmBench`)
IDENTIFIER_STEM_RE = re.compile(
    r"(?:^|(?<=_)|(?<=[a-z0-9])(?=[A-Z]))"
    rf"(?i:{'|'.join(sorted(STEMS))})"
    r"(?:$|(?=[_0-9])|(?<=[a-z])(?=[A-Z]))"
    r"(?!_?(?i:bench))"
)
# an engine's module in a dotted import path, absolute or relative (`from ..engines.vllm import X`), or
# one of its parsers in mtpverdict/parse/ (`from mtpverdict.parse import vllm_log`)
ENGINE_MODULE_RE = re.compile(
    rf"(?:^|\.)(?:engines\.(?:{'|'.join(sorted(NAMES))})(?:\.|$)|parse\.(?:{'|'.join(sorted(NAMES))})_)"
)
# the engine's own parsers, which its module names (docs/architecture.md: parse/<engine>_*.py)
ENGINE_PARSERS_RE = re.compile(rf"parse/(?:{'|'.join(sorted(NAMES))})_\w+\.py")
# the files whose mention must stay, each with why (path under src/mtpverdict -> why)
ALLOWED = {
    "cli/sim.py": "an example image name in --image's help, as a user writes it",
    "compose/_model.py": "vLLM's torch.compile cache (~/.cache/vllm), a path on the seat the image mounts",
    "formats/results.py": "field descriptions in the results schema (the scope's engine, where each engine "
    "reports a server-side field; schemas/ pins them)",
    "formats/campaign.py": "ignore_eos's description in the campaign schema (schemas/ pins it)",
    "formats/decision.py": "speculative_config's description in the decision schema (schemas/ pins it)",
    "importers/vllm_bench.py": "vLLM's own benchmark output: the campaign it writes is vLLM's (Engine.VLLM)",
}


def engine_literals(files: list[Path], root: Path) -> list[str]:
    """Every string literal that is exactly an engine's name, as `path:line 'name'`."""
    found = [
        f"{path.relative_to(root)}:{node.lineno} {node.value!r}"
        for path in files
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]
    return sorted(found)


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def engine_mentions(files: list[Path], root: Path) -> list[str]:
    """Every string or bytes literal (not a docstring) naming an engine inside it, every import of an
    engine's module and every attribute named as an engine, as `path:line text`."""
    found = []
    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstrings(tree)
        where = path.relative_to(root).as_posix()
        for node in ast.walk(tree):
            text = _literal(node) if id(node) not in docs else None
            if text is not None and MENTION_RE.search(text):
                found.append(f"{where}:{node.lineno} {text[:60]!r}")  # type: ignore[attr-defined]
            found += [
                f"{where}:{getattr(node, 'lineno', 0)} .{name}"
                for name in _names(node)
                if _names_engine(name)
            ]
            found += [
                f"{where}:{getattr(node, 'lineno', 0)} import {m}"
                for m in _imported(node)
                if ENGINE_MODULE_RE.search(m)
            ]
    return sorted(found)


def _names(node: ast.AST) -> list[str]:
    """The identifiers a node defines or reads: a name, an attribute, a function's, class's or
    argument's name, a keyword (an import is its module's path, which ENGINE_MODULE_RE reads)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg else []
    return []


def _names_engine(identifier: str) -> bool:
    """Whether one of an identifier's words (snake_case and CamelCase parts) is an engine's stem."""
    return IDENTIFIER_STEM_RE.search(identifier) is not None


def _literal(node: ast.AST) -> str | None:
    """A string constant's text, or a bytes constant's as Latin-1 (every byte a character)."""
    if not isinstance(node, ast.Constant):
        return None
    if isinstance(node.value, bytes):
        return node.value.decode("latin-1")
    return node.value if isinstance(node.value, str) else None


def _imported(node: ast.AST) -> list[str]:
    """The dotted names an import brings in (a relative one with its leading dots)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        module = "." * node.level + (node.module or "")
        return [module, *(f"{module.rstrip('.')}.{a.name}" for a in node.names)]
    return []


def _outside_engines() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if ENGINES_DIR not in p.parents)


def test_no_engine_name_literal_outside_engines() -> None:
    found = engine_literals(_outside_engines(), SRC)
    assert found == [], "name engines by mtpverdict.engines.names.Engine or ask the registry"


def test_no_engine_knowledge_outside_engines() -> None:
    files = [p for p in _outside_engines() if not ENGINE_PARSERS_RE.fullmatch(p.relative_to(SRC).as_posix())]
    found = [f for f in engine_mentions(files, SRC) if f.split(":")[0] not in ALLOWED]
    assert found == [], "ask the registry (mtpverdict.engines.registry) or build the text from its names"


def test_every_allowed_file_still_needs_it() -> None:
    found = {f.split(":")[0] for f in engine_mentions(_outside_engines(), SRC)}
    assert set(ALLOWED) <= found and all(why.strip() for why in ALLOWED.values())


def test_the_count_sees_a_name_inside_a_string_and_an_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Probe: vllm in a docstring is prose."""\n'
        "import mtpverdict.engines.vllm\n"
        "from mtpverdict.engines import llamacpp, registry\n"
        'RE = r"^(?:vllm|sglang):"\n'
        'BENCH = "vllm bench serve"\n'
        'OK = "vllmx llamacppx"\n'
    )
    assert engine_mentions([probe], tmp_path) == [
        "probe.py:2 import mtpverdict.engines.vllm",
        "probe.py:3 import mtpverdict.engines.llamacpp",
        "probe.py:4 '^(?:vllm|sglang):'",
    ]


@pytest.mark.parametrize(
    ("line", "seen"),
    [
        ("from .engines import vllm", "import .engines.vllm"),
        ("from ..engines.sglang import ENGINE", "import ..engines.sglang"),
        ("from ... import engines\nX = engines.llamacpp", ".llamacpp"),
        ("from mtpverdict.engines.names import Engine\nX = Engine.VLLM", ".VLLM"),
        ("X = registry.SGLang", ".SGLang"),
        ('X = b"vllm"', "'vllm'"),
        ('X = b"GET /x-llamacpp"', "'GET /x-llamacpp'"),
        ('X = "VLLM_USE_V1"', "'VLLM_USE_V1'"),
        ('X = "LlamaCpp"', "'LlamaCpp'"),
        ('X = "vllm_x"', "'vllm_x'"),
        ('X = "x_sglang"', "'x_sglang'"),
        ('X = "x-SGLANG-y"', "'x-SGLANG-y'"),
        ('X = f"{a}-vllm"', "'-vllm'"),
        ('X = "llama.cpp build"', "'llama.cpp build'"),
        ('X = ("llama-server", "-m")', "'llama-server'"),
        ('X = "LLAMA_ARG_SPEC_TYPE"', "'LLAMA_ARG_SPEC_TYPE'"),
        ('X = "recorded/vllm0.32"', "'recorded/vllm0.32'"),
        ('X = "vllm-0.32.0-cpu"', "'vllm-0.32.0-cpu'"),
        ('X = "sglang_0.5.15"', "'sglang_0.5.15'"),
        ('X = "llamacpp:tokens_predicted"', "'llamacpp:tokens_predicted'"),
        ("class LlamaTimings:\n    pass", ".LlamaTimings"),
        ("def llama_counts() -> None: ...", ".llama_counts"),
        ("def f(vllm_config: int) -> None: ...", ".vllm_config"),
        ("X = r.llama", ".llama"),
        ("f(llama=1)", ".llama"),
        ("X = SGLangReader()", ".SGLangReader"),
        ("Y = engines.vllm_log", ".vllm_log"),
        ("from mtpverdict.parse import vllm_log", "import mtpverdict.parse.vllm_log"),
        ("from .parse.llamacpp_server import X", "import .parse.llamacpp_server"),
    ],
)
def test_the_count_sees_each_spelling(tmp_path: Path, line: str, seen: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(f'"""Probe."""\n{line}\n')
    found = engine_mentions([probe], tmp_path)
    assert any(f.split(" ", 1)[1] == seen for f in found), found


def test_the_count_leaves_prose_and_other_words(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Probe: vLLM, SGLang and llamacpp in a docstring are prose."""\n'
        "# a comment naming vllm_x and Engine.VLLM\n"
        "def f() -> None:\n"
        '    """VLLM_ in a function\'s docstring."""\n'
        'X = ("vllmx", "xsglang", "llamacpp2", "vllm bench serve", "vllm-bench", "vllm_bench")\n'
        'Z = ("meta-llama/Llama-3.2-1B", "llamas", "vllmx0.32", "import_vllm_bench")\n'
        "Y = Engine.VLLMX, llamas, import_vllm_bench, VllmBenchEntry\n"
        "from mtpverdict.parse import text, metrics\n"
        "from .engines import names\n"
    )
    assert engine_mentions([probe], tmp_path) == []


def test_the_count_sees_a_literal(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""Probe."""\nENGINE = "llamacpp"\nTEXT = "vllm serve"\nf"{ENGINE}"\n')
    assert engine_literals([probe], tmp_path) == ["probe.py:2 'llamacpp'"]


def test_the_walk_reads_the_package() -> None:
    files = _outside_engines()
    assert SRC / "serveconfig.py" in files and SRC / "parse" / "reader.py" in files
    assert not any(ENGINES_DIR in p.parents for p in files)


def test_the_choices_are_auto_then_every_engine() -> None:
    assert ENGINE_CHOICES == ("auto", *ENGINES)
    assert all(Engine(name) is name for name in ENGINES)
