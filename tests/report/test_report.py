"""The report of every fixture campaign: files, valid images, no external URL, byte-identical reruns."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mtpverdict._text import markdown_safe
from mtpverdict.errors import InputError
from mtpverdict.formats.decision import Decision, parse_decision
from mtpverdict.report import load_report_data, write_report
from mtpverdict.report.verdict import decision_words

from ..conftest import FIXTURES, run_cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)
# fixture campaign -> the policy its report is made under (None: the embedded default)
CAMPAIGNS = {
    "thor-qwen36-35b-a3b": "thor-c21",
    "arc-b70-qwen36": "arc-b70",
    "synthetic-blind": None,
    "synthetic-clean-win": None,
    "synthetic-crossover": None,
    "synthetic-drift": None,
    "synthetic-null": None,
    "synthetic-void-arm": None,
}


def _report(name: str, out: Path, *extra: str) -> Path:
    args = ["report", str(FIXTURES / name), "--out", str(out), *extra]
    rules = CAMPAIGNS[name]
    if rules is not None and "--decision" not in extra:
        args += ["--rules", rules]
    result = run_cli(*args)
    assert result.returncode == 0, result.output
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Decision]]:
    """Every campaign's report, written once through the library: (directory, the decision shown)."""
    root = tmp_path_factory.mktemp("reports")
    out: dict[str, tuple[Path, Decision]] = {}
    for name, rules in CAMPAIGNS.items():
        data = load_report_data(FIXTURES / name, rules=rules)
        write_report(data, root / name)
        out[name] = (root / name, data.decision)
    return out


@pytest.fixture(scope="module")
def reports(built: dict[str, tuple[Path, Decision]]) -> dict[str, Path]:
    return {name: path for name, (path, _) in built.items()}


def test_every_campaign_with_records_is_covered() -> None:
    with_records = {
        p.name for p in FIXTURES.iterdir() if p.is_dir() and (p / "records.jsonl").stat().st_size > 0
    }
    assert with_records == set(CAMPAIGNS)


@pytest.mark.parametrize("name", sorted(CAMPAIGNS))
@pytest.mark.slow
def test_report_files(built: dict[str, tuple[Path, Decision]], name: str) -> None:
    out, decision = built[name]
    md = (out / "report.md").read_text(encoding="utf-8")
    page = (out / "report.html").read_text(encoding="utf-8")
    # the decision and its reasons come first, in both documents
    words = decision_words(decision.decision)
    assert md.index(f"**{words}") < md.index("### Reasons") < md.index("| arm")
    assert f"<strong>{html.escape(words)}" in page
    for reason in decision.reasons:
        assert f"- {markdown_safe(reason, starts_line=True)}" in md  # as written, never as markup
        assert html.escape(reason) in page
    # the tables in the seeds' style
    for heading in ("### Verdict per arm", "## Controls and sensitivity floor", "### Sensitivity floor"):
        assert heading in md
    assert "Decode tok/s per stream" in md and "| arm" in md
    # self-contained: inline CSS, PNGs as data URIs, no external request
    assert "<style>" in page and not EXTERNAL.search(page)
    images = sorted((out / "plots").glob("*.png"))
    assert images, "every campaign with records has at least one plot"
    for png in images:
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert b"tEXt" not in data and b"Software" not in data  # metadata stripped
        import matplotlib.image

        assert matplotlib.image.imread(png).shape[0] > 100
        svg = png.with_suffix(".svg")
        assert svg.stat().st_size > 0
        assert ET.parse(svg).getroot().tag.endswith("svg")
        assert f"(plots/{png.name})" in md
    assert page.count('src="data:image/png;base64,') == len(images)
    # a plot without data is one line saying why, never an empty axes
    skipped = re.findall(r"^\*[^*\n]+: not plotted: [^\n]+\.\*$", md, flags=re.MULTILINE)
    assert len(skipped) == md.count("not plotted:") == page.count('class="skipped"')


