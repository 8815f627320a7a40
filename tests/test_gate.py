"""The gate: support, refusal, stale evidence from compose and argv files, bad input, CI summary."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mtpverdict.errors import InputError
from mtpverdict.gate import argv_differences, image_version, parse_spec

from .conftest import FIXTURES

WIN = FIXTURES / "synthetic-clean-win"
K2 = '{"method":"mtp","num_speculative_tokens":2}'


def _gate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "mtpverdict", "gate", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def _compose(tmp: Path, command: list[str], image: str | None = None) -> Path:
    import yaml

    service: dict[str, object] = {"command": command}
    if image:
        service["image"] = image
    path = tmp / "compose.yaml"
    path.write_text(yaml.safe_dump({"services": {"seat": service, "proxy": {"image": "nginx"}}}))
    return path


def test_parse_spec_forms() -> None:
    assert parse_spec("off").off and parse_spec("k=0").off
    assert (parse_spec("k=3").method, parse_spec("k=3").k) == (None, 3)
    assert (parse_spec("mtp:k=2").method, parse_spec("mtp:k=2").k) == ("mtp", 2)
    spec = parse_spec('{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}')
    assert (spec.method, spec.k) == ("ngram", 4)
    assert parse_spec('{"model": "/m/draft", "num_speculative_tokens": 2}').method == "draft_model"
    for bad in ("k=three", "{not json", '{"method": "mtp"}', "fast"):
        with pytest.raises(InputError):
            parse_spec(bad)


def test_support_and_refusal() -> None:
    ok = _gate(str(WIN), "--proposed", "k=2")
    assert ok.returncode == 0 and "supported" in ok.stdout
    wrong_depth = _gate(str(WIN), "--proposed", "mtp:k=3")
    assert wrong_depth.returncode == 1 and "selects k2 with k=2" in wrong_depth.stdout
    off = _gate(str(WIN), "--proposed", "off")
    assert off.returncode == 1 and "keeping speculation off needs evidence too" in off.stdout
    arc = _gate(str(FIXTURES / "arc-b70-qwen36"), "--rules", "arc-b70", "--proposed", "off")
    assert arc.returncode == 0
    inconclusive = _gate(str(FIXTURES / "synthetic-drift"), "--proposed", "k=1")
    assert inconclusive.returncode == 1 and "inconclusive" in inconclusive.stdout


def test_a_compose_file_that_changes_only_the_speculative_config_passes(tmp_path: Path) -> None:
    compose = _compose(tmp_path, ["--model", "synthetic", "--speculative-config", K2, "--port", "9000"])
    done = _gate(str(WIN), "--proposed", K2, "--serve-config", str(compose), "--service", "seat")
    assert done.returncode == 0, done.stdout
    assert "evidence is fresh" in done.stdout


def test_a_compose_file_that_also_changes_the_model_fails_and_names_it(tmp_path: Path) -> None:
    compose = _compose(
        tmp_path, ["--model", "other-model", "--speculative-config", K2, "--max-num-batched-tokens", "8192"]
    )
    done = _gate(str(WIN), "--proposed", K2, "--serve-config", str(compose), "--service", "seat")
    assert done.returncode == 1
    assert "stale evidence, --model: evidence synthetic vs proposed other-model" in done.stdout
    assert "stale evidence, --max-num-batched-tokens: evidence (absent) vs proposed 8192" in done.stdout


def test_an_engine_image_newer_than_the_evidence_is_stale(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(WIN, results)
    text = (
        (results / "records.jsonl")
        .read_text()
        .replace('"engine_version":"simulated"', '"engine_version":"0.31.0"')
    )
    (results / "records.jsonl").write_text(text)
    same = _compose(
        tmp_path, ["--model", "synthetic", "--speculative-config", K2], "vllm/vllm-openai:v0.31.0"
    )
    assert (
        _gate(str(results), "--proposed", "k=2", "--serve-config", str(same), "--service", "seat").returncode
        == 0
    )
    newer = _compose(
        tmp_path, ["--model", "synthetic", "--speculative-config", K2], "vllm/vllm-openai:v0.32.0"
    )
    done = _gate(str(results), "--proposed", "k=2", "--serve-config", str(newer), "--service", "seat")
    assert done.returncode == 1 and "engine version: evidence 0.31.0 vs proposed image" in done.stdout


def test_a_plain_argv_file_and_the_step_summary(tmp_path: Path) -> None:
    argv = tmp_path / "serve.argv"
    argv.write_text("vllm serve synthetic \\\n  --speculative-config '" + K2 + "'\n")
    summary = tmp_path / "summary.md"
    done = _gate(
        str(WIN), "--proposed", "k=2", "--serve-config", str(argv), env={"GITHUB_STEP_SUMMARY": str(summary)}
    )
    assert done.returncode == 0, done.stdout
    assert summary.read_text().startswith("### mtpverdict gate: k=2 supported")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--proposed", "fast"], "write off, k=N"),
        (["--proposed", "k=2", "--serve-config", "/nonexistent.yaml"], "cannot be read"),
        (["--proposed", "k=2", "--rules", "nope"], "no such shipped policy"),
    ],
)
def test_bad_input_exits_2(args: list[str], fragment: str) -> None:
    done = _gate(str(WIN), *args)
    assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr


def test_compose_with_several_services_needs_one_named(tmp_path: Path) -> None:
    compose = _compose(tmp_path, ["--model", "synthetic"])
    done = _gate(str(WIN), "--proposed", "k=2", "--serve-config", str(compose))
    assert done.returncode == 2 and "pass --service" in done.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("services:\n  seat: [unclosed\n")
    assert _gate(str(WIN), "--proposed", "k=2", "--serve-config", str(bad)).returncode == 2


def test_argv_normalisation() -> None:
    evidence = [
        "/venv/bin/python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "m",
        "--max_num_seqs=8",
        "--enforce-eager",
        "--speculative-config",
        K2,
        "--port",
        "8000",
    ]
    proposed = ["--model", "m", "--max-num-seqs", "8", "--enforce-eager", "--port", "9000"]
    assert argv_differences(evidence, proposed) == []
    assert argv_differences(evidence, [*proposed, "--gpu-memory-utilization", "0.95"]) == [
        "--gpu-memory-utilization: evidence (absent) vs proposed 0.95"
    ]
    assert image_version("vllm/vllm-openai:v0.32.0") == "0.32.0"
    assert image_version("registry:5000/vllm") is None
    assert json.loads(K2)["num_speculative_tokens"] == 2
