"""Canonical JSON text and crash-safe file writes shared by every writer in the package."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

FILE_MODE = 0o644
FLOAT_SIGNIFICANT_DIGITS = 6  # decision files round floats so reruns give byte-identical text


def round_floats(value: Any, digits: int = FLOAT_SIGNIFICANT_DIGITS) -> Any:
    """Round every float in a JSON-like value to `digits` significant digits; NaN/inf become None."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.{digits}g}") if value != 0 else 0.0
    if isinstance(value, dict):
        return {str(k): round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [round_floats(v, digits) for v in value]
    return value


def canonical(value: Any, *, indent: int | None = 2) -> str:
    """Deterministic JSON: sorted keys, rounded floats, no NaN, UTF-8 text, trailing newline."""
    text = json.dumps(round_floats(value), sort_keys=True, indent=indent, ensure_ascii=False, allow_nan=False)
    return text + "\n"


# one encoder for every line: json.dumps with options builds a new encoder per call
_LINE_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def record_line(record: dict[str, Any]) -> str:
    """One records.jsonl line: compact, sorted keys, exact floats (no rounding of measurements)."""
    return _LINE_ENCODER.encode(record) + "\n"


def atomic_write(path: Path, text: str) -> None:
    """Write a whole file so that readers see the old or the new content, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600; results are meant to be shared and read
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
