"""ResultsWriter.append_many: a batch of records written together, each key once, nothing valid lost."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from mtpverdict.formats.results_io import ResultsWriter, load_results

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


def test_a_failed_fsync_removes_the_batch_so_a_retry_writes_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch was left in the file, unknown to the writer: the retry wrote it again, and the
    directory no longer loaded (duplicate request record)."""
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        monkeypatch.setattr(os, "fsync", failing)
        with pytest.raises(OSError, match="Input/output"):
            writer.append_many([_request(0), _request(1)])
        monkeypatch.undo()
        assert writer.append_many([_request(0), _request(1)]) == 2
    assert [r["stream"] for r in _lines(tmp_path / "r")] == [0, 1]
    load_results(tmp_path / "r")


@pytest.mark.parametrize("during", ["write", "fsync"])
def test_a_signal_leaves_the_batch_known_exactly_when_it_is_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, during: str
) -> None:
    """Ctrl-C in the fsync, after the bytes were written: the records are in the file, so the writer
    knows them (the count collect reports agrees with the disk); in the write: none of them is kept."""
    real_write, real_fsync = os.write, os.fsync

    def interrupted_write(fd: int, data: bytes) -> int:
        real_write(fd, data[:50])
        raise KeyboardInterrupt

    def interrupted_fsync(fd: int) -> None:
        real_fsync(fd)
        raise KeyboardInterrupt

    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        if during == "write":
            monkeypatch.setattr(os, "write", interrupted_write)
        else:
            monkeypatch.setattr(os, "fsync", interrupted_fsync)
        with pytest.raises(KeyboardInterrupt):
            writer.append_many([_request(0), _request(1)])
        monkeypatch.undo()
        on_disk = [r["stream"] for r in _lines(tmp_path / "r")]
        assert on_disk == ([] if during == "write" else [0, 1])
        assert [r["stream"] for r in writer.records] == on_disk
        assert writer.append_many([_request(0), _request(1)]) == (2 if during == "write" else 0)
    load_results(tmp_path / "r")


def test_a_write_that_takes_no_bytes_is_an_error_not_a_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        monkeypatch.setattr(os, "write", lambda fd, data: 0)
        with pytest.raises(OSError, match="took no bytes") as raised:
            writer.append_many([_request(0)])
        assert raised.value.errno == errno.EIO


def test_text_that_is_not_utf8_is_written_as_its_escape(tmp_path: Path) -> None:
    """A server's JSON can escape a lone surrogate into a text (an error, an engine version): encoding
    the batch raised UnicodeEncodeError before anything was written, and collect stopped on every
    resume. The text is written as its escape, and the record kept."""
    with ResultsWriter(tmp_path / "r", _campaign()) as writer:
        bad = _request(1, status="error", error="server error in stream: bad \ud800 thing")
        assert writer.append_many([_request(0), bad, _request(2)]) == 3
        assert writer.records[1]["error"] == "server error in stream: bad \\ud800 thing"
    assert [r["stream"] for r in _lines(tmp_path / "r")] == [0, 1, 2]
    assert _lines(tmp_path / "r")[1]["error"] == "server error in stream: bad \\ud800 thing"
    load_results(tmp_path / "r")
