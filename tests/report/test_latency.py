"""The latency percentiles in the report's table and in decide --verbose, read from the decision."""

from __future__ import annotations

import msgspec

from mtpverdict.decide import decide_directory
from mtpverdict.report import load_report_data
from mtpverdict.report.latency import latency_table, latency_text
from mtpverdict.report.terminal import render_summary

from ..conftest import FIXTURES

CLEAN = FIXTURES / "synthetic-clean-win"


def test_the_table_lists_every_arm_cell_and_latency_from_the_decision() -> None:
    data = load_report_data(CLEAN, rules="default")
    table = latency_table(data)
    assert table is not None and table.key == "latency"
    decision = data.decision
    assert len(table.rows) == len(decision.latency)
    first = table.rows[0]
    found = next(
        x
        for x in decision.latency
        if (x.arm, x.workload, x.concurrency, x.metric) == ("off_A", "chat", 1, "ttft_ms")
    )
    assert first[:4] == ("off_A", "off", "chat c=1", "TTFT ms")
    assert first[4] == f"{found.n} ({found.n_boots})"
    assert first[5:8] == tuple(f"{v:,.1f}" for v in (found.p50, found.p90, found.p99))
    assert first[8].startswith(f"{found.boot_median:,.1f} [")
    # each arm's cells first, then the arm over every cell
    cells = [row[2] for row in table.rows if row[0] == "off_A"]
    assert cells[-1] == "every cell" and cells[0] != "every cell"


def test_the_terminal_shows_each_arm_over_every_cell() -> None:
    decision = decide_directory(CLEAN).decision
    text = latency_text(decision, 120)
    lines = text.splitlines()
    assert lines[0].startswith("latency over every cell (client clock")
    assert [line.split()[0] for line in lines[3:]] == [a.name for a in decision.arms]
    every = next(x for x in decision.latency if x.arm == "k2" and x.workload is None and x.metric == "itl_ms")
    assert f"{every.p50:.1f}/{every.p90:.1f}/{every.p99:.1f}" in lines[3 + 2]
    verbose = render_summary(decision, "decode_tps", ["chat"], verbose=True)
    assert text in verbose
    assert "latency over every cell" not in render_summary(decision, "decode_tps", ["chat"], verbose=False)


def test_no_streams_no_latency() -> None:
    decision = msgspec.structs.replace(decide_directory(CLEAN).decision, latency=())
    assert latency_text(decision, 120) == ""
