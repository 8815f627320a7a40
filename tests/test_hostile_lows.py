"""The low findings of the third hostile round: each refused or said plainly, never a crash or a wrong
word."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.collect import Collector, load_campaign_file
from mtpverdict.errors import CollectError, EngineTextError, InputError
from mtpverdict.importers import import_vllm_bench
from mtpverdict.parse.metrics import acceptance_delta, parse_metrics
from mtpverdict.parse.model import VoidWindow
from mtpverdict.serveconfig import read_serve_config

from .collect.conftest import campaign_text, free_port
from .conftest import DATA

BENCH = DATA / "vllm_bench" / "k3_detailed.json"


def _bench(tmp: Path, change: Any) -> Path:
    text = BENCH.read_text()
    path = tmp / "bench.json"
    path.write_text(change(text))
    return path


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda t: t.replace('"ttfts": [', '"ttfts": [NaN, ', 1).replace("0.12,", "", 1), "ttfts[0]"),
        (lambda t: t.replace('"duration": 2.5', '"duration": Infinity'), "duration"),
        (lambda t: t.replace('"mean_ttft_ms": 130.0', '"mean_ttft_ms": -Infinity'), "mean_ttft_ms"),
        (lambda t: t.replace('"duration": 2.5', '"duration": NaN'), "duration"),
    ],
)
def test_import_refuses_non_finite_numbers(tmp_path: Path, change: Any, key: str) -> None:
    path = _bench(tmp_path, change)
    assert key.split("[")[0] in path.read_text()
    with pytest.raises(EngineTextError) as caught:
        import_vllm_bench([path], arm="k3", out=tmp_path / "r", method="mtp", k=3)
    assert caught.value.problems[0].key == key and "finite" in caught.value.problems[0].message
    assert not (tmp_path / "r" / "records.jsonl").exists()


def test_import_reads_nan_as_a_statistic_of_no_value(tmp_path: Path) -> None:
    path = _bench(tmp_path, lambda t: t.replace('"std_ttft_ms": 10.0', '"std_ttft_ms": NaN'))
    report = import_vllm_bench([path], arm="k3", out=tmp_path / "r", method="mtp", k=3)
    assert dict(report.written) == {"acceptance": 1, "request": 4}


def test_import_refuses_an_output_no_server_could_have_written(tmp_path: Path) -> None:
    data = json.loads(BENCH.read_text())
    data["output_lens"][0] = 10**15
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    with pytest.raises(EngineTextError) as caught:
        import_vllm_bench([path], arm="k3", out=tmp_path / "r", method="mtp", k=3)
    problem = caught.value.problems[0]
    assert problem.key == "output_lens" and "entry 0 is 1000000000000000 tokens" in problem.message


def test_positions_that_changed_at_the_same_count_are_named() -> None:
    drafted = "vllm:spec_decode_num_draft_tokens_total"
    before = f'# TYPE {drafted} counter\n{drafted}{{engine="0"}} 10\n'
    per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    first = before + f'# TYPE {per_pos} counter\n{per_pos}{{engine="0",position="0"}} 5\n'
    second = first.replace('position="0"', 'position="1"').replace("} 10", "} 20")
    result = acceptance_delta(parse_metrics(first), parse_metrics(second))
    assert isinstance(result, VoidWindow)
    assert "from positions 0 to 1" in result.reason and "from 1 to 1" not in result.reason


def test_a_5000_digit_yaml_integer_is_refused_by_its_line(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        'services:\n  seat:\n    image: vllm/vllm-openai:v0.32.0\n    command: ["--model", "m"]\n'
        f"    x: {'9' * 5000}\n"
    )
    with pytest.raises(InputError) as caught:  # named by file and line
        read_serve_config(compose, service="seat")
    text = str(caught.value)
    assert f"{compose}:5" in text and "an integer of 5000 digits" in text
    assert "set_int_max_str_digits" not in text


def test_a_models_list_over_its_bound_is_said_so(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(
        campaign_text(free_port(), faults={"off_A": "huge-models"}, reps=1, concurrency="[1]")
    )
    collector = Collector(
        load_campaign_file(campaign),
        tmp_path / "r",
        variables={},
        resume=False,
        allow_argv_mismatch=True,
        on_event=lambda _: None,
    )
    with pytest.raises(CollectError) as caught:
        collector.run()
    assert "/v1/models: the answer passed 16777216 bytes" in str(caught.value)
    assert "lists no model" not in str(caught.value)


def test_an_interrupted_boot_takes_nothing_from_a_tampered_start_file(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign.toml"
    campaign.write_text(campaign_text(free_port(), reps=1, concurrency="[1]"))
    plan = load_campaign_file(campaign)
    out = tmp_path / "r"
    boots = out / "raw" / "boots"
    boots.mkdir(parents=True)
    forged = {
        "kind": "boot",
        "arm": "off_A",
        "boot": 1,
        "order": 1,
        "status": "ready",
        "ready_seconds": 1.0,
        "kv_cache_tokens": 1,
        "block_size": 16,
        "num_blocks": 1,
        "max_model_len": 4096,
        "engine_version": "9.9.9-forged",
        "argv": ["--model", "forged", "--speculative-config", '{"method":"mtp"}'],
        "error": None,
        "observed_k": 3,
        "log": "raw/logs/elsewhere.log",
    }
    (boots / "off_A-boot1.json").write_text(
        json.dumps({"arm": "off_A", "boot": 1, "order": 1, "record": forged})
    )
    Collector(plan, out, variables={}, resume=False, allow_argv_mismatch=False, on_event=lambda _: None).run()
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    interrupted = next(r for r in records if r["kind"] == "boot" and r["status"] == "interrupted")
    assert (interrupted["arm"], interrupted["boot"]) == ("off_A", 1)
    assert interrupted["argv"] == plan.serve_argv(plan.arms[0], {}, 1, str(out))  # the campaign's own
    for key in ("engine_version", "kv_cache_tokens", "block_size", "num_blocks", "observed_k", "log"):
        assert interrupted[key] is None, key  # observed_k 3 is not off_A's depth
    assert interrupted["ready_seconds"] == 1.0  # not read by the freshness check: kept


@pytest.mark.parametrize(
    "line",
    [
        "\u2588" * 100_000,  # a progress bar's blocks: 258 s before
        "(Worker" * 14_300,  # 26 s before
        "(EngineCore_DP1 pid=7) " + "=" * 100_000,
        "ggml_cuda" * 11_000,
        "version: " * 11_000,
        "acc per pos = (" * 6_600,
        "SpecDecoding metrics: " * 4_500,  # 4,500 messages on one line: 55 s before (each read its prefix)
    ],
    ids=["blocks", "worker", "equals", "ggml", "version", "per-pos", "many-messages"],
)
@pytest.mark.parametrize("engine", ["auto", "vllm", "llamacpp"])
def test_a_100_kb_log_line_is_parsed_in_linear_time(tmp_path: Path, line: str, engine: str) -> None:
    import time

    from mtpverdict.parse import parse_file

    log = tmp_path / "server.log"
    log.write_text("INFO start\n" + line + "\nINFO end\n")
    start = time.process_time()
    parse_file(log, engine)
    assert time.process_time() - start < 2.0
