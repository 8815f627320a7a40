"""The `parse` and `import vllm-bench` commands on an application built for the test."""

from __future__ import annotations

import json
from pathlib import Path

from ..conftest import run_cli
from .support import DATA, ENGINE_CASES

BENCH = DATA / "vllm_bench"
CURRENT = ENGINE_CASES / "vllm" / "v1_current.txt"
SGLANG = ENGINE_CASES / "sglang" / "decode_batch_current.txt"


def _run(*args: str) -> tuple[int, str, str]:
    result = run_cli(*args)
    return result.returncode, result.stdout, result.stderr


def test_parse_table() -> None:
    code, out, err = _run("parse", str(CURRENT))
    assert code == 0, err
    assert out.startswith(f"{CURRENT}: vllm 0.11.0\n")
    assert "0.709, 0.491, 0.359" in out and "702" in out


def test_parse_json_one_file_is_an_object() -> None:
    code, out, _ = _run("parse", "--json", str(CURRENT))
    assert code == 0
    payload = json.loads(out)
    assert payload["engine"] == "vllm"
    assert payload["acceptance"][0]["draft_tokens"] == 702


def test_parse_json_several_files_is_a_list_in_argument_order() -> None:
    code, out, _ = _run("parse", "--json", str(SGLANG), str(CURRENT))
    assert code == 0
    assert [p["engine"] for p in json.loads(out)] == ["sglang", "vllm"]


def test_parse_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    code, out, err = _run("parse", str(CURRENT), str(tmp_path / "absent.log"))
    assert code == 2
    assert out == ""
    assert err == f"Error: {tmp_path / 'absent.log'}: not found\n"
    code, _, err = _run("parse", "--engine", "tgi", str(CURRENT))
    assert code == 2 and err.startswith("Error: --engine must be one of auto, vllm, sglang, llamacpp")


def test_parse_garbage_is_a_warning_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(b"\x00\xff" * 1000)
    code, out, _ = _run("parse", str(path))
    assert code == 0
    assert "warning: the input does not look like text" in out


def test_import_vllm_bench_and_reimport(tmp_path: Path) -> None:
    out = tmp_path / "results"
    code, stdout, err = _run(
        "import", "vllm-bench", str(BENCH / "off_summary.json"), "--arm", "off_A", "--out", str(out)
    )
    assert code == 0, err
    assert stdout.startswith(f"{out}: 3 summary from 1 run(s); 0 already present")
    args = ["import", "vllm-bench", str(BENCH / "k3_detailed.json"), "--arm", "k3", "--out", str(out)]
    code, stdout, err = _run(*args, "--method", "mtp", "--k", "3")
    assert code == 0, err
    assert "1 acceptance, 4 request" in stdout
    code, stdout, _ = _run(*args)
    assert code == 0 and "no new records from 1 run(s); 5 already present" in stdout


def test_import_errors_exit_2_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"completed": 1,\n "output_throughput": }')
    code, _, err = _run("import", "vllm-bench", str(bad), "--arm", "a", "--out", str(tmp_path / "r"))
    assert code == 2
    assert err.startswith(f"Error: {bad}:2: not valid JSON")
    code, _, err = _run(
        "import",
        "vllm-bench",
        str(BENCH / "off_summary.json"),
        "--arm",
        "a",
        "--out",
        str(tmp_path / "r"),
        "--method",
        "mtp",
    )
    assert (
        code == 2
        and err
        == "Error: command line: --k: a candidate arm needs k, the speculative tokens per step (1 or more)\n"
    )


def test_every_command_has_help() -> None:
    for args in (["parse", "--help"], ["import", "--help"], ["import", "vllm-bench", "--help"]):
        code, out, _ = _run(*args)
        assert code == 0 and "Usage" in out


def test_parse_json_carries_the_per_position_counts_the_table_shows() -> None:
    """The table's per-position column shows counter counts; --json must carry the same counts."""
    case = ENGINE_CASES / "llamacpp" / "metrics_llamacpp.txt"
    code, table, _ = _run("parse", str(case))
    assert code == 0 and "240, 210, 190, 160" in table and "metrics/counter_total" in table
    code, out, _ = _run("parse", "--json", str(case))
    assert code == 0
    reading = json.loads(out)["acceptance"][0]
    assert reading["accepted_per_position"] == [240, 210, 190, 160]
    assert reading["per_position_rate"] is None  # counts, not rates: nothing is derived
    assert reading["kind"] == "counter_total"
