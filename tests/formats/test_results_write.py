"""ResultsWriter.append_many: a batch of records written together, each key once, nothing valid lost."""

from __future__ import annotations

import errno
import json
import os
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


def test_an_invalid_record_is_refused_after_the_valid_ones_are_written(tmp_path: Path) -> None:
    """Before a run's records went in one write, the records ahead of a bad one reached the disk; a
    batch must keep at least as much: every valid record, then one error naming the bad ones."""
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        bad = [_request(1, completion_tokens="many"), _request(3, status=7)]
        with pytest.raises(ValueError, match=r"invalid request record: .*\(and 1 more\)"):
            writer.append_many([_request(0), bad[0], _request(2), bad[1]])
        assert writer.append_many([_request(0), _request(2)]) == 0  # both written and known
    assert [r["stream"] for r in _lines(tmp_path / "r")] == [0, 2]


def _short_writes(monkeypatch: pytest.MonkeyPatch, fail_after: int | None) -> list[int]:
    """os.write that writes at most 100 bytes a call; after `fail_after` calls it fails with ENOSPC."""
    real, sizes = os.write, list[int]()

    def short(fd: int, data: bytes) -> int:
        if fail_after is not None and len(sizes) >= fail_after:
            raise OSError(errno.ENOSPC, "No space left on device")
        sizes.append(real(fd, data[:100]))
        return sizes[-1]

    monkeypatch.setattr(os, "write", short)
    return sizes


def test_a_short_write_goes_on_until_the_batch_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regular file may take part of a write; that is not a full disk."""
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        sizes = _short_writes(monkeypatch, fail_after=None)
        assert writer.append_many([_request(i) for i in range(4)]) == 4
    assert len(sizes) > 4
    assert [r["stream"] for r in _lines(tmp_path / "r")] == [0, 1, 2, 3]


def test_a_write_that_fails_midway_leaves_no_fragment_and_raises_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        writer.append(_request(0))
        _short_writes(monkeypatch, fail_after=2)
        with pytest.raises(OSError) as raised:
            writer.append_many([_request(i) for i in range(1, 4)])
        assert raised.value.errno == errno.ENOSPC
        monkeypatch.undo()
        assert writer.append_many([_request(1)]) == 1  # the failed batch was not taken as written
    assert [r["stream"] for r in _lines(tmp_path / "r")] == [0, 1]
