"""The report's decision box says the decision in words, and a warning-only rule's finding is a
warning there, never a FAIL like a veto's."""

from __future__ import annotations

from pathlib import Path

from mtpverdict.report import load_report_data, write_report
from mtpverdict.report.tables import verdict_table

from ..conftest import FIXTURES


def test_the_decision_box_speaks_words(tmp_path: Path) -> None:
    data = load_report_data(FIXTURES / "thor-qwen36-35b-a3b", rules="thor-c21")
    write_report(data, tmp_path / "r")
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    box = md.split("### Reasons")[0]
    assert "**keep the reference k3 (mtp k=3)**" in box
    assert "keep_reference" not in box
    assert "+53.0% decode tok/s vs off at deep c=1" in box


def test_warning_rules_read_as_warnings() -> None:
    data = load_report_data(FIXTURES / "thor-qwen36-35b-a3b", rules="thor-c21")
    table = verdict_table(data)
    ttft = table.headers.index("ttft")
    veto = table.headers.index("stable_acceptance")
    rows = {row[0]: row for row in table.rows}
    assert rows["k1"][ttft] == "warning"  # TTFT above the limit: reported, not a rejection
    assert rows["k7"][veto] == "FAIL"
    assert "warning" in table.note
