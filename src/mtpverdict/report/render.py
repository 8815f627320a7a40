"""report.md and a self-contained report.html from one list of blocks: the decision first, then evidence.

Both documents are rendered from the same blocks, so they say the same thing; the HTML inlines its CSS
and embeds every PNG as a data URI (no external request), and the markdown links the PNG and SVG files
written beside it. Nothing here decides: every verdict, reason, ratio and floor is the decision's.

Every text of a block may come from data (a campaign title, a policy name, a recorded error): the
renderers write it through mtpverdict._text (markdown_safe, html_safe), so it shows as written and
never as a heading, a link, raw HTML or an escape sequence.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtpverdict._text import html_safe, markdown_safe
from mtpverdict.report.data import COMPUTED, ReportData
from mtpverdict.report.plots import Plot, report_plots
from mtpverdict.report.tables import Table, report_tables
from mtpverdict.report.tables import html as table_html
from mtpverdict.report.tables import markdown as table_markdown
from mtpverdict.report.verdict import decision_words, selected_effect

PLOTS_DIR = "plots"
FILE_MODE = 0o644
DECISION_CLASS = {"promote": "good", "inconclusive": "warn"}  # any other decision renders as neutral
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1280px; padding: 0 1.5rem; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { border-bottom: 2px solid #ddd; padding-bottom: .2rem; margin-top: 2.2rem; }
.decision { border-left: 6px solid #4c72b0; background: #f3f6fb; padding: .8rem 1.2rem; font-size: 1.1rem; }
.decision.good { border-color: #2e8b57; background: #eef8f2; }
.decision.warn { border-color: #d08b20; background: #fdf6ea; }
.synthetic { background: #fdecea; border: 1px solid #e0a09a; padding: .5rem .8rem; }
.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: .86rem; margin: .4rem 0; }
th, td { border: 1px solid #d6d6d6; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
tr:nth-child(even) td { background: #fafafa; }
.note { color: #555; font-size: .88rem; }
figure { margin: 1.2rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
figcaption { color: #444; font-size: .9rem; margin-top: .3rem; }
.skipped { color: #777; font-style: italic; }
code { background: #f2f2f2; padding: 0 .25rem; }
"""


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Paragraph:
    """Text made of (run, bold) pieces; `style` names its HTML class."""

    runs: tuple[tuple[str, bool], ...]
    style: str = ""


