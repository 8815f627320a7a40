"""`vllm bench serve` results into results format v1: round trip, idempotence, void windows, errors."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.errors import EngineTextError, ResultsError
from mtpverdict.formats.results_io import load_results
from mtpverdict.importers import import_vllm_bench

from .support import DATA

BENCH = DATA / "vllm_bench"


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def _campaign(out: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / "campaign.json").read_text())
    return data


def test_round_trip_control_summary_and_candidate_requests(tmp_path: Path) -> None:
    out = tmp_path / "results"
    control = import_vllm_bench([BENCH / "off_summary.json"], arm="off_A", out=out)
    assert dict(control.written) == {"summary": 3}
    candidate = import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=out, method="mtp", k=3)
    assert dict(candidate.written) == {"acceptance": 1, "request": 4}
    loaded = load_results(out)
    arms = {a.name: a for a in loaded.campaign.arms}
    assert arms["off_A"].role == "control" and arms["off_A"].spec.off
    assert arms["k3"].role == "candidate" and (arms["k3"].spec.method, arms["k3"].spec.k) == ("mtp", 3)
    assert [a.order for a in loaded.campaign.arms] == [1, 2]

    summaries = loaded.summaries.set_index("metric")
    assert summaries.loc["decode_tps", "median"] == pytest.approx(1000.0 / 20.0)
    assert summaries.loc["ttft_ms", "median"] == pytest.approx(125.0)
    assert summaries.loc["aggregate_tps", "median"] == pytest.approx(102.4)
    assert summaries.loc["decode_tps", "n"] == 4 and summaries.loc["aggregate_tps", "n"] == 1
    assert set(summaries["concurrency"]) == {2}

    requests = loaded.requests
    assert list(zip(requests["rep"], requests["stream"], strict=True)) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    first = requests.iloc[0]
    assert first["t_start"] == pytest.approx(1000.0)
    assert first["t_first"] == pytest.approx(1000.12)
    assert first["t_end"] == pytest.approx(1000.12 + 21 * 0.03)
    assert (first["completion_tokens"], first["prompt_tokens"], first["chunks"]) == (64, 32, 22)
    assert first["output_sha256"] == hashlib.sha256(b"alpha beta gamma").hexdigest()
    failed = requests.iloc[3]
    assert failed["status"] == "error" and "ClientConnectorError" in failed["error"]
    assert failed["t_first"] is None or failed["t_first"] != failed["t_first"]  # None or NaN in the frame

    acceptance = loaded.acceptance.iloc[0]
    assert (acceptance["drafts"], acceptance["draft_tokens"], acceptance["accepted_tokens"]) == (60, 180, 120)
    assert acceptance["source"] == "metrics" and acceptance["scoped"] == "window"
    assert acceptance["mean_acceptance_length"] == pytest.approx(3.0)
    assert tuple(acceptance["per_position_rate"]) == pytest.approx((0.9, 0.65, 0.45))
    assert (out / acceptance["raw"]).is_file()
    assert loaded.campaign.scope.model == "tiny-llama"


def test_reimport_is_a_no_op(tmp_path: Path) -> None:
    out = tmp_path / "results"
    files = [BENCH / "off_summary.json"]
    import_vllm_bench(files, arm="off_A", out=out)
    import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=out, method="mtp", k=3)
    before = (out / "records.jsonl").read_bytes()
    campaign_before = (out / "campaign.json").read_bytes()
    again = import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=out)
    again_control = import_vllm_bench(files, arm="off_A", out=out, role="control")
    assert again.written == () and again.already_present == 5
    assert again_control.written == () and again_control.already_present == 3
    assert (out / "records.jsonl").read_bytes() == before
    assert (out / "campaign.json").read_bytes() == campaign_before
    load_results(out)


def test_interrupted_import_is_completed_not_duplicated(tmp_path: Path) -> None:
    out = tmp_path / "results"
    import_vllm_bench([BENCH / "off_summary.json"], arm="off_A", out=out)
    import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=out, method="mtp", k=3)
    lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
    kept = [line for line in lines if 'request 2"' not in line and 'request 3"' not in line]
    (out / "records.jsonl").write_text("".join(kept))
    report = import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=out)
    assert dict(report.written) == {"request": 2}
    assert sorted((r["rep"], r["stream"]) for r in _records(out) if r["kind"] == "request") == [
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]


def test_second_file_of_a_cell_continues_the_reps(tmp_path: Path) -> None:
    out = tmp_path / "results"
    import_vllm_bench([BENCH / "off_summary.json"], arm="off_A", out=out)
    second = tmp_path / "second.json"
    data = json.loads((BENCH / "k3_detailed.json").read_text())
    data["start_times"] = [t + 100 for t in data["start_times"]]
    second.write_text(json.dumps(data))
    import_vllm_bench([BENCH / "k3_detailed.json", second], arm="k3", out=out, method="mtp", k=3)
    reps = sorted({r["rep"] for r in _records(out) if r["kind"] == "request"})
    assert reps == [1, 2, 3, 4]
    assert len([r for r in _records(out) if r["kind"] == "acceptance"]) == 2
    load_results(out)


def test_no_start_times_gives_summaries_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "results"
    import_vllm_bench([BENCH / "off_summary.json"], arm="off_A", out=out)
    report = import_vllm_bench(
        [BENCH / "k3_detailed_no_start_times.json"], arm="k3", out=out, method="mtp", k=3
    )
    assert dict(report.written) == {"acceptance": 1, "summary": 3}
    assert any("without start_times" in w for w in report.warnings)
    summaries = [r for r in _records(out) if r["kind"] == "summary" and r["arm"] == "k3"]
    decode = next(r for r in summaries if r["metric"] == "decode_tps")
    assert decode["n"] == 3 and decode["median"] == pytest.approx(100.0)
    assert decode["distinct_outputs"] == 2  # two requests wrote the same text; the failed one is left out
    load_results(out)


def test_appended_results_are_separate_cells(tmp_path: Path) -> None:
    out = tmp_path / "results"
    report = import_vllm_bench([BENCH / "off_appended.json"], arm="off_A", out=out)
    assert report.runs == 2 and dict(report.written) == {"summary": 6}
    loaded = load_results(out)
    assert sorted(set(loaded.summaries["concurrency"])) == [1, 4]


def test_restart_during_the_run_is_a_void_window(tmp_path: Path) -> None:
    out = tmp_path / "results"
    import_vllm_bench([BENCH / "off_summary.json"], arm="off_A", out=out)
    import_vllm_bench([BENCH / "k3_restart.json"], arm="k3", out=out, method="mtp", k=3)
    loaded = load_results(out)
    row = loaded.acceptance.iloc[0]
    assert row["status"] == "void"
    assert "restarted" in row["error"]


def test_campaign_without_control_warns(tmp_path: Path) -> None:
    report = import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=tmp_path / "r", method="mtp", k=3)
    assert any("no control arm" in w for w in report.warnings)


def test_arm_clash_with_campaign_is_a_results_error(tmp_path: Path) -> None:
    out = tmp_path / "results"
    import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=out, method="mtp", k=3)
    with pytest.raises(ResultsError, match="already exists with k 3, not 5"):
        import_vllm_bench([BENCH / "k3_detailed.json"], arm="k3", out=out, k=5)


def test_missing_max_concurrency_needs_the_option(tmp_path: Path) -> None:
    data = json.loads((BENCH / "off_summary.json").read_text())
    data["max_concurrency"] = None
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    with pytest.raises(EngineTextError) as info:
        import_vllm_bench([path], arm="off_A", out=tmp_path / "r")
    assert str(info.value.problems[0]).startswith(f"{path}:1: max_concurrency: ")
    report = import_vllm_bench([path], arm="off_A", out=tmp_path / "r", concurrency=8)
    assert dict(report.written) == {"summary": 3}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"foo": 1}', "does not look like a `vllm bench serve --save-result` file"),
        ("", "empty"),
    ],
)
def test_bad_files_are_engine_text_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bench.json"
    path.write_text(content)
    with pytest.raises(EngineTextError, match=message):
        import_vllm_bench([path], arm="off_A", out=tmp_path / "r")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"arm": "bad name"}, ("--arm", "arm 'bad name'")),
        (
            {"arm": "k3", "role": "control", "method": "mtp", "k": 3},
            ("--method", "control arm runs with speculation off"),
        ),
        ({"arm": "k3", "role": "candidate"}, ("--method", "candidate arm needs a method")),
        ({"arm": "k3", "method": "mtp"}, ("--k", "candidate arm needs k")),
        ({"arm": "k3", "boot": 0}, ("--boot", "boot must be 1 or more")),
        ({"arm": "k3", "role": "leader"}, ("--role", "must be one of control, candidate")),
    ],
)
def test_bad_arguments_are_the_package_input_error_naming_the_option(
    tmp_path: Path, kwargs: dict[str, object], message: tuple[str, str]
) -> None:
    with pytest.raises(EngineTextError) as caught:
        import_vllm_bench([BENCH / "off_summary.json"], out=tmp_path / "r", **kwargs)  # type: ignore[arg-type]
    [problem] = caught.value.problems
    assert (problem.source, problem.key) == ("command line", message[0])
    assert message[1] in problem.message


def test_summary_cell_taken_by_another_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "results"
    import_vllm_bench([BENCH / "off_summary.json"], arm="off_A", out=out)
    other = tmp_path / "other.json"
    shutil.copy(BENCH / "off_summary.json", other)
    other.write_text(other.read_text().replace('"duration": 2.5', '"duration": 2.6'))
    with pytest.raises(EngineTextError, match="already recorded from another file"):
        import_vllm_bench([other], arm="off_A", out=out)
