"""Every bundled fixture validates, and the scripts that made them reproduce them byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mtpverdict.formats.results_io import load_results

from .conftest import FIXTURES

FIXTURE_DIRS = sorted(p for p in FIXTURES.iterdir() if (p / "campaign.json").exists())


def test_every_fixture_is_listed() -> None:
    names = {p.name for p in FIXTURE_DIRS}
    assert {"thor-qwen36-35b-a3b", "arc-b70-qwen36", "flash-next-blackwell"} <= names
    assert {f"synthetic-{s}" for s in ("clean-win", "null", "void-arm", "drift", "blind")} <= names


@pytest.mark.parametrize("directory", FIXTURE_DIRS, ids=lambda p: p.name)
def test_fixture_validates_and_has_readme(directory: Path) -> None:
    results = load_results(directory)
    assert results.campaign.id
    assert (directory / "README.md").read_text().strip()
    if directory.name.startswith("synthetic-"):
        assert results.campaign.synthetic
        assert "SYNTHETIC" in (directory / "README.md").read_text()
    else:
        assert not results.campaign.synthetic


@pytest.mark.parametrize("script", ["transcribe.py", "synthesize.py"])
@pytest.mark.slow
def test_fixture_scripts_reproduce_the_committed_bytes(script: str, tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(FIXTURES / script), "--out", str(tmp_path)], check=True)
    made = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert made
    for directory in made:
        for name in ("campaign.json", "records.jsonl"):
            assert (directory / name).read_bytes() == (FIXTURES / directory.name / name).read_bytes(), (
                f"{directory.name}/{name} differs: regenerate with python fixtures/{script}"
            )


@pytest.mark.parametrize(
    "campaign",
    [
        FIXTURES / "flash-next-blackwell" / "campaign.toml",
        FIXTURES.parent / "collectors" / "vllm-cpu" / "campaign.toml",
        FIXTURES.parent / "collectors" / "vllm-cpu" / "schedule-campaign.toml",
        FIXTURES.parent / "collectors" / "vllm-cpu" / "datasets-campaign.toml",
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_shipped_campaign_files_are_valid(campaign: Path) -> None:
    from mtpverdict.collect import load_campaign_file

    plan = load_campaign_file(campaign)
    assert [a.name for a in plan.arms][0] == "off_A" and plan.arms[-1].name == "off_B"
    assert plan.arms[0].role == "control" and plan.arms[-1].role == "control"
    assert plan.undefined({}) != [] or plan.server.mode == "external"  # machine paths come from --var
