"""One Engine name type: outside mtpverdict/engines/, no module spells an engine's name as a string."""

from __future__ import annotations

import ast
from pathlib import Path

from mtpverdict.engines.names import ENGINE_CHOICES, ENGINES, Engine

from ..conftest import ROOT

SRC = ROOT / "src" / "mtpverdict"
ENGINES_DIR = SRC / "engines"
NAMES = frozenset(e.value for e in Engine)


def engine_literals(files: list[Path], root: Path) -> list[str]:
    """Every string literal that is exactly an engine's name, as `path:line 'name'`."""
    found = [
        f"{path.relative_to(root)}:{node.lineno} {node.value!r}"
        for path in files
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES
    ]
    return sorted(found)


def _outside_engines() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if ENGINES_DIR not in p.parents)


def test_no_engine_name_literal_outside_engines() -> None:
    found = engine_literals(_outside_engines(), SRC)
    assert found == [], "name engines by mtpverdict.engines.names.Engine or ask the registry"


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
