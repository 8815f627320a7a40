"""One Engine name type: outside mtpverdict/engines/, no module spells an engine's name as a string (nor
inside a longer string or a regex, in any case, glued to `_` or `-`, followed by a version or a plural's
`s`, as bytes), nor any other word the engine is known by (its title, its title's separators as `_`, `-`
or a space, programs, image words, variable and metric prefixes: "llama.cpp", "llama_cpp",
"llama-server", "LLAMA_ARG_"), imports an engine's module or its parsers' (`mtpverdict.parse.<engine>_*`,
absolutely or relatively), names a class, function, variable, argument or attribute after an engine
(`engines.sglang`, `Engine.VLLM`, `LlamaTimings`, `VLLMEngine`), or takes one by its place in the
registry (`ENGINES[0]`), nor spells a flag or response field one engine's parts give
(`"--max-model-len"`, `"--spec-draft-n-max"`, `"draft_n_accepted"`); engine knowledge asks the
registry. An engine's own parsers (parse/<engine>_*.py) may import its other parsers, spell its own
flags and fields, and spell the engine's text PARSER_TEXT lists.
Docstrings and comments are prose and are not counted."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mtpverdict.engines import registry
from mtpverdict.engines.interface import EngineParts, present
from mtpverdict.engines.names import ENGINE_CHOICES, ENGINES, Engine

from ..conftest import ROOT

SRC = ROOT / "src" / "mtpverdict"
ENGINES_DIR = SRC / "engines"
NAMES = frozenset(e.value for e in Engine)


def engine_words() -> tuple[str, ...]:
    """Every word an engine is known by, from its parts: its name and title (a title's separators also
    as `_`, `-` or a space: "llama_cpp", "llama cpp"), the programs that run its server, the words of
    its images, the prefixes of its variables and of its /metrics names."""
    words: set[str] = set()
    for parts in registry.ENGINES.values():
        words |= {parts.name.value, parts.title, parts.metric_prefix, *parts.image_words}
        words |= {*parts.programs.executables, *parts.config_variables}
        words |= {re.sub(r"[^A-Za-z0-9]+", glue, parts.title) for glue in ("_", "-", " ")}
    return tuple(sorted(words, key=lambda w: (-len(w), w)))


def _spellings(parts: EngineParts) -> set[str]:
    """Every flag an engine's parts spell (its speculative tables, removed flags and aliases among them,
    its context, data-parallel and short flags and what they stand for, its clock flag) and the fields
    of its per-request response object; a one-letter short flag (`-c`, `-n`) is every CLI's, not left in."""
    words = {word for group in parts.flags for word in group.text.split()}
    words |= {*parts.context_flags, *(present(parts.data_parallel_flags) or ())}
    short = present(parts.short_flags) or {}
    words |= {*short, *short.values()}
    fields = present(parts.server_fields)
    if fields is not None:
        words |= {*fields.fields, *([fields.clock_flag] if fields.clock_flag else [])}
        words |= {flag for flag, _ in fields.report_flags}
    return {w for w in words if not re.fullmatch(r"-[A-Za-z]", w)}


def engine_spellings() -> dict[str, Engine]:
    """Each flag or field spelling that exactly one engine's parts give, with that engine: one that two
    engines share (or that none owns: `--port`, `--model`) is no engine's knowledge."""
    owners: dict[str, set[Engine]] = {}
    for engine, parts in registry.ENGINES.items():
        for word in _spellings(parts):
            owners.setdefault(word, set()).add(engine)
    return {word: next(iter(found)) for word, found in owners.items() if len(found) == 1}


def _word_pattern(word: str) -> str:
    """A word alone: no letter or digit before it; none after it either but a plural's `s` (a version
    may follow) unless the word ends as a prefix does (`VLLM_`, `vllm:`)."""
    after = "" if not word[-1].isalnum() else r"s?(?:(?![A-Za-z0-9])|(?=[-_.]?\d+(?:\.\d+)+))"
    return rf"(?<![A-Za-z0-9]){re.escape(word)}{after}"


