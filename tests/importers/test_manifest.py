"""Manifests and the arms they describe: a row describing no arm is refused naming the manifest and row."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtpverdict.errors import EngineTextError
from mtpverdict.importers import import_files, read_manifest

from .support import IMPORTS, run

GUIDELLM = IMPORTS / "guidellm-0.8.1"
AIPERF = IMPORTS / "aiperf-0.13.0"


def _toml(tmp_path: Path, second: str) -> Path:
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(
        f'[[boots]]\nfile = "{GUIDELLM / "off-boot1.json"}"\narm = "off"\nboot = 1\norder = 1\n\n'
        f'[[boots]]\nfile = "{GUIDELLM / "mtp3-boot1.json"}"\narm = "mtp3"\nboot = 1\norder = 2\n{second}'
    )
    return manifest


def test_a_candidate_row_without_k_names_the_manifest_and_its_table(tmp_path: Path) -> None:
    manifest = _toml(tmp_path, 'method = "mtp"\n')
    with pytest.raises(EngineTextError) as caught:  # the package's input error, not a ValueError
        import_files("guidellm", tmp_path / "r", read_manifest(manifest))
    [problem] = caught.value.problems
    assert (problem.source, problem.key) == (str(manifest), "boots[1].k")
    assert "a candidate arm needs k" in problem.message
    code, stdout, err = run("import", "guidellm", "--manifest", str(manifest), "--out", str(tmp_path / "r"))
    assert code == 2 and stdout == ""
    assert err.startswith(f"Error: {manifest}: boots[1].k: arm 'mtp3': a candidate arm needs k")


def test_one_arm_described_twice_names_the_later_row(tmp_path: Path) -> None:
    manifest = _toml(
        tmp_path,
        f'method = "mtp"\nk = 3\n\n[[boots]]\nfile = "{GUIDELLM / "mtp3-boot2.json"}"\narm = "mtp3"\n'
        'boot = 2\norder = 3\nmethod = "mtp"\nk = 2\n',
    )
    with pytest.raises(EngineTextError) as caught:
        import_files("guidellm", tmp_path / "r", read_manifest(manifest))
    [problem] = caught.value.problems
    assert (problem.source, problem.key) == (str(manifest), "boots[2].arm")
    assert "described twice" in problem.message


def test_a_csv_row_is_named_by_its_line(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(
        f"file,arm,boot,order,method,k\n{AIPERF / 'off-boot1'},off,1,1,,\n"
        f"{AIPERF / 'mtp3-boot1'},mtp3,1,2,mtp,\n"
    )
    with pytest.raises(EngineTextError) as caught:
        import_files("aiperf", tmp_path / "r", read_manifest(manifest))
    [problem] = caught.value.problems
    assert (problem.source, problem.line, problem.key) == (str(manifest), 3, "k")
    assert not (tmp_path / "r").exists()
