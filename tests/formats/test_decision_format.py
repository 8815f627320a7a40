"""The decision format's name is spelt once, as formats/decision.py's DECISION_FORMAT, and decide uses it."""

from __future__ import annotations

import ast
import re

from mtpverdict.formats.decision import DECISION_FORMAT

from ..conftest import ROOT

SRC = ROOT / "src" / "mtpverdict"
FORMAT_NAME = re.compile(r"mtpverdict\.decision/\d+")
OWNER = SRC / "formats" / "decision.py"


def test_no_module_but_the_formats_owner_spells_the_decision_format() -> None:
    spelt = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in sorted(SRC.rglob("*.py"))
        if path != OWNER
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and FORMAT_NAME.fullmatch(node.value)
    ]
    assert spelt == [], f"use formats.decision.DECISION_FORMAT instead of the literal at {spelt}"
    assert FORMAT_NAME.fullmatch(DECISION_FORMAT)
