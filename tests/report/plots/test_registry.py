"""The registry of plots: a half-added plot (no module, no `PLOT`, no registry line, no docs) fails loudly."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtpverdict.report.plots import PLOTS, PlotKind, base, kv, registry

from ...conftest import ROOT

PLOTS_DIR = ROOT / "src" / "mtpverdict" / "report" / "plots"
NOT_PLOTS = frozenset({"__init__", "base", "registry"})  # the package, the shared parts, the list
DOC = ROOT / "docs" / "report.md"


def registry_problems(plots: Sequence[PlotKind[Any]], modules: dict[str, str], doc: str) -> list[str]:
    """Every way the plots fall short of complete; empty when each module is registered and documented."""
    out = []
    registered = {kind.key for kind in plots}
    for name, source in sorted(modules.items()):
        tree = ast.parse(source)
        assigned = {
            target.id
            for node in tree.body
            for target in (node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)])
            if isinstance(target, ast.Name)
        }
        exposes = "PLOT" in assigned
        if not exposes:
            out.append(f"report/plots/{name}.py: exposes no PLOT")
        if not ast.get_docstring(tree):
            out.append(f"report/plots/{name}.py: no module docstring")
    keys = [kind.key for kind in plots]
    out += [f"{key}: registered twice" for key in sorted({k for k in keys if keys.count(k) > 1})]
    if len(registered) != len(plots) or len(plots) < len(modules):
        out.append(f"{len(modules)} plot modules but {len(plots)} registered plots: list each in PLOTS")
    for kind in plots:
        if not (kind.title and kind.caption and callable(kind.extract) and callable(kind.draw)):
            out.append(f"{kind.key}: a plot needs a title, a caption, an extraction and a drawing")
        if not re.fullmatch(r"[a-z][a-z0-9-]*", kind.key):
            out.append(f"{kind.key!r}: a file stem is lower-case letters, digits and dashes")
        if f"(`{kind.key}.png`" not in doc:
            out.append(f"{kind.key}: no bullet in docs/report.md naming `{kind.key}.png`")
    return out


def _modules(directory: Path) -> dict[str, str]:
    return {p.stem: p.read_text() for p in directory.glob("*.py") if p.stem not in NOT_PLOTS}


def test_every_plot_module_is_registered_and_documented() -> None:
    assert registry_problems(PLOTS, _modules(PLOTS_DIR), DOC.read_text(encoding="utf-8")) == []
    assert registry.PLOTS is PLOTS


def test_a_half_added_plot_fails() -> None:
    modules = _modules(PLOTS_DIR)
    doc = DOC.read_text(encoding="utf-8")
    # a module without its PLOT, or not in PLOTS
    modules["heatmap"] = '"""A heat map."""\n'
    problems = registry_problems(PLOTS, modules, doc)
    assert "report/plots/heatmap.py: exposes no PLOT" in problems
    assert any("registered plots: list each in PLOTS" in p for p in problems)
    # registered, but without its bullet in docs/report.md
    modules["heatmap"] = '"""A heat map."""\nPLOT = None\n'
    extra = PlotKind(
        key="heatmap", title="Heat map", caption="c", extract=lambda d, f: "none", draw=base.figure
    )
    problems = registry_problems((*PLOTS, extra), modules, doc)
    assert problems == ["heatmap: no bullet in docs/report.md naming `heatmap.png`"]
    # a key given twice
    assert "kv: registered twice" in registry_problems((*PLOTS, kv.PLOT), _modules(PLOTS_DIR), doc)
