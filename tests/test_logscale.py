"""Log ratios as ratios and percentages: a floor beyond the float range prints, it does not crash."""

from __future__ import annotations

import math

import pytest

from mtpverdict._logscale import MAX_LOG, change, ratio
from mtpverdict._text import pct


def test_ordinary_logs_are_exp_and_expm1() -> None:
    assert ratio(math.log(1.05)) == pytest.approx(1.05)
    assert change(math.log(1.05)) == pytest.approx(0.05)
    assert pct(math.log(1.05)) == "+5.0%" and pct(math.log(0.9)) == "-10.0%"


@pytest.mark.parametrize("log_value", [MAX_LOG + 1e-9, 1000.0, 1e300, math.inf])
def test_a_log_past_the_float_range_is_infinite(log_value: float) -> None:
    """A floor of Holm's first step over 10,000 arms at one degree of freedom is about e^1270."""
    assert ratio(log_value) == math.inf and change(log_value) == math.inf
    assert pct(log_value) == "+inf%"


def test_large_negative_logs_are_minus_one_hundred_percent() -> None:
    assert change(-1000.0) == -1.0 and pct(-1000.0) == "-100.0%"
