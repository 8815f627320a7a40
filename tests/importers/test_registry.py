"""Every registered importer has a command, a docs section, real files the tool wrote and its own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtpverdict.errors import InputError
from mtpverdict.importers import import_files
from mtpverdict.importers.interface import Importer
from mtpverdict.importers.registry import IMPORTERS

from .support import IMPORTS, run

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "imports.md"


def test_an_unknown_importer_name_is_bad_input_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no importer 'nope'; choose one of aiperf, guidellm, vllm-bench"):
        import_files("nope", tmp_path / "out", [])
    with pytest.raises(ValueError, match="no importer 'nope'"):  # what a caller caught before
        import_files("nope", tmp_path / "out", [])
    assert not (tmp_path / "out").exists()


def test_registry_is_keyed_by_name() -> None:
    assert sorted(IMPORTERS) == ["aiperf", "guidellm", "vllm-bench"]
    assert all(isinstance(imp, Importer) and imp.name == name for name, imp in IMPORTERS.items())


@pytest.mark.parametrize("name", sorted(IMPORTERS))
def test_importer_is_complete(name: str) -> None:
    importer = IMPORTERS[name]
    module = type(importer).__module__.rsplit(".", 1)[1]
    assert (ROOT / "tests" / "importers" / f"test_{module}.py").is_file(), (
        f"no tests/importers/test_{module}.py"
    )
    assert list(IMPORTS.glob(f"{name}-*/README.md")) or list(IMPORTS.glob(f"{name}-*")), (
        f"no files {name} wrote under tests/data/imports/"
    )
    assert f"## `mtpverdict import {name}`" in DOCS.read_text(), f"docs/imports.md has no section for {name}"
    code, out, _ = run("import", name, "--help")
    assert code == 0 and "--manifest" in out
