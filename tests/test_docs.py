"""Docs a test keeps true: every session in README.md and docs/*.md runs as shown on shipped material,
the CLI reference is the CLI's own help, and the docs' claims about the code name code that exists.

`pytest tests/test_docs.py --regen-docs` rewrites the sessions' outputs and docs/cli-reference.md from
the current code, on purpose: read the diff before committing it.
"""

from __future__ import annotations

import difflib
import importlib
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from .docsession import (
    ROOT,
    Block,
    Command,
    blocks,
    documents,
    matches,
    rewritten,
    run_sessions,
    workspace,
    write_back,
)

REFERENCE = ROOT / "docs" / "cli-reference.md"
MAX_NOT_RUN = 7  # blocks marked `not run` (an install, real servers, clusters, a live seat); lower it
SLOW_DOCS = {"report.md"}  # sessions that draw plots (matplotlib) take more than a few seconds


def _sessions(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.commands]


def _session_docs() -> list[Any]:
    found: list[Any] = []
    for path in documents():
        if not _sessions(path):
            continue
        marks = [pytest.mark.slow] if path.name in SLOW_DOCS else []
        found.append(pytest.param(path, id=path.name, marks=marks))
    return found


@pytest.fixture
def regen_docs(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--regen-docs"))


@pytest.mark.parametrize("path", _session_docs())
def test_every_session_runs_as_shown(path: Path, tmp_path: Path, regen_docs: bool) -> None:
    sessions = _sessions(path)
    run_sessions(sessions, workspace(tmp_path))
    if regen_docs:
        write_back(path, sessions)
        sessions = _sessions(path)
        run_sessions(sessions, workspace(tmp_path / "again"))
    problems = []
    for block in sessions:
        for command in block.commands:
            assert command.got is not None
            where = f"{path.relative_to(ROOT)}:{command.line + 1}: $ {command.text}"
            if not matches(command.shown, command.got):
                diff = difflib.unified_diff(command.shown, command.got, "shown", "got", lineterm="")
                problems.append(f"{where}\n" + "\n".join(diff))
            following = _next_command(block, command)
            if command.code != 0 and (following is None or following.text.strip() != "echo $?"):
                problems.append(f"{where}: exit {command.code}; show it with `$ echo $?` or fix the example")
    assert not problems, "\n\n".join(problems) + "\n\n(pytest tests/test_docs.py --regen-docs, on purpose)"


def _next_command(block: Block, command: Command) -> Command | None:
    i = block.commands.index(command)
    return block.commands[i + 1] if i + 1 < len(block.commands) else None


def test_every_block_naming_a_command_runs_or_says_why_not() -> None:
    unmarked, stale, not_run = [], [], []
    for path in documents():
        for block in blocks(path):
            if block.not_run is not None:
                not_run.append(f"{block.where}: {block.not_run}")
                if not block.names_a_command:
                    stale.append(block.where)
            elif block.names_a_command and not block.is_session:
                unmarked.append(block.where)
    assert not unmarked, f"show these as `$ ` sessions, or mark them <!-- not run: REASON -->: {unmarked}"
    assert not stale, f"a `not run` marker on a block that names no mtpverdict command: {stale}"
    assert len(not_run) <= MAX_NOT_RUN, "more blocks that cannot run here:\n" + "\n".join(not_run)


def test_the_cli_reference_is_the_clis_own_help(regen_docs: bool) -> None:
    from mtpverdict.cli import app
    from mtpverdict.cli._help import reference_markdown

    text = reference_markdown(app)
    if regen_docs:
        REFERENCE.write_text(text)
    assert reference_stale(REFERENCE, text) is None


def reference_stale(reference: Path, text: str) -> str | None:
    """Why `reference` is not `text`, the CLI's help as reference_markdown renders it (None: it is)."""
    if reference.is_file() and reference.read_text() == text:
        return None
    return f"docs/{reference.name} is stale: pytest tests/test_docs.py --regen-docs"


def test_help_names_parameters_in_words_not_python_types() -> None:
    from mtpverdict.cli import app
    from mtpverdict.cli._help import REFERENCE_WIDTH, help_text, walk

    for path, command, ctx in walk(app):
        for text in (help_text(command, ctx, REFERENCE_WIDTH), command.get_help(ctx)):
            raw = re.findall(r"<(?:bool|str|int|float|path|list\[\w+\])>|\{[a-z_]+\}", text)
            assert not raw, f"{path} --help shows {raw}"
            assert text.startswith(f"Usage: {path}"), text


def test_the_readme_table_lists_every_command_and_links_the_reference() -> None:
    from mtpverdict.cli import app
    from mtpverdict.cli._help import walk

    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    leaves = [path for path, command, _ in walk(app) if not hasattr(command, "commands")]
    for path in leaves:
        assert f"`{path}" in table, f"README's command table does not list {path}"
    assert "docs/cli-reference.md" in table


# ---- claims about the code ------------------------------------------------------------------------

# a file the docs name: the checkout's, or the package's (`rules/registry.py` is src/mtpverdict/rules/...)
MODULE_PATH = re.compile(
    r"`((?:src|tests|rules|examples|fixtures|bench|collectors)/[\w./-]+\.(?:py|toml|ya?ml|sbatch|json))`"
)
# a module, function or class the docs name: `mtpverdict.stats.blocked`, `from mtpverdict.x import y`,
# or in a code span relative to the package: `stats.blocked.blocked_family_procedure`
DOTTED = re.compile(
    r"\bfrom mtpverdict\.([\w.]+) import (\w+)"
    r"|\bmtpverdict\.((?:[a-z_]\w*\.)*[a-z_]\w*)\b(?![/.\w])"
    r"|`((?:stats|formats|evidence|rules|decide|report|collect|parse)\.[\w.]+)`"
)
FILE_SUFFIXES = (".md", ".html", ".json", ".toml", ".py", ".yml", ".yaml", ".txt")


def _claims(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """(document, name) for each match: `from a import b` as a.b, else the matched name."""
    found = []
    for path in documents():
        for match in pattern.finditer(path.read_text()):
            groups = [g for g in match.groups() if g]
            found.append((path.name, ".".join(groups)))
    return found


# any Python file in a code span (`results/spec.py`): this project's, unless it names an engine's source
PYTHON_PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)+\.py)`")
ENGINE_SOURCES = ("vllm/", "python/sglang/", "sglang/")  # docs/engine-formats.md cites the engines' files


def test_every_file_the_docs_name_exists() -> None:
    named = _claims(MODULE_PATH) + [
        (doc, name) for doc, name in _claims(PYTHON_PATH) if not name.startswith(ENGINE_SOURCES)
    ]
    missing = [
        (doc, name)
        for doc, name in named
        if not (ROOT / name).exists() and not (ROOT / "src" / "mtpverdict" / name).exists()
    ]
    assert not missing, f"the docs name files that do not exist: {missing}"


# a checkout path the prose names, quoted or not (`tests/stats/`, tests/stats/test_procedure.py); a
# pattern (tests/rules/test_<kind>.py, tests/test_hardening*.py, x.{log,json}) is left unchecked
CHECKOUT_PATH = re.compile(r"(?<![\w./-])(?:src/mtpverdict|tests|bench|collectors)/[\w./<>*{},-]*")


def test_every_checkout_path_the_docs_and_contributing_name_exists() -> None:
    named = [
        (f"{path.name}:{n}", match.rstrip(".,"))
        for path in [*documents(), ROOT / "CONTRIBUTING.md"]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for match in CHECKOUT_PATH.findall(line)
    ]
    missing = [
        f"{where}: {name}"
        for where, name in named
        if not set("<*{") & set(name) and not (ROOT / name).exists()
    ]
    assert not missing, f"the docs name paths that do not exist: {missing}"


# a Markdown link to a file of the checkout, relative to the document's folder, with an optional anchor:
# inline, `[text](destination "title")` (an image too), or a reference definition, `[label]: destination
# "title"` on a line of its own, its destination perhaps on the next; the destination bare, or in <...>
# (where it may hold spaces); the title optional, in "", '' or (); the text may hold brackets in pairs
# (two deep here) and line breaks, not a blank line; CommonMark's link syntax
# (spec.commonmark.org/0.31.2, 6.3 and 4.7). An HTML `<a href>` is a link too.
_DESTINATION = r"(?:<([^<>\n]*)>|([^\s()<>]+))"
_TITLE = r"""(?:\s+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?"""
_TEXT_CHAR = r"(?:[^\[\]\n]|\n(?![ \t]*\n))"  # a line break, but not a paragraph's end
_TEXT = rf"\[(?:{_TEXT_CHAR}|\[(?:{_TEXT_CHAR}|\[{_TEXT_CHAR}*\])*\])*\]"
MD_LINK = re.compile(rf"{_TEXT}\(\s*{_DESTINATION}{_TITLE}\s*\)")
MD_REFERENCE = re.compile(
    rf"^ {{0,3}}\[[^\]\n]+\]:[ \t]*(?:\n[ \t]*)?{_DESTINATION}{_TITLE}[ \t]*$", re.MULTILINE
)
HTML_LINK = re.compile(r"""<a\s(?:[^>]*?\s)?href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>]+))""", re.IGNORECASE)
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")  # a fenced code block opens and closes with one of these
CODE_SPAN = re.compile(r"(`+)[^`\n].*?\1")  # `code` on one line; a link in it is an example, not a link
# a Python file in prose, quoted or not, relative to the checkout, the package or the document
PROSE_PY = re.compile(r"(?<![\w./-])(?:[\w-]+/)+[\w-]+\.py\b")
# files that are no longer there, named as the code was when a measurement was taken (each says where
# the code lives now)
HISTORY = {"performance.md": ("decide/evidence.py", "results/load.py", "results/spec.py")}


