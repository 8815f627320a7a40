"""Commands over engine output: `parse` engine text, `import aiperf|guidellm|vllm-bench` result files.

`parse FILE...` prints a table per file, or with --json the ParseResult object of each file (one
file: the object; several files: a JSON list of objects in argument order). `import NAME` writes
results format v1 records, either FILES of one arm's boot (--arm, --boot) or the files a --manifest
names with their arms, boots and boot order. Bad input prints `Error: file:line: message` and exits 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from mtpverdict._text import terminal_safe
from mtpverdict.cli._common import echo, fail_input
from mtpverdict.cli._common import fail as _fail
from mtpverdict.engines.names import ENGINE_CHOICES

if TYPE_CHECKING:
    from mtpverdict.errors import InputError
    from mtpverdict.importers import ArmSpec, Entry, ImportReport
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
    importer.command("aiperf")(aiperf)
    importer.command("guidellm")(guidellm)
    app.add_typer(importer, name="import")


def _either(names: tuple[str, ...]) -> str:
    """`a, b or c`."""
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else "".join(names)


def parse(
    files: Annotated[list[Path], typer.Argument(help="Engine logs, /metrics scrapes or response JSON.")],
    engine: Annotated[
        str, typer.Option(help=f"Engine that wrote the text: {_either(ENGINE_CHOICES)}.")
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


FilesArg = Annotated[
    list[Path] | None, typer.Argument(help="Result files of one arm's boot (or use --manifest).")
]
ManifestOpt = Annotated[
    Path | None,
    typer.Option(help="TOML or CSV manifest: file, arm, boot, order (role, method, k, workload optional)."),
]
OutOpt = Annotated[Path, typer.Option(help="Results directory (created if absent).")]
ArmOpt = Annotated[str | None, typer.Option(help="Arm the files belong to (added to campaign.json if new).")]
BootOpt = Annotated[int, typer.Option(help="Boot number of the arm these files come from.")]
RoleOpt = Annotated[
    str | None, typer.Option(help="control or candidate (default: candidate when --method/--k given).")
]
MethodOpt = Annotated[str | None, typer.Option(help="Speculative method of a candidate arm.")]
KOpt = Annotated[int | None, typer.Option(help="Speculative tokens per step of a candidate arm.")]
ConcurrencyOpt = Annotated[
    int | None, typer.Option(help="Requests in flight, for files that do not record it.")
]


def vllm_bench(
    out: OutOpt,
    files: FilesArg = None,
    manifest: ManifestOpt = None,
    arm: ArmOpt = None,
    boot: BootOpt = 1,
    role: RoleOpt = None,
    method: MethodOpt = None,
    k: KOpt = None,
    workload: Annotated[str, typer.Option(help="Workload id the requests belong to.")] = "vllm-bench",
    concurrency: ConcurrencyOpt = None,
) -> None:
    """Import `vllm bench serve` results as request (or summary) and acceptance records."""
    if manifest is not None:
        _import("vllm-bench", out, files, manifest, arm, boot, role, method, k, workload, concurrency)
        return
    from mtpverdict.errors import InputError
    from mtpverdict.importers import import_vllm_bench

    if not files or arm is None:
        _fail("give FILES with --arm, or --manifest")
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


def aiperf(
    out: OutOpt,
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="AIPerf artifact directories, profile_export.jsonl or profile_export_aiperf.json."
        ),
    ] = None,
    manifest: ManifestOpt = None,
    arm: ArmOpt = None,
    boot: BootOpt = 1,
    role: RoleOpt = None,
    method: MethodOpt = None,
    k: KOpt = None,
    workload: Annotated[str, typer.Option(help="Workload id the requests belong to.")] = "aiperf",
    concurrency: ConcurrencyOpt = None,
) -> None:
    """Import AIPerf profile exports as request (or summary) records."""
    _import("aiperf", out, files, manifest, arm, boot, role, method, k, workload, concurrency)


def guidellm(
    out: OutOpt,
    files: Annotated[
        list[Path] | None, typer.Argument(help="GuideLLM benchmarks.json or benchmarks.yaml files.")
    ] = None,
    manifest: ManifestOpt = None,
    arm: ArmOpt = None,
    boot: BootOpt = 1,
    role: RoleOpt = None,
    method: MethodOpt = None,
    k: KOpt = None,
    workload: Annotated[str, typer.Option(help="Workload id the requests belong to.")] = "guidellm",
    concurrency: ConcurrencyOpt = None,
) -> None:
    """Import GuideLLM benchmarks as request records, one cell per benchmark."""
    _import("guidellm", out, files, manifest, arm, boot, role, method, k, workload, concurrency)


def _import(
    name: str,
    out: Path,
    files: list[Path] | None,
    manifest: Path | None,
    arm: str | None,
    boot: int,
    role: str | None,
    method: str | None,
    k: int | None,
    workload: str,
    concurrency: int | None,
) -> None:
    """Files of one arm's boot, or a manifest's rows, through the named importer."""
    from mtpverdict.errors import InputError
    from mtpverdict.importers import import_files, read_manifest

    try:
        if manifest is not None:
            if files or arm is not None:
                _fail("give FILES with --arm, or --manifest, not both")
            entries = list(read_manifest(manifest))
        else:
            if not files or arm is None:
                _fail("give FILES with --arm, or --manifest")
            spec = _spec(arm, boot, role, method, k, workload, concurrency)
            entries = [_entry(file, spec) for file in files]
        report = import_files(name, out, entries)
    except InputError as exc:
        _fail_inputs([exc])
    except ValueError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename or out}: {exc.strerror or exc}")
    echo(render_import(report))


def _spec(
    arm: str,
    boot: int,
    role: str | None,
    method: str | None,
    k: int | None,
    workload: str,
    concurrency: int | None,
) -> ArmSpec:
    from mtpverdict.formats.results import Method, Role
    from mtpverdict.importers import ArmSpec

    if role is not None and role not in tuple(Role):
        raise ValueError(f"--role must be one of {', '.join(Role)}; got {role!r}")
    if method is not None and method not in tuple(Method):
        raise ValueError(f"--method must be one of {', '.join(Method)}; got {method!r}")
    return ArmSpec(
        arm=arm,
        boot=boot,
        role=None if role is None else Role(role),
        method=None if method is None else Method(method),
        k=k,
        workload=workload,
        concurrency=concurrency,
    )


def _entry(file: Path, spec: ArmSpec) -> Entry:
    from mtpverdict.importers import Entry

    return Entry(file=file, spec=spec)


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
