"""Shared paths and helpers of the importer tests: the vendored files and a CLI runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..conftest import run_cli

IMPORTS = Path(__file__).resolve().parents[1] / "data" / "imports"


def run(*args: str) -> tuple[int, str, str]:
    """Run the CLI; (exit code, stdout, stderr)."""
    result = run_cli(*args)
    return result.returncode, result.stdout, result.stderr


def records(out: Path) -> list[dict[str, Any]]:
    """The records of a results directory, in file order."""
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def decide_imported(out: Path) -> dict[str, Any]:
    """`mtpverdict decide OUT --rules imported`; the decision JSON it wrote."""
    code, _, err = run("decide", str(out), "--rules", "imported")
    assert code == 0, err
    decision: dict[str, Any] = json.loads((out / "decision.json").read_text())
    assert decision["policy"]["name"] == "imported"
    return decision