def _anchors(doc: Path) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub makes them: a heading's text lower-cased,
    its punctuation dropped, its spaces `-`; a repeated one's anchor gets `-1`, `-2`, ... in order."""
    heads = re.findall(r"^#+ (.*)$", doc.read_text(), re.MULTILINE)
    anchors: set[str] = set()
    for head in heads:
        slug = re.sub(r"[^\w\- ]", "", head.strip().lower()).replace(" ", "-")
        repeat = 0
        while (anchor := f"{slug}-{repeat}" if repeat else slug) in anchors:
            repeat += 1
        anchors.add(anchor)
    return anchors


def _outside_code(text: str) -> str:
    """The text with its fenced code blocks and code spans blanked (the lines kept)."""
    lines, fence = [], ""  # fence: the run of ` or ~ that opened the block we are in
    for line in text.splitlines():
        mark = FENCE.match(line)
        if fence:  # closed by a run of its character at least as long, with nothing after it
            closes = mark is not None and mark[1].startswith(fence) and not line.strip(fence[0] + " ")
            fence = "" if closes else fence
        elif mark is not None:
            fence = mark[1]
        lines.append("" if fence or mark is not None else CODE_SPAN.sub("", line))
    return "\n".join(lines)


def link_targets(text: str) -> list[str]:
    """The destination of every inline link and reference definition outside code, in order."""
    prose = _outside_code(text)
    found = [(m.start(), m[1] if m[1] is not None else m[2]) for m in MD_LINK.finditer(prose)]
    found += [(m.start(), m[1] if m[1] is not None else m[2]) for m in MD_REFERENCE.finditer(prose)]
    found += [(m.start(), next(g for g in m.groups() if g is not None)) for m in HTML_LINK.finditer(prose)]
    return [target for _, target in sorted(found)]


