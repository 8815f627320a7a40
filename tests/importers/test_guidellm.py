"""`import guidellm`: real GuideLLM 0.8.1 benchmarks files (JSON and YAML), a decision, older generations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpverdict.errors import EngineTextError
from mtpverdict.formats.results import Method
from mtpverdict.importers import ArmSpec, Entry, import_files

from .support import IMPORTS, decide_imported, records, run

GUIDELLM = IMPORTS / "guidellm-0.8.1"
MTP3 = ArmSpec("mtp3", 2, method=Method.MTP, k=3)


def test_manifest_import_keeps_times_texts_and_order(tmp_path: Path) -> None:
    out = tmp_path / "r"
    code, stdout, err = run(
        "import", "guidellm", "--manifest", str(GUIDELLM / "manifest.toml"), "--out", str(out)
    )
    assert code == 0, err
    assert "4 boot, 48 request" in stdout
    bench = json.loads((GUIDELLM / "off-boot1.json").read_text())["benchmarks"][0]
    first = bench["requests"]["successful"][0]
    timings = first["info"]["timings"]
    rows = [r for r in records(out) if r["kind"] == "request" and r["arm"] == "off" and r["boot"] == 1]
    record = next(r for r in rows if r["note"].endswith("benchmark 0 request 0"))
    assert record["t_start"] == pytest.approx(timings["request_start"])
    assert record["t_first"] == pytest.approx(timings["first_token_iteration"])
    assert record["t_end"] == pytest.approx(timings["last_token_iteration"])
    assert (
        record["completion_tokens"] == first["output_tokens"]
        and record["chunks"] == timings["token_iterations"]
    )
    assert {r["concurrency"] for r in rows} == {bench["config"]["strategy"]["streams"]}
    boots = sorted((r["order"], r["arm"]) for r in records(out) if r["kind"] == "boot")
    assert boots == [(1, "off"), (2, "mtp3"), (3, "off"), (4, "mtp3")]


def test_yaml_and_json_of_one_run_give_the_same_records(tmp_path: Path) -> None:
    import_files("guidellm", tmp_path / "j", [Entry(GUIDELLM / "mtp3-boot2.json", MTP3)])
    import_files("guidellm", tmp_path / "y", [Entry(GUIDELLM / "mtp3-boot2.yaml", MTP3)])

    def timing(out: Path) -> list[tuple[object, ...]]:
        keys = ("rep", "stream", "t_start", "t_first", "t_end", "completion_tokens", "output_sha256")
        return [tuple(r[k] for k in keys) for r in records(out) if r["kind"] == "request"]

    assert timing(tmp_path / "j") == timing(tmp_path / "y")


def test_imported_policy_reaches_a_decision(tmp_path: Path) -> None:
    out = tmp_path / "r"
    code, _, err = run("import", "guidellm", "--manifest", str(GUIDELLM / "manifest.toml"), "--out", str(out))
    assert code == 0, err
    decision = decide_imported(out)
    candidate = next(a for a in decision["arms"] if a["name"] == "mtp3")
    rules = {r["kind"]: r for r in candidate["rules"]}
    assert rules["coherence"]["severity"] == "warn" and rules["identity"]["severity"] == "warn"
    assert any("the control itself gave" in reason for reason in decision["reasons"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(args=d.pop("config")), "a GuideLLM 0.5/0.6 (metadata, args) benchmarks file"),
        (
            lambda d: [d.pop("config"), d.pop("metadata")],
            "a GuideLLM 0.2/0.3 (benchmarks only) benchmarks file",
        ),
        (lambda d: d.pop("benchmarks"), "benchmarks: does not look like a GuideLLM benchmarks file"),
    ],
)
def test_generations_not_read_are_refused_by_name(tmp_path: Path, change: object, message: str) -> None:
    doc = json.loads((GUIDELLM / "off-boot1.json").read_text())
    change(doc)  # type: ignore[operator]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(EngineTextError, match=message.replace("(", r"\(").replace(")", r"\)")):
        import_files("guidellm", tmp_path / "r", [Entry(path, ArmSpec("off", 1))])


def test_rate_strategy_and_bad_requests_are_each_one_problem(tmp_path: Path) -> None:
    doc = json.loads((GUIDELLM / "off-boot1.json").read_text())
    bench = doc["benchmarks"][0]
    bench["config"]["strategy"]["type_"] = "constant"
    del bench["requests"]["successful"][1]["info"]["timings"]["request_start"]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(EngineTextError) as info:
        import_files("guidellm", tmp_path / "r", [Entry(path, ArmSpec("off", 1))])
    shown = [str(p) for p in info.value.problems]
    assert shown == [
        f"{path}: benchmarks[0].requests.successful[1].info.timings.request_start: missing or not a time "
        "in seconds",
        f"{path}: benchmarks[0].config.strategy.type_: strategy 'constant' has no fixed concurrency (only "
        "synchronous and concurrent map to a cell); pass the concurrency the requests ran at",
    ]
    report = import_files(  # the concurrency the file ran at may be given as well
        "guidellm", tmp_path / "r2", [Entry(GUIDELLM / "off-boot1.json", ArmSpec("off", 1, concurrency=2))]
    )
    assert dict(report.written)["request"] == 12


def test_a_concurrency_contradicting_the_strategy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EngineTextError) as info:
        import_files(
            "guidellm", tmp_path / "r", [Entry(GUIDELLM / "off-boot1.json", ArmSpec("off", 1, concurrency=4))]
        )
    assert [str(p) for p in info.value.problems] == [
        f"{GUIDELLM / 'off-boot1.json'}: benchmarks[0].config.strategy: strategy 'concurrent' ran at "
        "concurrency 2 but the concurrency given is 4; leave it out or give the file's"
    ]
    assert not (tmp_path / "r" / "records.jsonl").exists()


def test_yaml_aliases_are_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "benchmarks.yaml"
    bomb.write_text("a: &x [1, 2]\nb: [*x, *x]\nbenchmarks: []\n")
    code, _, err = run("import", "guidellm", str(bomb), "--arm", "off", "--out", str(tmp_path / "r"))
    assert code == 2 and "YAML anchor" in err


def test_two_files_of_one_boot_share_its_boot_record(tmp_path: Path) -> None:
    out = tmp_path / "r"
    import_files("guidellm", out, [Entry(GUIDELLM / "off-boot1.json", ArmSpec("off", 1))])
    doc = json.loads((GUIDELLM / "off-boot2.json").read_text())
    doc["benchmarks"][0]["config"]["strategy"]["type_"] = "constant"  # a rate run: its concurrency given
    second = tmp_path / "rate.json"
    second.write_text(json.dumps(doc))
    report = import_files("guidellm", out, [Entry(second, ArmSpec("off", 1, concurrency=3))])
    assert dict(report.written) == {"request": 12}
    assert sorted({r["concurrency"] for r in records(out) if r["kind"] == "request"}) == [2, 3]


def test_two_benchmarks_at_one_concurrency_are_named(tmp_path: Path) -> None:
    doc = json.loads((GUIDELLM / "off-boot1.json").read_text())
    doc["benchmarks"] = [doc["benchmarks"][0], doc["benchmarks"][0]]
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    for given in (None, 2):
        with pytest.raises(EngineTextError) as info:
            import_files("guidellm", tmp_path / "r", [Entry(path, ArmSpec("off", 1, concurrency=given))])
        assert [str(p) for p in info.value.problems] == [
            f"{path}: benchmarks[1]: maps to concurrency 2 as benchmarks[0] does; a boot holds one benchmark "
            "per concurrency: import the file's benchmarks as separate boots"
        ]
