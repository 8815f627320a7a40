"""collect --continues: a new campaign records the earlier one and the alpha its looks spent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

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
    same = run_cli("collect", campaign, "--out", out, "--resume", "--continues", earlier)
    assert same.returncode == 0, same.output
    # before: a resume naming another campaign kept the first in silence, exit 0
    other = run_cli("collect", campaign, "--out", out, "--resume", "--continues", "another-campaign")
    assert other.returncode == 2, other.output
    assert (
        "continues campaign 'synthetic-null', and --continues names campaign 'another-campaign'"
        in other.stderr
    )
    assert json.loads((out / "campaign.json").read_text())["continues"] == found
    # another directory of the same campaign id (found in review: the ids alone matched)
    twin = tmp_path / "twin"
    shutil.copytree(FIXTURES / "synthetic-null", twin)
    (twin / "decision.json").unlink(missing_ok=True)
    assert run_cli("decide", twin, "-q").returncode == 0
    again = run_cli("collect", campaign, "--out", out, "--resume", "--continues", twin)
    assert again.returncode == 2 and "another directory of it" in again.stderr, again.output
    # the earlier directory moved away: the original command with --resume still resumes
    earlier.rename(tmp_path / "moved")
    moved = run_cli("collect", campaign, "--out", out, "--resume", "--continues", earlier)
    assert moved.returncode == 0, moved.output


def test_a_collected_campaign_cannot_be_made_to_continue_another(tmp_path: Path, port: int) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))
    out = tmp_path / "results"
    assert run_cli("collect", campaign, "--out", out).returncode == 0
    ran = run_cli("collect", campaign, "--out", out, "--resume", "--continues", "old-campaign")
    assert ran.returncode == 2
    assert "was collected without --continues" in ran.stderr


def _decided_earlier(tmp_path: Path, looks: int) -> Path:
    """synthetic-null decided once here, planned for `looks` looks (so alpha is left after it)."""
    earlier = tmp_path / "earlier"
    shutil.copytree(FIXTURES / "synthetic-null", earlier)
    (earlier / "decision.json").unlink(missing_ok=True)
    path = earlier / "campaign.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "sequential_looks": looks}, indent=1))
    assert run_cli("decide", earlier, "-q").returncode == 0
    return earlier


def test_continuing_a_campaign_twice_hands_over_what_it_left_once(tmp_path: Path, port: int) -> None:
    """Before: --continues wrote nothing into the earlier results, so two campaigns continuing it
    each carried the alpha it left (and it could still spend that itself): the false-promotion rate
    over them grew with every continuation."""
    from mtpverdict.decide import decide_directory
    from mtpverdict.formats.looks import read_looks

    earlier = _decided_earlier(tmp_path, 4)  # look 1 of 4 spent alpha / 4
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))
    first, second = tmp_path / "first", tmp_path / "second"
    assert run_cli("collect", campaign, "--out", first, "--continues", earlier).returncode == 0
    handed = json.loads((first / "campaign.json").read_text())
    assert [h.campaign for h in read_looks(earlier).handovers] == [handed["id"]]
    assert "handed_over" not in handed["continues"] and handed["continues"]["spent_alpha"] == 0.0125
    # the chain after the handover line: removing that line shows against it
    assert handed["continues"]["looks_chain"] == read_looks(earlier).head
    assert run_cli("collect", campaign, "--out", first, "--resume").returncode == 0
    assert len(read_looks(earlier).handovers) == 1  # a resume hands nothing over again
    # the earlier campaign's own next look (here under an edited policy) can no longer promote
    edited = tmp_path / "edited.toml"
    edited.write_text((Path(__file__).resolve().parents[2] / "rules" / "default.toml").read_text() + "#\n")
    run = decide_directory(earlier, edited)
    assert run.look is not None and run.look.look == 2 and run.look.alpha == 0.0
    assert any(f"remaining alpha went to {handed['id']}" in r for r in run.decision.reasons)
    other = tmp_path / "other.toml"
    other.write_text(small_campaign(port).replace('id = "', 'id = "other-', 1))
    assert run_cli("collect", other, "--out", second, "--continues", earlier).returncode == 0
    cont = json.loads((second / "campaign.json").read_text())["continues"]
    assert cont["handed_over"] == handed["id"]
    later = decide_directory(second, "default")
    assert later.look is not None and later.look.alpha == 0.0
    assert any("carries none, so no look on it can promote" in r for r in later.decision.reasons)


def test_a_continuation_that_cannot_record_its_handover_is_refused(
    tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An earlier results directory that cannot take the handover line (read-only, a full disk)
    refuses the new campaign before any of it is written: it would otherwise carry alpha the
    earlier campaign could still spend."""
    from mtpverdict.formats import looks

    earlier = _decided_earlier(tmp_path, 4)
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))

    def read_only(directory: object, obj: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(looks, "_append", read_only)
    ran = run_cli("collect", campaign, "--out", tmp_path / "later", "--continues", earlier)
    assert ran.returncode == 2, ran.output
    assert "cannot record that" in ran.stderr and "continues this campaign (Permission denied)" in ran.stderr
    assert "looks.jsonl" in ran.stderr
    assert not (tmp_path / "later" / "campaign.json").exists()


def test_the_same_campaign_file_collected_twice_hands_over_once(tmp_path: Path, port: int) -> None:
    """Before (found in review): the handover exempted a campaign of the same id, so one campaign
    file collected into two results directories, each continuing the same campaign, carried what
    it left twice."""
    earlier = _decided_earlier(tmp_path, 4)
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))
    for out in ("first", "second"):
        ran = run_cli("collect", campaign, "--out", tmp_path / out, "--continues", earlier)
        assert ran.returncode == 0, ran.output
    first = json.loads((tmp_path / "first" / "campaign.json").read_text())["continues"]
    second = json.loads((tmp_path / "second" / "campaign.json").read_text())["continues"]
    assert "handed_over" not in first
    assert second["handed_over"] == json.loads((tmp_path / "first" / "campaign.json").read_text())["id"]