def broken_links(doc: Path, text: str) -> list[str]:
    """Every relative link of a document whose file (from the document's folder) or anchor is missing."""
    broken = []
    for target in link_targets(text):
        if re.match(r"[a-z][a-z+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / unquote(path)) if path else doc
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)
    return broken


def missing_python_paths(doc: Path, text: str) -> list[str]:
    """Every Python file the prose names that is neither the checkout's, the package's nor beside the
    document (an engine's source, a pattern and the history allowed above aside)."""
    bases = (ROOT, ROOT / "src" / "mtpverdict", doc.parent)
    return [
        name
        for name in PROSE_PY.findall(text)
        if not set("<*{") & set(name)
        and not name.startswith(ENGINE_SOURCES)
        and name not in HISTORY.get(doc.name, ())
        and not any((base / name).exists() for base in bases)
    ]


def _prose() -> list[Path]:
    return [*documents(), ROOT / "CONTRIBUTING.md"]


def test_every_relative_link_resolves_from_its_document() -> None:
    broken = [f"{doc.name}: {t}" for doc in _prose() for t in broken_links(doc, doc.read_text())]
    assert not broken, f"links to files or anchors that do not exist: {broken}"


def test_every_python_file_the_prose_names_exists() -> None:
    missing = [f"{doc.name}: {n}" for doc in _prose() for n in missing_python_paths(doc, doc.read_text())]
    assert not missing, f"the docs name Python files that do not exist: {missing}"


def test_the_link_and_path_checks_see_what_is_stale(tmp_path: Path) -> None:
    doc = ROOT / "docs" / "architecture.md"
    text = (
        "[a](results-format.md) [b](../README.md) [c](https://x.org/y.md) [d](#where-a-change-belongs)\n"
        "[e](../nothing.md) [f](results-format.md#no-such-heading) [g](#no-such-heading)\n"
        "engines/names.py, src/mtpverdict/parse/reader.py and vllm/v1/core/kv_cache_utils.py are there;\n"
        "parse/gone.py and tests/engines/test_gone.py are not, tests/rules/test_<kind>.py is a pattern\n"
    )
    assert broken_links(doc, text) == [
        "../nothing.md",
        "results-format.md#no-such-heading",
        "#no-such-heading",
    ]
    assert missing_python_paths(doc, text) == ["parse/gone.py", "tests/engines/test_gone.py"]


