"""Every recorded engine-text case parses to its hand-written expected JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpverdict.engines import registry
from mtpverdict.parse import parse_file, parse_text

from .support import ENGINE_CASES, assert_same

CASES = sorted(ENGINE_CASES.glob("*/*.txt"))
MIN_CASES = 30


def _expected(case: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        case.with_name(case.stem + ".expected.json").read_text(encoding="utf-8")
    )
    return data


def _check(actual: dict[str, object], expected: dict[str, object]) -> None:
    # Warnings are the parser's own sentences: the expected file holds a fragment of each, in order.
    warnings = actual.pop("warnings")
    wanted = expected.pop("warnings")
    assert isinstance(warnings, list) and isinstance(wanted, list)
    assert len(warnings) == len(wanted), f"warnings {warnings!r} != {wanted!r}"
    for got, fragment in zip(warnings, wanted, strict=True):
        assert fragment in got, f"{fragment!r} not in {got!r}"
    assert_same(actual, expected)


def test_enough_recorded_cases() -> None:
    assert len(CASES) >= MIN_CASES
    for engine in registry.ENGINES:  # every engine has its recorded cases
        assert any(case.parent.name == engine for case in CASES), engine


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_case_from_file(case: Path) -> None:
    _check(parse_file(case).to_json(), _expected(case))


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_case_from_text_with_engine_named(case: Path) -> None:
    """The same text given as a string, with its engine named, reads the same."""
    text = case.read_bytes().decode("utf-8", errors="replace")
    engine = case.parent.name
    assert engine in registry.ENGINES  # a case directory is one registered engine's
    _check(parse_text(text, engine).to_json(), _expected(case))
