"""Commands over engine output: `parse` engine text, `import vllm-bench` result files.

`parse FILE...` prints a table per file, or with --json the ParseResult object of each file (one
file: the object; several files: a JSON list of objects in argument order). `import vllm-bench`
writes results format v1 records. Bad input prints `Error: file:line: message` and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from mtpverdict._text import terminal_safe
from mtpverdict.cli._common import echo, fail_input
from mtpverdict.cli._common import fail as _fail

if TYPE_CHECKING:
    from mtpverdict.errors import InputError
    from mtpverdict.importers import ImportReport
    from mtpverdict.parse import ParseResult

RATE_DIGITS = 3
LIST_SHOWN = 8  # per-position rates shown in a table cell before eliding


def register(app: typer.Typer) -> None:
    """Add `parse` and the `import` sub-app to the main application."""
    app.command("parse")(parse)
    importer = typer.Typer(
        name="import",
        help="Import other tools' result files into a results directory.",
        no_args_is_help=True,
    )
    importer.command("vllm-bench")(vllm_bench)
    app.add_typer(importer, name="import")


def parse(
    files: Annotated[list[Path], typer.Argument(help="Engine logs, /metrics scrapes or response JSON.")],
    engine: Annotated[
        str, typer.Option(help="Engine that wrote the text: auto, vllm, sglang or llamacpp.")
    ] = "auto",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON: one object, or a list for several files.")
    ] = False,
) -> None:
    """Read spec-decode acceptance and KV capacity from engine text; print a table or JSON."""
    from mtpverdict._jsonio import canonical
    from mtpverdict.errors import InputError
    from mtpverdict.parse import ENGINE_CHOICES, parse_file

    if engine not in ENGINE_CHOICES:
        _fail(f"--engine must be one of {', '.join(ENGINE_CHOICES)}; got {engine!r}")
    results: list[ParseResult] = []
    errors: list[InputError] = []
    for file in files:
        try:
            results.append(parse_file(file, engine))
        except InputError as exc:
            errors.append(exc)
    if errors:
        _fail_inputs(errors)
    if as_json:
        payload = results[0].to_json() if len(results) == 1 else [r.to_json() for r in results]
        echo(canonical(payload), nl=False)
        return
    for file, result in zip(files, results, strict=True):
        echo(render_result(str(file), result))


def vllm_bench(
    files: Annotated[list[Path], typer.Argument(help="`vllm bench serve --save-result` JSON files.")],
    arm: Annotated[str, typer.Option(help="Arm the runs belong to (added to campaign.json if new).")],
    out: Annotated[Path, typer.Option(help="Results directory (created if absent).")],
    boot: Annotated[int, typer.Option(help="Boot number of the arm these runs come from.")] = 1,
    role: Annotated[
        str | None, typer.Option(help="control or candidate (default: candidate when --method/--k given).")
    ] = None,
    method: Annotated[str | None, typer.Option(help="Speculative method of a candidate arm.")] = None,
    k: Annotated[int | None, typer.Option(help="Speculative tokens per step of a candidate arm.")] = None,
    workload: Annotated[str, typer.Option(help="Workload id the requests belong to.")] = "vllm-bench",
    concurrency: Annotated[
        int | None, typer.Option(help="Requests in flight, for files without max_concurrency.")
    ] = None,
) -> None:
    """Import `vllm bench serve` results as request (or summary) and acceptance records."""
    from mtpverdict.errors import InputError
    from mtpverdict.importers import import_vllm_bench

    try:
        report = import_vllm_bench(
            files,
            arm=arm,
            boot=boot,
            out=out,
            role=role,
            method=method,
            k=k,
            workload=workload,
            concurrency=concurrency,
        )
    except InputError as exc:
        _fail_inputs([exc])
    except ValueError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or out}: {exc.strerror or exc}")
    echo(render_import(report))


def render_result(name: str, result: ParseResult) -> str:
    """A human summary of one ParseResult: engine line, acceptance and KV tables, warnings."""
    from tabulate import tabulate

    engine = result.engine or "unknown engine"
    version = f" {result.engine_version}" if result.engine_version else ""
    lines = [terminal_safe(f"{name}: {engine}{version}")]
    if result.acceptance:
        rows = [
            [
                r.line if r.line is not None else "-",
                f"{r.source}/{r.kind}",
                r.scoped,
                _cell(r.drafts),
                _cell(r.draft_tokens),
                _cell(r.accepted_tokens),
                _cell(r.acceptance_rate),
                _cell(r.mean_acceptance_length),
                _rates(r.per_position_rate, r.accepted_per_position),
            ]
            for r in result.acceptance
        ]
        headers = [
            "line",
            "surface",
            "scope",
            "drafts",
            "drafted",
            "accepted",
            "rate",
            "mean len",
            "per position",
        ]
        lines.append(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    else:
        lines.append("no acceptance readings")
    if result.kv_capacity:
        rows = [
            [
                kv.line if kv.line is not None else "-",
                _cell(kv.kv_cache_tokens),
                _cell(kv.window_tokens),
                _cell(kv.max_concurrency),
                _cell(kv.num_blocks),
                _cell(kv.block_size),
            ]
            for kv in result.kv_capacity
        ]
        headers = ["line", "KV tokens", "window", "ceiling x", "blocks", "block size"]
        lines.append(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
    lines.extend(f"warning: {terminal_safe(w)}" for w in result.warnings)
    return "\n".join(lines) + "\n"


def render_import(report: ImportReport) -> str:
    """One line of counts, then warnings."""
    written = ", ".join(f"{n} {kind}" for kind, n in report.written) or "no new records"
    lines = [
        terminal_safe(
            f"{report.out}: {written} from {report.runs} run(s); {report.already_present} already present"
        )
    ]
    lines.extend(f"warning: {terminal_safe(w)}" for w in report.warnings)
    return "\n".join(lines)


def _cell(value: float | int | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{RATE_DIGITS}f}"
    return str(value)


def _rates(rates: tuple[float, ...] | None, counts: tuple[int, ...] | None) -> str:
    shown: list[str]
    if rates is not None:
        shown = [f"{r:.{RATE_DIGITS}f}" for r in rates]
    elif counts is not None:
        shown = [str(c) for c in counts]
    else:
        return "-"
    more = len(shown) - LIST_SHOWN
    return ", ".join(shown[:LIST_SHOWN]) + (f", ... (+{more})" if more > 0 else "")


def _fail_inputs(errors: list[InputError]) -> NoReturn:
    fail_input(*errors)