def test_the_link_check_reads_titled_links() -> None:
    doc = ROOT / "docs" / "architecture.md"
    text = (
        '[a](results-format.md "Results") [b](gone.md "Gone") [c](gone-too.md \'t\') [d](gone-three.md (t))\n'
        '![e](also-gone.png "an image") [f](results-format.md#no-such-heading "t")\n'
    )
    assert broken_links(doc, text) == [
        "gone.md",
        "gone-too.md",
        "gone-three.md",
        "also-gone.png",
        "results-format.md#no-such-heading",
    ]


def test_the_link_check_reads_reference_definitions() -> None:
    doc = ROOT / "docs" / "architecture.md"
    text = (
        "See [the format][fmt] and [the old one][old].\n\n"
        "[fmt]: results-format.md\n"
        '[old]: old-format.md "The old format"\n'
        "   [spaced]: <gone with spaces.md>\n"
        "[anchor]: #no-such-heading\n"
        "[web]: https://example.org/gone.md\n"
        "    [indented]: code-block.md\n"  # four spaces: an indented code block, not a definition
    )
    assert broken_links(doc, text) == ["old-format.md", "gone with spaces.md", "#no-such-heading"]


def test_the_link_check_takes_pointy_destinations_and_leaves_autolinks(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    (tmp_path / "a file.md").write_text("# Top\n")
    (tmp_path / "x.md").write_text("# X\n")
    text = (
        '[a](<a file.md>) [b](<x.md> "X") [c](<a file.md#top>) [d](a%20file.md)\n'
        "<x.md> <gone.md> <https://example.org/gone.md> <mailto:someone@example.org>\n"
        "[e](<gone file.md>)\n"
    )
    assert broken_links(doc, text) == ["gone file.md"]


def test_the_link_check_leaves_code_alone(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    text = (
        "````python\nvalues[i](gone.md)\n[ref]: gone.md\n```\nstill code: [x](gone.md)\n`````\n"
        "~~~\n[y](gone.md)\n~~~\n"
        "`[z](gone.md)` and ``[w](gone.md)`` are code; [v](after-code.md) is a link\n"
    )
    assert broken_links(doc, text) == ["after-code.md"]


def test_the_link_check_reads_nested_brackets_and_text_across_lines(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    text = (
        "[the [nested] text](gone-nested.md) and [two [levels [deep]]](gone-deep.md)\n"
        "a [link whose text\nruns on](gone-wrapped.md) and [text](\ngone-next.md)\n\n"
        "[a paragraph\n\nbreak](not-a-link.md)\n"
    )
    assert broken_links(doc, text) == ["gone-nested.md", "gone-deep.md", "gone-wrapped.md", "gone-next.md"]


def test_the_link_check_reads_html_links(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    (tmp_path / "there.md").write_text("# There\n")
    text = (
        '<a href="there.md">ok</a> <a href="gone-html.md">x</a> <A class="c" HREF=\'gone-single.md\'>y</A>\n'
        '<a href=gone-bare.md>z</a> <a href="https://example.org/x.md">w</a> <a href="#gone-anchor">v</a>\n'
        '<abbr title="href=gone.md">u</abbr>\n'
    )
    assert broken_links(doc, text) == ["gone-html.md", "gone-single.md", "gone-bare.md", "#gone-anchor"]


def test_the_link_check_reads_a_definition_whose_destination_is_on_the_next_line(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    (tmp_path / "there.md").write_text("# There\n")
    text = (
        "[ok]:\n  there.md\n"
        '[gone]:\n   gone-next-line.md\n  "a title on its own line"\n'
        "[pointy]:\n<gone pointy.md>\n"
    )
    assert broken_links(doc, text) == ["gone-next-line.md", "gone pointy.md"]


def test_the_link_check_takes_githubs_anchors_of_repeated_headings(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    text = "# Same\n## Same\n### Same\n# Other `code` (x)!\n"
    links = "[a](#same) [b](#same-1) [c](#same-2) [d](#same-3) [e](#other-code-x) [f](doc.md#same-1)\n"
    doc.write_text(text + links)
    assert broken_links(doc, doc.read_text()) == ["#same-3"]


def test_every_dotted_name_the_docs_give_resolves() -> None:
    names = [(doc, name) for doc, name in _claims(DOTTED) if not name.endswith(FILE_SUFFIXES)]
    assert len(names) > 10
    missing = [(doc, name) for doc, name in names if not _resolves(name.removeprefix("mtpverdict."))]
    assert not missing, f"the docs name functions or modules that do not exist: {missing}"


def _resolves(dotted: str) -> bool:
    """`stats.blocked.blocked_family_procedure`: a module of mtpverdict, then attributes of it."""
    parts = dotted.split(".")
    for cut in range(len(parts), -1, -1):
        try:
            obj: object = importlib.import_module(".".join(["mtpverdict", *parts[:cut]]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_decide_uses_the_blocked_procedure_the_scale_out_doc_says_it_does() -> None:
    """docs/scale-out.md: `decide` compares arms within a device with stats.blocked."""
    import mtpverdict.evidence.comparisons as comparisons
    from mtpverdict.stats.blocked import blocked_family_procedure

    text = (ROOT / "docs" / "scale-out.md").read_text()
    assert "`stats.blocked.blocked_family_procedure`" in text and "does not call it yet" not in text
    assert getattr(comparisons, "blocked_family_procedure", None) is blocked_family_procedure


def test_the_readme_lists_every_exit_code_the_cli_has() -> None:
    from mtpverdict.cli import _common

    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    listed = {int(code) for code in re.findall(r"^\| (\d+) \|", table, re.M)}
    codes = {value for name, value in vars(_common).items() if name.startswith("EXIT_")}
    assert listed == codes


# ---- the session machinery itself -----------------------------------------------------------------


def test_a_session_output_that_drifts_does_not_match() -> None:
    shown = ["decision: promote", "  ...", "", "wrote d.json"]
    assert matches(shown, ["decision: promote", "  - a", "  - b", "", "wrote d.json"])
    assert matches(shown, ["decision: promote", "", "wrote d.json"])
    assert not matches(shown, ["decision: inconclusive", "", "wrote d.json"])
    assert not matches(shown, ["decision: promote", "  - a", "wrote d.json"])
    assert matches(["off_A boot 1: ready in 63 s"], ["off_A boot 1: ready in 71 s"])  # wall clock
    assert not matches(["step 16.6 ms"], ["step 17.0 ms"])  # computed, compared


def test_regenerating_keeps_each_ellipsis_where_it_was() -> None:
    shown = ["head", "  - first", "  ...", "  - k7 rejected: old", "  ...", "", "wrote d.json"]
    got = [
        "head",
        "new line",
        "  - first",
        "  - second",
        "  - k7 rejected: new",
        "  - last",
        "",
        "wrote d.json",
    ]
    out = rewritten(shown, got, "here")
    assert out == [
        "head",
        "new line",
        "  - first",
        "  ...",
        "  - k7 rejected: new",
        "  ...",
        "",
        "wrote d.json",
    ]
    assert matches(out, got)
    with pytest.raises(AssertionError, match="edit it by hand"):
        rewritten(["head", "...", "  - gone", "..."], ["head", "other"], "here")


def test_sessions_and_markers_are_read_from_the_markdown(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```\n$ mtpverdict validate x \\\n    --flag\nout 1\n$ echo $?\n0\n```\n\n"
        "<!-- not run: needs a server -->\n```\n$ mtpverdict collect c.toml --out r\n```\n\n"
        "```\nmtpverdict decide r\n```\n"
    )
    first, second, third = blocks(doc)
    assert [(c.text, c.shown) for c in first.commands] == [
        ("mtpverdict validate x --flag", ["out 1"]),
        ("echo $?", ["0"]),
    ]
    assert second.not_run == "needs a server" and not second.commands
    assert third.names_a_command and not third.is_session and third.not_run is None


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("mtpverdict decide r", True),
        ("$ COLUMNS=80 mtpverdict decide r", True),
        ("python3 -m venv .venv && .venv/bin/mtpverdict decide r --out d.json", True),
        ("python -m mtpverdict validate r", True),
        ("sbatch --dependency=afterany:$jobid --wrap 'mtpverdict merge a b --out c'", True),
        ("jobid=$(mtpverdict plan --effect 5%)", True),
        ('"$RUNNER_TEMP/mtpverdict/bin/pip" install "mtpverdict @ git+${REPO}@${COMMIT}"', False),
        ("from mtpverdict import gate", False),
        ("ray start --resources '{\"mtpverdict-device-gpu0\": 1}'", False),
        ("   1 mtpverdict collect              106.0          317.8   runs: 12 ms/216", False),
        ("evidence/seat-campaign/      a results directory written by `mtpverdict collect`", False),
    ],
)
def test_a_block_names_a_command_wherever_the_line_runs_it(line: str, names: bool) -> None:
    block = Block(ROOT / "README.md", 0, ["", line])
    assert block.names_a_command is names
