"""Dependencies point down: stats <- formats <- evidence <- rules <- decide <- report/gate/verify.

Every import in src/mtpverdict (at the top of a module or inside a function) is read with ast and
checked against the layer of the module that makes it. collect may use the formats, the engine-text
parsers and the stats core, never the decision engine (its --until-resolved loop gets a callback).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import ROOT

SRC = ROOT / "src" / "mtpverdict"

# module prefix -> layer; a module may import its own layer and the layers below it
LAYERS: dict[str, int] = {
    "mtpverdict.errors": 0,
    "mtpverdict._version": 0,
    "mtpverdict._jsonio": 0,
    "mtpverdict._files": 0,
    "mtpverdict._describe": 0,
    "mtpverdict._text": 0,
    "mtpverdict._shell": 0,
    "mtpverdict._logscale": 0,
    "mtpverdict.formats._check": 0,
    "mtpverdict.engines.names": 0,  # the one Engine name type, under every format
    "mtpverdict.stats": 1,
    "mtpverdict.formats": 2,
    "mtpverdict.engines": 2,  # engines as plug-ins: flags, spec reading, text parsers, probes (beside parse)
    "mtpverdict.parse": 2,
    "mtpverdict.serveconfig": 2,
    "mtpverdict.servecommand": 2,  # the program in front of a serve command's settings
    "mtpverdict.compose": 2,  # compose projects resolved by Compose; the collector may use it too
    "mtpverdict.importers": 3,
    "mtpverdict.collect": 3,  # beside evidence: formats, engine text and stats below it, never decide
    "mtpverdict.evidence": 3,
    "mtpverdict.rules": 4,
    "mtpverdict.decide": 5,
    "mtpverdict.report": 6,
    "mtpverdict.gate": 6,
    "mtpverdict.verify": 6,  # the public path of decide/verify.py
    "mtpverdict.sim": 6,
    "mtpverdict.plan": 3,  # planning maths over stats and the results format
    "mtpverdict.live": 6,  # after promotion: alerts and watch read a decision (and scrape like collect)
    "mtpverdict.cli": 9,
    "mtpverdict.ray_shards": 9,  # the deprecated path of collect/ray_shards.py (tests/test_api.py)
    "mtpverdict.__main__": 9,
    "mtpverdict": 9,  # the package's lazy public API names everything
}
COLLECT = "mtpverdict.collect"
# what may drive collect (merge and the Ray shards live inside it; mtpverdict.ray_shards is their old path)
SCALE_OUT = ("mtpverdict.cli", "mtpverdict.ray_shards")
COLLECT_MAY_USE = (
    "mtpverdict.errors",
    "mtpverdict._",
    "mtpverdict.formats",
    "mtpverdict.engines",
    "mtpverdict.parse",
    "mtpverdict.stats",
    "mtpverdict.serveconfig",
    "mtpverdict.compose",  # a campaign's arms derived from the seat's compose service
    "mtpverdict.collect",
)


def _module_name(path: Path, root: Path = SRC.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, layer)
    return None if best is None else best[1]


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported module) for every import of mtpverdict modules in a file."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("mtpverdict")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mtpverdict"):
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _target(imported: str) -> str:
    """The module an import refers to (`from a.b import c` may name a module or an attribute)."""
    parts = imported.split(".")
    while parts:
        candidate = SRC.parent.joinpath(*parts)
        if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
            return ".".join(parts)
        parts.pop()
    return imported


def upward_edges(files: list[Path], root: Path = SRC.parent) -> list[str]:
    """Every import that points up (or out of collect's allowed set), as `module:line -> target`;
    `root` is the directory that holds the files' `mtpverdict` package."""
    bad = []
    for path in files:
        module = _module_name(path, root)
        for line, imported in _imports(path):
            target = _target(imported)
            if module.startswith(COLLECT):
                if not target.startswith(COLLECT_MAY_USE):
                    bad.append(f"{module}:{line} -> {target} (collect stays below the decision engine)")
                continue
            mine, theirs = _layer(module), _layer(target)
            if target.startswith(COLLECT) and not module.startswith(SCALE_OUT):
                bad.append(f"{module}:{line} -> {target} (only the CLI and scale-out drive collect)")
            elif mine is not None and theirs is not None and theirs > mine:
                bad.append(f"{module}:{line} -> {target} (layer {mine} imports layer {theirs})")
    return bad


def _files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    unplaced = [
        _module_name(p)
        for p in _files()
        if _layer(_module_name(p)) is None and not _module_name(p).startswith(COLLECT)
    ]
    assert unplaced == [], "give these modules a layer in tests/test_architecture.py"


def test_dependencies_point_down() -> None:
    assert upward_edges(_files()) == []


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    # the probe is a module of a stand-in package tree under tmp_path: nothing is written into src/
    bad = tmp_path / "mtpverdict" / "stats" / "_probe_upward.py"
    bad.parent.mkdir(parents=True)
    bad.write_text('"""Probe."""\nfrom mtpverdict.decide import decide\n')
    edges = upward_edges([bad], root=tmp_path)
    assert edges and "layer 1 imports layer 5" in edges[0]
    assert edges[0].startswith("mtpverdict.stats._probe_upward:2 -> mtpverdict.decide")


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(SRC)))
def test_every_module_opens_with_a_one_line_docstring(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc, f"{path} has no module docstring"
    assert doc.splitlines()[0].strip(), f"{path}: the docstring's first line says the module's role"