# any engine word inside a longer string, in any case, alone, glued to `_` or `-` ("VLLM_", "x-sglang")
# or to a version ("vllm0.32"); `vllm bench` is another tool (vLLM's benchmark, an importer's name)
MENTION_RE = re.compile(
    rf"(?!(?:{'|'.join(sorted(NAMES))})[-_ ]bench)(?:{'|'.join(_word_pattern(w) for w in engine_words())})",
    re.IGNORECASE,
)
SPELLINGS = engine_spellings()
# a flag or field one engine spells, as a token of a literal, case as written ("--max-model-len=8",
# "timings.draft_n_accepted"); not inside a longer flag or name ("--max-model-len-x", "draft_n_x")
SPELLING_RE = re.compile(
    rf"(?<![A-Za-z0-9_-])({'|'.join(re.escape(w) for w in sorted(SPELLINGS, key=lambda w: (-len(w), w)))})"
    r"(?![A-Za-z0-9_-])"
)
# the stems an identifier is split into that name an engine: its name, and its title's first word
# (`LlamaTimings`, `llama_counts`, `.llama`, `Engine.VLLM`)
STEMS = frozenset(NAMES | {re.split(r"[^a-z0-9]", registry.title(e).lower())[0] for e in Engine})
# a stem as a word of an identifier: from its start, a `_` or a capital after a lower-case letter or
# digit, to its end, a `_` or digit, a capital after a lower-case letter (CamelCase: `SGLangReader`, not
# `VLLMX`), or, ending a run of capitals, a capital that opens a word (`VLLMEngine`, `SGLANGReader`); a
# stem followed by `bench` is vLLM's benchmark tool (`import_vllm_bench`, `VllmBench`)
IDENTIFIER_STEM_RE = re.compile(
    r"(?:^|(?<=_)|(?<=[a-z0-9])(?=[A-Z]))"
    rf"(?i:{'|'.join(sorted(STEMS))})"
    r"(?:$|(?=[_0-9])|(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]))"
    r"(?!_?(?i:bench))"
)
# the registry's engines or choices taken by position (`ENGINES[0]` is an engine named by its place)
POSITIONAL_RE = re.compile(r"^(?:(?:tuple|list|sorted)\()?(?:\w+\.)*(?:ENGINES|ENGINE_CHOICES|Engine)\)?$")
# an engine's module in a dotted import path, absolute or relative (`from ..engines.vllm import X`), or
# one of its parsers in mtpverdict/parse/ (`from mtpverdict.parse import vllm_log`)
ENGINE_MODULE_RE = re.compile(
    rf"(?:^|\.)(?:engines\.(?:{'|'.join(sorted(NAMES))})(?:\.|$)|parse\.(?:{'|'.join(sorted(NAMES))})_)"
)
# an engine's own parsers, which its module names (docs/architecture.md: parse/<engine>_*.py): each may
# import its own engine's other parsers, and spell the engine's text that PARSER_TEXT lists, nothing else
ENGINE_PARSERS_RE = re.compile(rf"parse/({'|'.join(sorted(NAMES))})_\w+\.py")
PARSER_TEXT = {
    "parse/vllm_log.py": {
        r"vLLM API server version": "the line in which vLLM's API server prints its version",
        r'"system_fingerprint"\s*:\s*"vllm-': "a response's fingerprint, which vLLM opens with its name",
        r"\((?:APIServer|EngineCore": "the process names vLLM opens its log lines with (VllmWorker)",
    },
    "parse/vllm_response.py": {
        r'"system_fingerprint"\s*:\s*"vllm-': "a response's fingerprint, which vLLM opens with its name",
    },
}
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
            if text is not None and (MENTION_RE.search(text) or SPELLING_RE.search(text)):
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
            if _positional(node):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)}")  # type: ignore[attr-defined]
    return sorted(found)


def _positional(node: ast.AST) -> bool:
    """Whether a node takes one of the registry's engines by its place (`ENGINES[0]`, `ENGINES[-1]`,
    `ENGINE_CHOICES[1:]`, `list(Engine)[0]`): an index or slice bound that is a whole number."""
    if not (isinstance(node, ast.Subscript) and POSITIONAL_RE.match(ast.unparse(node.value))):
        return False
    bounds = [node.slice.lower, node.slice.upper] if isinstance(node.slice, ast.Slice) else [node.slice]
    return any(_whole_number(b) for b in bounds if b is not None)


def _whole_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


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


def unexplained(mentions: list[str]) -> list[str]:
    """The mentions neither ALLOWED (its whole file) nor one an engine's parser may make: an import of
    its own engine's other parsers, or a literal PARSER_TEXT lists for its file."""
    return [m for m in mentions if m.split(":")[0] not in ALLOWED and not _parser_may(m)]


def _parser_may(mention: str) -> bool:
    where, seen = mention.split(" ", 1)
    parser = ENGINE_PARSERS_RE.fullmatch(where.split(":")[0])
    if parser is None:
        return False
    if re.fullmatch(rf"import (?:mtpverdict\.parse\.|\.){parser[1]}_\w+(?:\.\w+)?", seen):
        return True
    text = _quoted(seen)
    if text is None:
        return False
    openings = PARSER_TEXT.get(parser[0], {})
    return any(text.startswith(opening) for opening in openings) or _own_spellings(text, parser[1])


def _own_spellings(text: str, engine: str) -> bool:
    """Whether a literal names nothing of an engine but flags and fields the given engine spells."""
    found = [SPELLINGS[m[1]] for m in SPELLING_RE.finditer(text)]
    return bool(found) and all(e == engine for e in found) and not MENTION_RE.search(text)


