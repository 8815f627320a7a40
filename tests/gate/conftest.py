"""The gate's compose tests: a real Compose v2 resolver (or a skip, a failure where CI is set), and
the seat's evidence of docs/gate.md decided once per session."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mtpverdict.gate import GateEvidence, evidence_from

from ..conftest import DATA, FIXTURES

CASES = DATA / "gate"  # one directory per compose (or argv) case
WIN = FIXTURES / "synthetic-clean-win"  # promote k2 (mtp k=2) under the default policy
ENGINE = "0.32.0"
IMAGE = f"vllm/vllm-openai:v{ENGINE}"
K2 = '{"method":"mtp","num_speculative_tokens":2}'


def seat_evidence(
    where: Path,
    version: str = ENGINE,
    image: str = IMAGE,
    edit: Callable[[dict[str, object]], None] | None = None,
) -> Path:
    """The clean-win campaign as the seat's evidence: its scope names the image, every boot the
    engine version; `edit` changes boot records."""
    shutil.copytree(WIN, where)
    lines = []
    for line in (where / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "boot":
            record["engine_version"] = version
            if edit is not None:
                edit(record)
        lines.append(json.dumps(record, sort_keys=True, separators=(",", ":")))
    (where / "records.jsonl").write_text("\n".join(lines) + "\n")
    campaign = json.loads((where / "campaign.json").read_text())
    campaign["scope"]["engine_version"] = image
    (where / "campaign.json").write_text(json.dumps(campaign, indent=2, sort_keys=True) + "\n")
    return where


def decided(results: Path) -> GateEvidence:
    from mtpverdict.decide import decide_directory

    run = decide_directory(results, None)
    return evidence_from(run.decision, run.results)


@pytest.fixture(scope="session")
def seat(tmp_path_factory: pytest.TempPathFactory) -> GateEvidence:
    """The seat's evidence, decided: promote k2 on vllm/vllm-openai:v0.32.0."""
    return decided(seat_evidence(tmp_path_factory.mktemp("seat") / "evidence"))