@dataclass(frozen=True, slots=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TableBlock:
    table: Table
    level: int = 3


@dataclass(frozen=True, slots=True)
class PlotBlock:
    plot: Plot


Block = Heading | Paragraph | Bullets | TableBlock | PlotBlock


@dataclass(frozen=True, slots=True)
class WrittenReport:
    """The files a report wrote, and the plots it skipped with why."""

    markdown: Path
    html: Path
    images: tuple[Path, ...]
    skipped: tuple[str, ...]


def _text(text: str) -> Paragraph:
    return Paragraph(((text, False),))


def _metric(data: ReportData) -> str:
    """The selection metric the decision compared at (its regime map's, else decode_tps)."""
    return data.decision.regime[0].metric if data.decision.regime else "decode_tps"


def _decision_blocks(data: ReportData) -> list[Block]:
    doc = data.decision
    words = decision_words(doc.decision)
    selected = doc.find_arm(doc.selected_arm) if doc.selected_arm is not None else None
    if selected is not None:
        words += f" {selected.name} ({selected.label})"
    elif doc.schedule is not None and doc.decision == "promote":
        words += " a schedule"
    runs: list[tuple[str, bool]] = [("Decision: ", False), (words, True)]
    if doc.provisional and doc.decision != "inconclusive":
        runs.append((", provisional", False))
    effect = "" if selected is None else selected_effect(doc, selected.name, _metric(data))
    if effect:
        runs.append((f": {effect}", False))
    origin = (
        "computed from the results as mtpverdict decide computes it"
        if data.decision_source == COMPUTED
        else f"read from {Path(data.decision_source).name}"
    )
    blocks: list[Block] = [
        Paragraph(tuple(runs), style=f"decision {DECISION_CLASS.get(doc.decision, '')}".strip()),
        _text(
            f"Policy {doc.policy.name} ({doc.policy.file}; selection {doc.policy.selection}, "
            f"alpha {doc.policy.alpha:g}); "
            f"decision {origin}."
        ),
        Heading(3, "Reasons"),
        Bullets(doc.reasons),
    ]
    return blocks


def _scope_blocks(data: ReportData) -> list[Block]:
    doc = data.decision
    campaign = data.results.campaign
    rows = [
        ("device", doc.campaign.device),
        ("engine", " ".join(x for x in (doc.campaign.engine, doc.campaign.engine_version) if x)),
        ("model", doc.campaign.model),
        ("claim", doc.campaign.claim),
        ("arms", ", ".join(f"{a.name} ({a.label})" for a in doc.arms)),
        (
            "workloads",
            ", ".join(
                w.id + (f" ({w.prompt_tokens:,} prompt tokens)" if w.prompt_tokens is not None else "")
                for w in campaign.workloads
            ),
        ),
        ("window", "-" if campaign.window_tokens is None else f"{campaign.window_tokens:,} tokens"),
        ("source", campaign.source),
    ]
    table = Table(
        key="scope",
        title="Campaign",
        headers=("field", "value"),
        rows=tuple((k, v or "-") for k, v in rows if v),
    )
    return [TableBlock(table, level=2)]


def _inputs_blocks(data: ReportData) -> list[Block]:
    doc = data.decision
    rows = (
        ("campaign.json sha256", doc.inputs.campaign_sha256),
        ("records sha256", doc.inputs.records_sha256),
        ("rules sha256", doc.inputs.rules_sha256),
        ("mtpverdict", doc.inputs.tool_version),
    )
    table = Table(key="inputs", title="Input hashes", headers=("input", "value"), rows=rows)
    return [TableBlock(table, level=2)]


def build_blocks(data: ReportData, tables: Sequence[Table], plots: Sequence[Plot]) -> list[Block]:
    """The report in reading order: decision and reasons, verdicts, then each kind of evidence."""
    by_table = {t.key: t for t in tables}
    doc = data.decision
    title = f"{data.campaign_label}: {doc.campaign.title or data.results.campaign.title}"
    blocks: list[Block] = [Heading(1, title)]
    if doc.campaign.synthetic:
        blocks.append(
            Paragraph(
                (("Synthetic campaign: ", True), ("these records were generated, not measured.", False)),
                "synthetic",
            )
        )
    blocks += [Heading(2, "Decision"), *_decision_blocks(data)]

    def table(key: str, level: int = 3) -> list[Block]:
        return [TableBlock(by_table[key], level)] if key in by_table else []

    def section(key: str, title: str) -> list[Block]:
        """A section of one table, headed by the table's title; a line saying so when it is absent."""
        if key in by_table:
            return table(key, 2)
        return [Heading(2, title), _text("Nothing recorded for this campaign.")]

    def plot(prefix: str) -> list[Block]:
        return [PlotBlock(p) for p in plots if p.key == prefix or p.key.startswith(prefix + "-")]

    blocks += table("verdicts")
    blocks += _scope_blocks(data)
    blocks += [Heading(2, "Throughput and latency")]
    blocks += table("runs-decode_tps") + table("runs-aggregate_tps") + table("runs-ttft_ms")
    blocks += table("latency")
    blocks += plot("throughput")
    blocks += [*section("ratios", "Ratio to off"), *plot("regime"), *plot("context")]
    blocks += [*section("acceptance", "Acceptance"), *plot("acceptance"), *plot("category")]
    blocks += [*table("break-even", 2), *plot("break-even")]
    blocks += [*section("kv", "KV pool and concurrency ceiling"), *plot("kv")]
    blocks += section("quality", "Coherence and identity")
    blocks += [Heading(2, "Controls and sensitivity floor"), *table("controls"), *table("floor")]
    blocks += plot("drift")
    blocks += _inputs_blocks(data)
    return blocks


def _md_run(text: str, bold: bool, first: bool) -> str:
    """One run of a paragraph; a bold run keeps its outer spaces outside the ** (else it never closes)."""
    if not bold:
        return markdown_safe(text, starts_line=first)
    core = text.strip()
    lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
    return f"{lead}**{markdown_safe(core)}**{trail}" if core else text


def render_markdown(blocks: Sequence[Block]) -> str:
    """report.md: headings, bullet lists, pipe tables, and links to the PNG and SVG of each plot."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {markdown_safe(block.text)}\n")
        elif isinstance(block, Paragraph):
            out.append("".join(_md_run(t, bold, i == 0) for i, (t, bold) in enumerate(block.runs)) + "\n")
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {markdown_safe(item, starts_line=True)}" for item in block.items) + "\n")
        elif isinstance(block, TableBlock):
            out.append(table_markdown(block.table, block.level))
        else:
            p = block.plot
            title, key = markdown_safe(p.title), f"{PLOTS_DIR}/{p.key}"
            if p.skipped is not None:
                out.append(f"*{title}: not plotted: {markdown_safe(p.skipped)}.*\n")
            else:
                out.append(
                    f"![{title}]({key}.png)\n\n"
                    f"{markdown_safe(p.caption, starts_line=True)} ([PNG]({key}.png), [SVG]({key}.svg))\n"
                )
    return "\n".join(out)


def render_html(blocks: Sequence[Block], title: str) -> str:
    """report.html: one file with inline CSS and every PNG embedded as a data URI."""
    esc = html_safe
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{esc(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            inner = "".join(f"<strong>{esc(t)}</strong>" if bold else esc(t) for t, bold in block.runs)
            cls = f' class="{esc(block.style)}"' if block.style else ""
            body.append(f"<p{cls}>{inner}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>\n" + "\n".join(f"<li>{esc(item)}</li>" for item in block.items) + "\n</ul>")
        elif isinstance(block, TableBlock):
            body.append(table_html(block.table, block.level))
        else:
            p = block.plot
            if p.skipped is not None:
                body.append(f'<p class="skipped">{esc(p.title)}: not plotted: {esc(p.skipped)}.</p>')
            else:
                data = base64.b64encode(p.png).decode("ascii")
                body.append(
                    f'<figure id="plot-{esc(p.key)}"><img alt="{esc(p.title)}" '
                    f'src="data:image/png;base64,{data}">\n'
                    f"<figcaption><strong>{esc(p.title)}.</strong> {esc(p.caption)}</figcaption></figure>"
                )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _write(path: Path, content: bytes) -> None:
    """Write a whole file atomically: a reader sees the old or the new content, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_report(data: ReportData, out: str | os.PathLike[str]) -> WrittenReport:
    """Render the tables and plots of `data` and write report.md, report.html and plots/ under `out`."""
    out_dir = Path(out)
    tables = report_tables(data)
    plots = report_plots(data)
    blocks = build_blocks(data, tables, plots)
    title = f"mtpverdict report: {data.campaign_label}"
    images: list[Path] = []
    for p in plots:
        if p.skipped is not None:
            continue
        for suffix, content in ((".png", p.png), (".svg", p.svg)):
            path = out_dir / PLOTS_DIR / f"{p.key}{suffix}"
            _write(path, content)
            images.append(path)
    md_path = out_dir / "report.md"
    html_path = out_dir / "report.html"
    _write(md_path, render_markdown(blocks).encode("utf-8"))
    _write(html_path, render_html(blocks, title).encode("utf-8"))
    skipped = tuple(f"{p.title}: {p.skipped}" for p in plots if p.skipped is not None)
    return WrittenReport(markdown=md_path, html=html_path, images=tuple(images), skipped=skipped)