@pytest.mark.slow
def test_plots_per_campaign(reports: dict[str, Path]) -> None:
    def plots(name: str) -> set[str]:
        return {p.stem for p in (reports[name] / "plots").glob("*.png")}

    assert plots("thor-qwen36-35b-a3b") == {"throughput", "acceptance", "break-even", "kv"}
    assert plots("synthetic-clean-win") == {"throughput", "regime", "acceptance", "break-even", "kv", "drift"}
    assert plots("synthetic-crossover") == {"throughput", "regime", "acceptance", "break-even", "kv", "drift"}
    assert plots("arc-b70-qwen36") == {
        "throughput-a3b",
        "throughput-dense",
        "throughput-llamacpp_sycl",
        "break-even",
        "context",
        "kv",
    }
    md = (reports["thor-qwen36-35b-a3b"] / "report.md").read_text(encoding="utf-8")
    assert "Break-even acceptance" in md and "| k3 (mtp k=3) | code c=1 " in md
    assert "*Run order against throughput (drift): not plotted: needs two or more control boots" in md


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_rerun_is_byte_identical(reports: dict[str, Path], tmp_path: Path) -> None:
    name = "synthetic-clean-win"
    again = _files(_report(name, tmp_path / name))
    assert again == _files(reports[name])


@pytest.mark.slow
def test_report_of_a_decision_file(tmp_path: Path) -> None:
    from mtpverdict.decide import decide_directory

    decision = tmp_path / "decision.json"
    decision.write_text(decide_directory(FIXTURES / "synthetic-drift").json_text, encoding="utf-8")
    out = _report("synthetic-drift", tmp_path / "out", "--decision", str(decision))
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "read from decision.json" in md and "Decision: **inconclusive**" in md


def _fails(*args: str) -> str:
    result = run_cli("report", *args)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.splitlines()
    assert lines and all(line.startswith("Error: ") for line in lines)
    return result.output


def test_a_non_decision_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "campaign.json"
    other.write_text((FIXTURES / "synthetic-drift" / "campaign.json").read_text(), encoding="utf-8")
    out = _fails(str(FIXTURES / "synthetic-drift"), "--out", str(tmp_path / "o"), "--decision", str(other))
    assert "format is 'mtpverdict.results/1', expected 'mtpverdict.decision/2'" in out
    assert not (tmp_path / "o").exists()
    plain = tmp_path / "list.json"
    plain.write_text("[1, 2]", encoding="utf-8")
    out = _fails(str(FIXTURES / "synthetic-drift"), "--out", str(tmp_path / "o"), "--decision", str(plain))
    assert "not a decision file" in out


def test_a_decision_on_other_records_is_refused(tmp_path: Path) -> None:
    golden = Path(__file__).resolve().parent.parent / "golden" / "synthetic-null@default.json"
    out = _fails(str(FIXTURES / "synthetic-drift"), "--out", str(tmp_path / "o"), "--decision", str(golden))
    assert "inputs.records_sha256" in out and "run `mtpverdict decide` again" in out


def test_bad_results_and_rules_are_one_line_each(tmp_path: Path) -> None:
    _fails(str(tmp_path / "missing"), "--out", str(tmp_path / "o"))
    _fails(str(FIXTURES / "synthetic-drift"), "--out", str(tmp_path / "o"), "--rules", "no-such-policy")


def test_parse_decision_names_bad_keys() -> None:
    text = (Path(__file__).resolve().parent.parent / "golden" / "synthetic-drift@default.json").read_text()
    obj = json.loads(text)
    assert parse_decision(text, "d.json").decision == obj["decision"]
    obj["arms"][0]["kv"]["ceiling"] = "wide"
    del obj["reasons"]
    with pytest.raises(InputError) as caught:
        parse_decision(json.dumps(obj), "d.json")
    problems = [str(p) for p in caught.value.problems]
    assert any(p.startswith("d.json: arms[0].kv.ceiling: must be a number") for p in problems)
    assert any(p.startswith("d.json: reasons: missing") for p in problems)


def test_the_cli_does_not_import_matplotlib() -> None:
    code = (
        "import sys, mtpverdict.cli, mtpverdict.cli.report, mtpverdict.report; "
        "sys.exit('matplotlib' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
