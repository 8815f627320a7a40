"""ResultsWriter.append_many: a batch of records written together, all or none, each key once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.formats.results_io import ResultsWriter

from ..conftest import FIXTURES


def _campaign() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / "synthetic-clean-win" / "campaign.json").read_text())
    return loaded


WORKLOAD = _campaign()["workloads"][0]["id"]


def _request(stream: int, **changed: Any) -> dict[str, Any]:
    return {
        "kind": "request",
        "arm": "off_A",
        "boot": 1,
        "workload": WORKLOAD,
        "concurrency": 4,
        "warmup": False,
        "rep": 1,
        "stream": stream,
        "status": "ok",
        "error": None,
        "prompt_tokens": 256,
        "completion_tokens": 256,
        "t_start": 100.0,
        "t_first": 100.4,
        "t_end": 105.3,
        **changed,
    }


def _lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def test_a_batch_is_written_in_order_with_each_key_once(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        assert writer.append(_request(0))
        assert writer.append_many([_request(1), _request(0), _request(2), _request(1)]) == 2
        assert writer.append_many([_request(2)]) == 0
    assert [r["stream"] for r in _lines(tmp_path / "r")] == [0, 1, 2]


def test_one_invalid_record_refuses_the_whole_batch(tmp_path: Path) -> None:
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        with pytest.raises(ValueError, match="invalid request record"):
            writer.append_many([_request(0), _request(1, completion_tokens="many")])
        assert writer.append_many([_request(1)]) == 1  # nothing of the refused batch was kept as seen
    assert [r["stream"] for r in _lines(tmp_path / "r")] == [1]
