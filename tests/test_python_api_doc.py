"""Every example in docs/python-api.md runs, from the repository root, as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from .conftest import ROOT

DOC = ROOT / "docs" / "python-api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("code", BLOCKS, ids=[f"example-{i + 1}" for i in range(len(BLOCKS))])
def test_the_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        exec(compile(code, str(DOC), "exec"), {"__name__": "__doc_example__"})  # noqa: S102
    finally:
        os.chdir(here)
    assert capsys.readouterr().out.strip()  # each example shows something