def _quoted(seen: str) -> str | None:
    """A literal's text as a mention quotes it (its first 60 characters); None for another mention."""
    return str(ast.literal_eval(seen)) if seen[:1] in "'\"" else None


def test_no_engine_knowledge_outside_engines() -> None:
    found = unexplained(engine_mentions(_outside_engines(), SRC))
    assert found == [], "ask the registry (mtpverdict.engines.registry) or build the text from its names"


def test_every_allowed_file_still_needs_it() -> None:
    found = engine_mentions(_outside_engines(), SRC)
    assert set(ALLOWED) <= {f.split(":")[0] for f in found} and all(why.strip() for why in ALLOWED.values())
    texts = [(f.split(":")[0], _quoted(f.split(" ", 1)[1]) or "") for f in found]
    for path, openings in PARSER_TEXT.items():
        for opening, why in openings.items():
            assert why.strip() and any(p == path and t.startswith(opening) for p, t in texts), opening


def test_an_engines_parser_may_spell_only_its_own_listed_text(tmp_path: Path) -> None:
    parser = tmp_path / "parse" / "vllm_log.py"
    parser.parent.mkdir()
    parser.write_text(
        '"""Probe."""\n'
        "from mtpverdict.parse.vllm_response import X\n"  # its own engine's parser
        'A = r"vLLM API server version (\\S+)"\n'  # listed
        "from mtpverdict.parse.llamacpp_log import Y\n"  # another engine's parser
        "from mtpverdict.engines import vllm\n"  # an engine's module
        'B = "sglang"\n'
        'C = "vLLM took this"\n'  # not listed
        "class VllmLine: ...\n"
        'D = "num_spec_steps"\n'  # its own engine's field
        'E = "timings.draft_n_accepted"\n'  # another engine's field
        'F = ("--max-model-len", "--spec-draft-n-max")\n'  # its own engine's flag, another's
    )
    found = unexplained(engine_mentions([parser], tmp_path))
    assert found == [
        "parse/vllm_log.py:10 'timings.draft_n_accepted'",
        "parse/vllm_log.py:11 '--spec-draft-n-max'",
        "parse/vllm_log.py:4 import mtpverdict.parse.llamacpp_log",
        "parse/vllm_log.py:4 import mtpverdict.parse.llamacpp_log.Y",
        "parse/vllm_log.py:5 import mtpverdict.engines.vllm",
        "parse/vllm_log.py:6 'sglang'",
        "parse/vllm_log.py:7 'vLLM took this'",
        "parse/vllm_log.py:8 .VllmLine",
    ]


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
        ("class VLLMEngine: ...", ".VLLMEngine"),
        ("X = SGLANGReader()", ".SGLANGReader"),
        ("X = MyLLAMAServer", ".MyLLAMAServer"),
        ('X = "llama_cpp"', "'llama_cpp'"),
        ('X = "a llama cpp build"', "'a llama cpp build'"),
        ('X = "both vLLMs"', "'both vLLMs'"),
        ('X = "--enable-per-request-metrics"', "'--enable-per-request-metrics'"),
        ('X = "--spec-draft-n-max"', "'--spec-draft-n-max'"),
        ('X = ["vllm", "serve", "--max-model-len=4096"]', "'--max-model-len=4096'"),
        ('X = "--ctx-size-draft"', "'--ctx-size-draft'"),
        ('X = "-dp"', "'-dp'"),
        ('X = "--data-parallel-size"', "'--data-parallel-size'"),
        ('X = "--context-length"', "'--context-length'"),
        ('X = "--speculative-algorithm"', "'--speculative-algorithm'"),
        ('X = "draft_n_accepted"', "'draft_n_accepted'"),
        ('X = f"timings.{a}: draft_n missing"', "': draft_n missing'"),
        ('X = "num_accepted_draft_tokens"', "'num_accepted_draft_tokens'"),
        ("X = ENGINES[0]", "ENGINES[0]"),
        ("X = registry.ENGINES[-1]", "registry.ENGINES[-1]"),
        ("X = names.ENGINE_CHOICES[1:]", "names.ENGINE_CHOICES[1:]"),
        ("X = list(Engine)[2]", "list(Engine)[2]"),
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
        "Y = Engine.VLLMX, llamas, import_vllm_bench, VllmBenchEntry, HTTPServer, LLAMAS\n"
        "W = ENGINES[engine], ENGINE_CHOICES[i:], titles[0], registry.ENGINES[Engine(name)]\n"
        'V = ("vllmsx", "llama_cppx", "llamacpps2")\n'
        'U = ("--port", "--host", "--model", "-c", "-n", "--max-model-len-x", "draft_n_x", "x_draft_n")\n'
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
