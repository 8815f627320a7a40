"""Log ratios back to ratios and relative changes, where a log beyond the float range is infinity."""

from __future__ import annotations

import math
import sys

MAX_LOG = math.log(sys.float_info.max)  # about 709.78: exp and expm1 overflow past it


def ratio(log_value: float) -> float:
    """exp(log_value), infinite past the float range instead of raising OverflowError."""
    return math.inf if log_value > MAX_LOG else math.exp(log_value)


def change(log_value: float) -> float:
    """The relative change exp(log_value) - 1 (0.05 for +5%), infinite past the float range."""
    return math.inf if log_value > MAX_LOG else math.expm1(log_value)
