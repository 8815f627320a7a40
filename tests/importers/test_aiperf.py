"""`import aiperf`: real AIPerf 0.13.0 exports into request records, a decision under `imported`, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpverdict.errors import EngineTextError
from mtpverdict.formats.results import Method
from mtpverdict.importers import ArmSpec, Entry, import_files

from .support import IMPORTS, decide_imported, records, run

AIPERF = IMPORTS / "aiperf-0.13.0"


def _lines(boot: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (AIPERF / boot / "profile_export.jsonl").read_text().splitlines()]


def test_manifest_import_keeps_times_and_warmups(tmp_path: Path) -> None:
    out = tmp_path / "r"
    code, stdout, err = run("import", "aiperf", "--manifest", str(AIPERF / "manifest.csv"), "--out", str(out))
    assert code == 0, err
    assert "4 boot, 56 request" in stdout
    rows = [r for r in records(out) if r["kind"] == "request" and r["arm"] == "off" and r["boot"] == 1]
    source = _lines("off-boot1")
    assert len(rows) == len(source) == 14
    assert sum(r["warmup"] for r in rows) == 2
    assert {r["concurrency"] for r in rows} == {2}  # from the summary's profiling phase
    by_line = {int(r["note"].rsplit(" ", 1)[1]): r for r in rows}
    line, obj = 3, source[2]
    meta, metrics = obj["metadata"], obj["metrics"]
    assert isinstance(meta, dict) and isinstance(metrics, dict)
    record = by_line[line]
    start = meta["request_start_ns"] / 1e9
    assert record["t_start"] == pytest.approx(start)
    assert record["t_first"] == pytest.approx(start + metrics["time_to_first_token"]["value"] / 1000)
    assert record["t_end"] == pytest.approx(start + metrics["request_latency"]["value"] / 1000)
    assert record["completion_tokens"] == metrics["output_sequence_length"]["value"]
    boots = sorted((r["order"], r["arm"]) for r in records(out) if r["kind"] == "boot")
    assert boots == [(1, "off"), (2, "mtp3"), (3, "off"), (4, "mtp3")]


def test_imported_policy_reaches_a_decision(tmp_path: Path) -> None:
    out = tmp_path / "r"
    code, _, err = run("import", "aiperf", "--manifest", str(AIPERF / "manifest.csv"), "--out", str(out))
    assert code == 0, err
    decision = decide_imported(out)
    candidate = next(a for a in decision["arms"] if a["name"] == "mtp3")
    rules = {r["kind"]: r for r in candidate["rules"]}
    assert rules["stable_acceptance"]["status"] == "missing" and rules["stable_acceptance"]["passed"] is True
    assert rules["coherence"]["severity"] == "warn"
    assert any("stable_acceptance without evidence" in reason for reason in decision["reasons"])


def test_reimport_is_a_no_op_and_another_file_for_the_boot_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r"
    entry = Entry(AIPERF / "off-boot1", ArmSpec("off", 1))
    import_files("aiperf", out, [entry])
    before = (out / "records.jsonl").read_bytes()
    again = import_files("aiperf", out, [entry])
    assert again.written == () and (out / "records.jsonl").read_bytes() == before
    with pytest.raises(Exception, match="already recorded from another file"):
        import_files("aiperf", out, [Entry(AIPERF / "off-boot2", ArmSpec("off", 1))])


def test_summary_alone_becomes_summary_records(tmp_path: Path) -> None:
    out = tmp_path / "r"
    summary = AIPERF / "mtp3-boot1" / "profile_export_aiperf.json"
    report = import_files("aiperf", out, [Entry(summary, ArmSpec("mtp3", 1, method=Method.MTP, k=3))])
    assert dict(report.written) == {"boot": 1, "summary": 3}
    data = json.loads(summary.read_text())
    decode = next(r for r in records(out) if r.get("metric") == "decode_tps")
    assert decode["median"] == pytest.approx(1000 / data["inter_token_latency"]["p50"])
    assert decode["n"] == 12


def test_jsonl_without_summary_needs_the_concurrency(tmp_path: Path) -> None:
    lone = tmp_path / "profile_export.jsonl"
    lone.write_bytes((AIPERF / "off-boot1" / "profile_export.jsonl").read_bytes())
    with pytest.raises(EngineTextError, match="pass the concurrency"):
        import_files("aiperf", tmp_path / "r", [Entry(lone, ArmSpec("off", 1))])
    report = import_files("aiperf", tmp_path / "r", [Entry(lone, ArmSpec("off", 1, concurrency=2))])
    assert dict(report.written)["request"] == 14


def test_every_bad_line_is_its_own_problem(tmp_path: Path) -> None:
    lines = (AIPERF / "off-boot1" / "profile_export.jsonl").read_text().splitlines()
    broken = json.loads(lines[3])
    broken["metadata"]["benchmark_phase"] = "cooldown"
    broken["metrics"]["request_latency"] = {"value": "slow", "unit": "ms"}
    lines[3] = json.dumps(broken)
    lines[5] = "{not json"
    bad = tmp_path / "profile_export.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(EngineTextError) as info:
        import_files("aiperf", tmp_path / "r", [Entry(bad, ArmSpec("off", 1, concurrency=2))])
    shown = [str(p) for p in info.value.problems]
    assert len(shown) == 3
    assert shown[0].startswith(f"{bad}:4: metadata.benchmark_phase: is 'cooldown'")
    assert shown[1].startswith(f"{bad}:4: metrics.request_latency: must be")
    assert shown[2].startswith(f"{bad}:6: not valid JSON")
    assert not (tmp_path / "r" / "records.jsonl").exists()


def test_rate_phase_is_refused_without_a_concurrency(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "profile_export.jsonl").write_bytes(
        (AIPERF / "off-boot1" / "profile_export.jsonl").read_bytes()
    )
    summary = json.loads((AIPERF / "off-boot1" / "profile_export_aiperf.json").read_text())
    for phase in summary["input_config"]["phases"]:
        phase["type"] = "request_rate"
    (folder / "profile_export_aiperf.json").write_text(json.dumps(summary))
    code, _, err = run("import", "aiperf", str(folder), "--arm", "off", "--out", str(tmp_path / "r"))
    assert code == 2 and "input_config.phases: the profiling phase is not one fixed-concurrency phase" in err


def test_not_an_aiperf_summary(tmp_path: Path) -> None:
    bad = tmp_path / "profile_export_aiperf.json"
    bad.write_text('{"completed": 3}')
    code, _, err = run("import", "aiperf", str(bad), "--arm", "off", "--out", str(tmp_path / "r"))
    assert code == 2 and "does not look like an AIPerf profile_export_aiperf.json" in err


def test_a_concurrency_contradicting_the_profiling_phase_is_refused(tmp_path: Path) -> None:
    jsonl = AIPERF / "off-boot1" / "profile_export.jsonl"
    with pytest.raises(EngineTextError, match="ran at concurrency 2 but the concurrency given is 5"):
        import_files("aiperf", tmp_path / "r", [Entry(jsonl, ArmSpec("off", 1, concurrency=5))])
    assert not (tmp_path / "r" / "records.jsonl").exists()
    report = import_files("aiperf", tmp_path / "r", [Entry(jsonl, ArmSpec("off", 1, concurrency=2))])
    assert dict(report.written)["request"] > 0


def test_a_non_streamed_export_is_refused_with_one_error(tmp_path: Path) -> None:
    # a non-streamed profile records no first token: its requests are not failures, they are untimed
    lines = _lines("off-boot1")
    for obj in lines:
        metrics = obj["metrics"]
        assert isinstance(metrics, dict)
        metrics.pop("time_to_first_token")
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines))
    with pytest.raises(EngineTextError) as info:
        import_files("aiperf", tmp_path / "r", [Entry(path, ArmSpec("off", 1, concurrency=2))])
    (problem,) = info.value.problems
    assert str(problem).startswith(f"{path}:1: metrics.time_to_first_token: {len(lines)} request(s)")
    assert "--streaming" in str(problem)
    assert not (tmp_path / "r" / "records.jsonl").exists()


@pytest.mark.parametrize(
    ("change", "key"),
    [({"input_config": "a string"}, "input_config"), ({"models": ["m"]}, "input_config.models")],
)
def test_a_summary_of_another_shape_is_named_by_key(
    tmp_path: Path, change: dict[str, object], key: str
) -> None:
    summary = json.loads((AIPERF / "off-boot1" / "profile_export_aiperf.json").read_text())
    if "models" in change:
        summary["input_config"]["models"] = change["models"]
    else:
        summary.update(change)
    bad = tmp_path / "profile_export_aiperf.json"
    bad.write_text(json.dumps(summary))
    code, _, err = run("import", "aiperf", str(bad), "--arm", "off", "--out", str(tmp_path / "r"))
    assert code == 2 and f"{bad}: {key}: must be an object" in err and "Traceback" not in err
