"""`import vllm-bench --manifest`: many real bench files at once, their boot order, hashes and acceptance."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from mtpverdict.errors import CampaignError
from mtpverdict.formats.results_io import load_results
from mtpverdict.importers import read_manifest

from .support import IMPORTS, decide_imported, records, run

BENCH = IMPORTS / "vllm-bench-0.32.0"
MANIFEST = BENCH / "manifest.toml"


def _import(out: Path, manifest: Path = MANIFEST) -> str:
    code, stdout, err = run("import", "vllm-bench", "--manifest", str(manifest), "--out", str(out))
    assert code == 0, err
    return stdout


def test_manifest_keeps_the_boot_order(tmp_path: Path) -> None:
    out = tmp_path / "r"
    stdout = _import(out)
    assert "4 boot" in stdout and "48 request" in stdout and "2 acceptance" in stdout
    boots = sorted((r["order"], r["arm"], r["boot"]) for r in records(out) if r["kind"] == "boot")
    assert boots == [(1, "off", 1), (2, "mtp3", 1), (3, "off", 2), (4, "mtp3", 2)]
    loaded = load_results(out)
    assert [(a.name, a.order) for a in loaded.campaign.arms] == [("off", 1), ("mtp3", 2)]
    assert set(loaded.requests["boot"]) == {1, 2}


def test_manifest_rows_in_any_order_give_the_same_records(tmp_path: Path) -> None:
    shuffled = tmp_path / "manifest.toml"
    blocks = MANIFEST.read_text().split("[[boots]]")
    shuffled.write_text(
        "[[boots]]".join([blocks[0], *reversed(blocks[1:])]).replace('file = "', f'file = "{BENCH}/')
    )
    _import(tmp_path / "a")
    _import(tmp_path / "b", shuffled)
    assert sorted(map(json.dumps, records(tmp_path / "a"))) == sorted(
        map(json.dumps, records(tmp_path / "b"))
    )


def test_generated_texts_become_output_hashes(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _import(out)
    bench = json.loads((BENCH / "off-boot1.json").read_text())
    first = next(r for r in records(out) if r["kind"] == "request" and r["arm"] == "off" and r["boot"] == 1)
    index = int(first["note"].rsplit(" ", 1)[1])
    assert first["output_sha256"] == hashlib.sha256(bench["generated_texts"][index].encode()).hexdigest()


def test_spec_decode_fields_become_window_acceptance(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _import(out)
    bench = json.loads((BENCH / "mtp3-boot1.json").read_text())
    rows = [r for r in records(out) if r["kind"] == "acceptance"]
    assert {(r["arm"], r["boot"]) for r in rows} == {("mtp3", 1), ("mtp3", 2)}
    row = next(r for r in rows if r["boot"] == 1)
    assert (row["source"], row["scoped"], row["rep"]) == ("metrics", "window", None)
    assert row["accepted_tokens"] == bench["spec_decode_accepted_tokens"]
    assert row["draft_tokens"] == bench["spec_decode_draft_tokens"]


def test_reimporting_the_manifest_is_a_no_op(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _import(out)
    before = (out / "records.jsonl").read_bytes()
    stdout = _import(out)
    assert "no new records" in stdout and "54 already present" in stdout
    assert (out / "records.jsonl").read_bytes() == before


def test_imported_policy_reaches_a_decision(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _import(out)
    decision = decide_imported(out)
    assert decision["decision"] in ("promote", "inconclusive", "keep_mtp_disabled")
    candidate = next(a for a in decision["arms"] if a["name"] == "mtp3")
    coherence = next(r for r in candidate["rules"] if r["kind"] == "coherence")
    assert coherence["severity"] == "warn" and coherence["status"] == "missing"
    assert not any("coherence" in reason and "veto" in reason for reason in decision["reasons"])
    assert any("warning (coherence): no evidence recorded" in reason for reason in decision["reasons"])


def test_csv_manifest(tmp_path: Path) -> None:
    manifest = tmp_path / "m.csv"
    rows = ["file,arm,boot,order,method,k"]
    rows += [f"{BENCH}/off-boot1.json,off,1,1,,", f"{BENCH}/mtp3-boot1.json,mtp3,1,2,mtp,3"]
    manifest.write_text("\n".join(rows) + "\n")
    entries = read_manifest(manifest)
    assert [(e.spec.arm, e.spec.order, e.spec.k) for e in entries] == [("off", 1, None), ("mtp3", 2, 3)]


def test_manifest_problems_are_listed_together(tmp_path: Path) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text("file,arm,boot,order,colour\na.json,off,0,1,red\nb.json,on,1,x,\n")
    with pytest.raises(CampaignError) as info:
        read_manifest(manifest)
    shown = [str(p) for p in info.value.problems]
    assert f"{manifest}:2: colour: unknown column" in shown
    assert any(s.startswith(f"{manifest}:2: boot: must be an integer of 1 or more") for s in shown)
    assert any(s.startswith(f"{manifest}:3: order: must be an integer") for s in shown)
    code, _, err = run("import", "vllm-bench", "--manifest", str(manifest), "--out", str(tmp_path / "r"))
    assert code == 2 and "colour: unknown column" in err


def test_manifest_order_given_twice_is_refused(tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    text = MANIFEST.read_text().replace("order = 3", "order = 1").replace('file = "', f'file = "{BENCH}/')
    manifest.write_text(text)
    with pytest.raises(CampaignError, match="order 1 is given to off/1 already"):
        read_manifest(manifest)


def test_manifest_file_missing_is_one_error(tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    shutil.copy(MANIFEST, manifest)  # the files are relative to the manifest: none beside this copy
    code, _, err = run("import", "vllm-bench", "--manifest", str(manifest), "--out", str(tmp_path / "r"))
    assert code == 2 and "off-boot1.json" in err and "Traceback" not in err


def test_the_campaign_it_extends_is_read_typed_and_a_bad_one_is_named_by_key(tmp_path: Path) -> None:
    # the importer builds the typed Campaign: a campaign.json it continues is checked, key by key,
    # before anything is written (a bad arm used to be carried along into the directory)
    out = tmp_path / "r"
    out.mkdir()
    campaign = {
        "format": "mtpverdict.results/1",
        "id": "r",
        "title": "t",
        "scope": {"device": None, "engine": "vllm", "engine_version": None, "model": None, "claim": None},
        "arms": [
            {
                "name": "off_A",
                "role": "boss",
                "spec": {"method": None, "k": 0},
                "order": 1,
                "serve_argv": None,
            }
        ],
        "workloads": [],
        "window_tokens": None,
    }
    (out / "campaign.json").write_text(json.dumps(campaign))
    code, stdout, err = run(
        "import",
        "vllm-bench",
        str(BENCH / "off-boot1.json"),
        "--arm",
        "k3",
        "--method",
        "mtp",
        "--k",
        "3",
        "--out",
        str(out),
    )
    assert code == 2 and stdout == ""
    assert err.startswith(f"Error: {out / 'campaign.json'}: arms[0].role: must be one of control, candidate")
    assert sorted(p.name for p in out.iterdir()) == ["campaign.json"]
    assert json.loads((out / "campaign.json").read_text()) == campaign


def _edited(tmp: Path, name: str, **changes: object) -> Path:
    """A copy of one vendored bench file with some top-level keys changed."""
    data = json.loads((BENCH / name).read_text())
    data.update(changes)
    path = tmp / name
    path.write_text(json.dumps(data))
    return path


def _import_file(out: Path, path: Path, *extra: str) -> tuple[int, str, str]:
    return run(
        "import", "vllm-bench", str(path), "--arm", "off", "--role", "control", "--out", str(out), *extra
    )


def test_a_run_sent_at_a_request_rate_is_refused_without_a_concurrency(tmp_path: Path) -> None:
    path = _edited(tmp_path, "off-boot1.json", request_rate=4.0)
    code, _, err = _import_file(tmp_path / "r", path)
    assert code == 2 and "request_rate: request_rate is 4.0: the requests were sent at a rate" in err
    assert "Traceback" not in err and not (tmp_path / "r" / "records.jsonl").exists()


def test_a_concurrency_contradicting_the_file_is_refused(tmp_path: Path) -> None:
    given = json.loads((BENCH / "off-boot1.json").read_text())["max_concurrency"]
    code, _, err = _import_file(tmp_path / "r", BENCH / "off-boot1.json", "--concurrency", str(given + 1))
    assert code == 2 and f"max_concurrency: max_concurrency is {given} in the file" in err
    assert _import_file(tmp_path / "r", BENCH / "off-boot1.json", "--concurrency", str(given))[0] == 0


def test_a_file_of_another_model_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert _import_file(out, BENCH / "off-boot1.json")[0] == 0
    other = _edited(tmp_path, "off-boot2.json", model_id="another-model")
    code, _, err = run("import", "vllm-bench", str(other), "--arm", "off", "--boot", "2", "--out", str(out))
    assert code == 2 and "model_id: model_id is 'another-model' but campaign.json has" in err


def test_a_manifest_number_in_other_digits_is_named_by_row(tmp_path: Path) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text("file,arm,boot,order\na.json,off,\u00b2,1\n")
    with pytest.raises(CampaignError) as info:
        read_manifest(manifest)
    assert any(
        str(p).startswith(f"{manifest}:2: boot: must be an integer of 1 or more") for p in info.value.problems
    )
    code, _, err = run("import", "vllm-bench", "--manifest", str(manifest), "--out", str(tmp_path / "r"))
    assert code == 2 and f"{manifest}:2: boot" in err and "Traceback" not in err
