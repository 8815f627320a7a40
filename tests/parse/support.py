"""Shared paths and comparison helpers for the engine-text parser tests."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data"
ENGINE_CASES = DATA / "engine"
RECORDED = DATA / "recorded"
FLOAT_TOLERANCE = 1e-9


def assert_same(actual: Any, expected: Any, where: str = "$") -> None:
    """Deep equality with float tolerance; warnings compare by substring (see test_cases)."""
    if isinstance(expected, float) or isinstance(actual, float):
        assert isinstance(actual, int | float) and isinstance(expected, int | float), f"{where}: {actual!r}"
        assert math.isclose(actual, expected, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE), (
            f"{where}: {actual!r} != {expected!r}"
        )
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r} is not an object"
        assert sorted(actual) == sorted(expected), f"{where}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}.{key}")
        return
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: {actual!r} is not a list"
        assert len(actual) == len(expected), f"{where}: {len(actual)} items != {len(expected)}: {actual!r}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{i}]")
        return
    assert actual == expected, f"{where}: {actual!r} != {expected!r}"
