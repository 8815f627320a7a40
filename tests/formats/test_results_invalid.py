"""Malformed results are rejected with one precise message each: file, line, key, how to fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mtpverdict.errors import ResultsError
from mtpverdict.formats.results_io import load_results

from ..conftest import DATA

INVALID = DATA / "invalid"

# file -> (line or None, key or None, a fragment of the message)
RECORD_CASES: dict[str, tuple[int | None, str | None, str]] = {
    "truncated": (2, None, "not valid JSON"),
    "wrong_type": (1, "boot", "must be an integer, got str"),
    "nan": (1, None, "NaN is not a number in JSON"),
    "infinity": (1, None, "Infinity is not a number in JSON"),
    "negative_time": (1, "t_start", "must be >= 0"),
    "inverted_times": (1, "t_end", "is before t_first"),
    "first_before_start": (1, "t_first", "is before t_start"),
    "duplicate": (2, None, "duplicate request record"),
    "unknown_arm": (1, "arm", "'k9' is not in campaign.json"),
    "unknown_kind": (1, "kind", "unknown kind 'latency'"),
    "unknown_key": (1, "latency_ms", "unknown key"),
    "missing_key": (1, "t_end", "missing"),
    "invalid_utf8": (1, None, "not valid UTF-8"),
    "not_object": (1, None, "must be a JSON object"),
    "empty_line": (2, None, "empty line"),
    "accepted_exceeds_drafted": (1, "accepted_tokens", "exceeds draft_tokens"),
    "per_position_sum": (1, "accepted_per_position", "sums to 18, not accepted_tokens 15"),
    "bad_hash": (1, "output_sha256", "does not match"),
    "failed_boot_without_error": (1, "error", "must say why the boot failed"),
    "ok_without_tokens": (1, "completion_tokens", "must be set when status is ok"),
    "stream_out_of_range": (1, "stream", "must be below concurrency 2"),
    "raw_path_escape": (1, "raw", "must be a relative path under raw/"),
    "unknown_workload": (1, "workload", "'code' is not in campaign.json"),
    "rate_out_of_range": (1, "per_position_rate[0]", "must be <= 1"),
    "duplicate_boot_order": (2, "order", "boot order 1 is already used by off_A boot 1"),
    "bool_as_int": (1, "concurrency", "must be an integer, got bool"),
    "error_without_message": (1, "error", "must say what failed"),
    "summary_min_above_median": (1, "min", "exceeds median"),
    "acceptance_without_numbers": (1, None, "needs draft_tokens and accepted_tokens"),
    "scoped_run_without_rep": (1, "rep", "must be set when scoped is run"),
    "bad_enum": (1, "source", "must be one of metrics, log, response, report"),
}

CAMPAIGN_CASES: dict[str, tuple[str | None, str]] = {
    "no_control": ("arms", "no control arm"),
    "unknown_format": ("format", "must be one of mtpverdict.results/1"),
    "duplicate_arm": ("arms", "arm name 'off_A' appears twice"),
    "control_with_speculation": ("arms[0].spec", "a control arm must run with speculation off"),
    "candidate_without_method": ("arms[1].spec", "a candidate arm needs a speculative method"),
    "not_json": (None, "not valid JSON"),
    "empty_arms": ("arms", "no arms"),
    "unknown_key": ("owner", "unknown key"),
    "family_without_control": ("arms", "family 'other' has candidates but no control arm"),
    "unknown_method": ("arms[1].spec.method", "must be one of mtp, ngram"),
    "shared_order": ("arms", "two arms share order 1"),
    "window_zero": ("window_tokens", "must be >= 1"),
}


def test_the_corpus_is_complete() -> None:
    assert {p.stem for p in (INVALID / "records").iterdir()} == set(RECORD_CASES)
    assert {p.stem for p in (INVALID / "campaigns").iterdir()} == set(CAMPAIGN_CASES)
    assert len(RECORD_CASES) + len(CAMPAIGN_CASES) >= 40


@pytest.mark.parametrize("case", sorted(RECORD_CASES))
def test_malformed_records_are_rejected_precisely(case: str, tmp_path: Path) -> None:
    shutil.copy(INVALID / "campaign.json", tmp_path / "campaign.json")
    shutil.copy(INVALID / "records" / f"{case}.jsonl", tmp_path / "records.jsonl")
    line, key, fragment = RECORD_CASES[case]
    with pytest.raises(ResultsError) as info:
        load_results(tmp_path)
    problem = info.value.problems[0]
    assert problem.source.endswith("records.jsonl")
    assert problem.line == line
    assert problem.key == key
    assert fragment in problem.message
    text = str(problem)
    assert text.startswith(f"{tmp_path / 'records.jsonl'}:{line}") and "\n" not in text


@pytest.mark.parametrize("case", sorted(CAMPAIGN_CASES))
def test_malformed_campaigns_are_rejected_precisely(case: str, tmp_path: Path) -> None:
    shutil.copy(INVALID / "campaigns" / f"{case}.json", tmp_path / "campaign.json")
    (tmp_path / "records.jsonl").write_text("")
    key, fragment = CAMPAIGN_CASES[case]
    with pytest.raises(ResultsError) as info:
        load_results(tmp_path)
    messages = [(p.key, p.message) for p in info.value.problems]
    assert any(k == key and fragment in m for k, m in messages), messages
    assert all(p.source.endswith("campaign.json") for p in info.value.problems)


def test_an_oversized_line_is_skipped_unread_and_reported(tmp_path: Path) -> None:
    shutil.copy(INVALID / "campaign.json", tmp_path / "campaign.json")
    good = (INVALID / "records" / "duplicate.jsonl").read_text().splitlines()[0]
    with (tmp_path / "records.jsonl").open("w") as fh:
        fh.write(good + "\n")
        fh.write('{"kind": "request", "note": "' + "x" * (3 << 20) + '"}\n')
    with pytest.raises(ResultsError) as info:
        load_results(tmp_path)
    assert [(p.line, "longer than" in p.message) for p in info.value.problems] == [(2, True)]


def test_every_problem_is_counted_not_just_the_first(tmp_path: Path) -> None:
    shutil.copy(INVALID / "campaign.json", tmp_path / "campaign.json")
    (tmp_path / "records.jsonl").write_text("[]\n" * 500)
    with pytest.raises(ResultsError) as info:
        load_results(tmp_path)
    assert info.value.total == 500 and len(info.value.problems) == 200


def test_missing_files_say_what_a_results_directory_holds(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="needs campaign.json"):
        load_results(tmp_path)
    shutil.copy(INVALID / "campaign.json", tmp_path / "campaign.json")
    with pytest.raises(ResultsError, match="one JSON record per line"):
        load_results(tmp_path)
    with pytest.raises(ResultsError, match="not a directory"):
        load_results(tmp_path / "nope")


def test_a_json_syntax_error_names_its_line(tmp_path: Path) -> None:
    """campaign.json and a decision file are whole-file JSON: a syntax error says on which line."""
    from mtpverdict.errors import InputError
    from mtpverdict.formats.decision import parse_decision

    broken = '{\n  "format": "mtpverdict.results/1",\n  "id": ,\n}\n'
    (tmp_path / "campaign.json").write_text(broken)
    (tmp_path / "records.jsonl").write_text("")
    with pytest.raises(ResultsError) as info:
        load_results(tmp_path)
    (problem,) = info.value.problems
    assert problem.line == 3 and str(problem).startswith(f"{tmp_path / 'campaign.json'}:3: not valid JSON")
    with pytest.raises(InputError) as found:
        parse_decision(broken.replace("results/1", "decision/2"), "d.json")
    assert [p.line for p in found.value.problems] == [3]
