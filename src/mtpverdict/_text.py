"""Formatting shared by every sentence the tool writes: percentages, numbers, cells."""

from __future__ import annotations

import math


def pct(log_ratio: float) -> str:
    """A log ratio as a signed percentage, e.g. +6.0%."""
    return f"{math.expm1(log_ratio) * 100:+.1f}%"


def fmt(value: float, unit: str = "") -> str:
    """A number with one decimal from 10 up, three significant digits below, and its unit."""
    text = f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return f"{text} {unit}".strip()


def cell_label(workload: str, concurrency: int) -> str:
    """A cell as sentences name it: `code c=4`."""
    return f"{workload} c={concurrency}"