def test_a_handover_holds_the_earlier_looks_file_while_it_reads_and_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before (found in review): two continuations begun at once both read 'no handover' and both
    appended one, each carrying what the earlier campaign left."""
    import fcntl

    from mtpverdict.formats import looks

    earlier = _decided_earlier(tmp_path, 4)
    held: list[bool] = []
    read = looks._continuation

    def while_reading(source: str, taker: str | None) -> tuple[dict[str, object], looks.LookLog | None]:
        with (earlier / "raw" / "looks.jsonl").open("a") as other:
            try:
                fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.append(False)
            except BlockingIOError:
                held.append(True)
        return read(source, taker)

    monkeypatch.setattr(looks, "_continuation", while_reading)
    looks.hand_over(str(earlier), "later", "results:/somewhere")
    assert held == [True]
    assert [h.taker for h in looks.read_looks(earlier).handovers] == ["results:/somewhere"]
    again = looks.hand_over(str(earlier), "other", "results:/elsewhere")
    assert again["handed_over"] == "later" and len(looks.read_looks(earlier).handovers) == 1


def test_a_results_path_used_again_is_a_new_continuation(tmp_path: Path, port: int) -> None:
    """Before (found in review): the handover was keyed on the new directory's path, so removing or
    moving the first continuation and collecting into the same path again carried the earlier
    campaign's alpha a second time. A start writes its own token before it hands over."""
    earlier = _decided_earlier(tmp_path, 4)
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))
    out = tmp_path / "later"
    assert run_cli("collect", campaign, "--out", out, "--continues", earlier).returncode == 0
    assert "handed_over" not in json.loads((out / "campaign.json").read_text())["continues"]
    shutil.move(out, tmp_path / "moved")
    assert run_cli("collect", campaign, "--out", out, "--continues", earlier).returncode == 0
    assert "handed_over" in json.loads((out / "campaign.json").read_text())["continues"]


def test_a_start_that_failed_before_its_campaign_json_takes_its_own_handover_again(tmp_path: Path) -> None:
    """A collect refused or killed after the handover line and before campaign.json: the retry into
    the same directory finds its token and is the same start (it carries what was left, once)."""
    from mtpverdict.collect.runner import _start_token
    from mtpverdict.formats import looks

    earlier = _decided_earlier(tmp_path, 4)
    new = tmp_path / "later"
    taker = f"results:{new.resolve()}:{_start_token(new)}"
    first = looks.hand_over(str(earlier), "small", taker)
    retry = looks.hand_over(str(earlier), "small", f"results:{new.resolve()}:{_start_token(new)}")
    assert "handed_over" not in first and "handed_over" not in retry
    assert len(looks.read_looks(earlier).handovers) == 1


def test_a_dry_run_refuses_a_continuation_the_real_run_refuses(tmp_path: Path, port: int) -> None:
    """Before (found in review): --dry-run did not pass --continues to the checks, so it accepted
    --resume --continues on a campaign collected without it, which the real run refuses."""
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(small_campaign(port))
    out = tmp_path / "results"
    assert run_cli("collect", campaign, "--out", out).returncode == 0
    ran = run_cli("collect", campaign, "--out", out, "--resume", "--continues", "old", "--dry-run")
    assert ran.returncode == 2 and "was collected without --continues" in ran.stderr
