"""collect --continues: a new campaign records the earlier one and the alpha its looks spent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..conftest import FIXTURES, run_cli
from .conftest import small_campaign


def test_a_new_campaign_records_the_campaign_it_continues_and_a_resume_keeps_it(
    tmp_path: Path, port: int
) -> None:
    earlier = tmp_path / "earlier"
    shutil.copytree(FIXTURES / "synthetic-null", earlier)
    (earlier / "decision.json").unlink(missing_ok=True)
    assert run_cli("decide", earlier, "-q").returncode == 0  # its one look spent alpha
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))
    out = tmp_path / "later"
    ran = run_cli("collect", campaign, "--out", out, "--continues", earlier)
    assert ran.returncode == 0, ran.output
    found = json.loads((out / "campaign.json").read_text())["continues"]
    assert found["campaign"] == "synthetic-null" and found["spent_alpha"] == 0.05 and found["looks"] == 1
    again = run_cli("collect", campaign, "--out", out, "--resume")  # keeps what it began with
    assert again.returncode == 0, again.output
    assert json.loads((out / "campaign.json").read_text())["continues"] == found


def test_a_collected_campaign_cannot_be_made_to_continue_another(tmp_path: Path, port: int) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))
    out = tmp_path / "results"
    assert run_cli("collect", campaign, "--out", out).returncode == 0
    ran = run_cli("collect", campaign, "--out", out, "--resume", "--continues", "old-campaign")
    assert ran.returncode == 2
    assert "was collected without --continues" in ran.stderr
