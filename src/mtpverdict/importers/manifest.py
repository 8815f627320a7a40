"""Import manifests: which file is which arm's boot, and the order the boots ran in (TOML or CSV).

TOML: one ``[[boots]]`` table per file; CSV: a header row, then one row per file. Columns: ``file``
(relative to the manifest), ``arm``, ``boot``, ``order`` (position in the campaign's boot order, from 1)
required; ``role``, ``method``, ``k``, ``workload``, ``concurrency`` optional. Every problem is reported
at once, each naming the manifest and the row's line (CSV) or ``boots[i].key`` (TOML).
"""

from __future__ import annotations

import csv
import io
import re
import tomllib
from pathlib import Path
from typing import Any

from mtpverdict.errors import CampaignError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.results import Method, Role
from mtpverdict.importers.interface import ArmSpec, Entry, Where

MAX_MANIFEST_BYTES = 4 << 20
REQUIRED = ("file", "arm", "boot", "order")
OPTIONAL = ("role", "method", "k", "workload", "concurrency")
INTEGERS = ("boot", "order", "k", "concurrency")


def read_manifest(path: str | Path) -> tuple[Entry, ...]:
    """The manifest's rows in file order; CampaignError listing every problem."""
    source = str(path)
    data = _check.read_document(
        Path(path), limit=MAX_MANIFEST_BYTES, what="an import manifest", error=CampaignError
    )
    text = _check.text_of(data, source, CampaignError)
    rows = _toml_rows(text, source) if source.endswith(".toml") else _csv_rows(text, source)
    problems: list[Problem] = []
    entries: list[Entry] = []
    for where, row in rows:
        entry = _entry(Path(path).parent, source, where, row, problems)
        if entry is not None:
            entries.append(entry)
    if not rows:
        problems.append(Problem(source, "names no file; list one row per result file"))
    _check_unique(source, rows, entries, problems)
    if problems:
        raise CampaignError(problems)
    return tuple(entries)


def _toml_rows(text: str, source: str) -> list[tuple[tuple[int | None, str], dict[str, Any]]]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError([Problem(source, f"not valid TOML ({exc})")]) from None
    unknown = sorted(set(doc) - {"boots"})
    if unknown:
        raise CampaignError(
            [Problem(source, "unknown key; a manifest holds [[boots]] tables", key=unknown[0])]
        )
    boots = doc.get("boots")
    if not isinstance(boots, list) or not all(isinstance(b, dict) for b in boots):
        raise CampaignError([Problem(source, "must hold [[boots]] tables", key="boots")])
    return [((None, f"boots[{i}]"), row) for i, row in enumerate(boots)]


def _csv_rows(text: str, source: str) -> list[tuple[tuple[int | None, str], dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or ()]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise CampaignError(
            [
                Problem(
                    source,
                    f"the header row lacks {', '.join(missing)} (columns: {', '.join(REQUIRED)})",
                    line=1,
                )
            ]
        )
    rows: list[tuple[tuple[int | None, str], dict[str, Any]]] = []
    for row in reader:
        cleaned = {(k or "").strip(): (v or "").strip() for k, v in row.items() if k is not None}
        if None in row:
            cleaned["\x00extra"] = "yes"
        rows.append(((reader.line_num, ""), {k: v for k, v in cleaned.items() if v != ""}))
    return rows


def _entry(
    base: Path, source: str, where: tuple[int | None, str], row: dict[str, Any], problems: list[Problem]
) -> Entry | None:
    line, prefix = where

    def problem(message: str, key: str) -> None:
        problems.append(Problem(source, message, line=line, key=f"{prefix}.{key}" if prefix else key))

    count = len(problems)
    for key in sorted(set(row) - set(REQUIRED) - set(OPTIONAL)):
        problem("unknown column" if key != "\x00extra" else "more values than header columns", key)
    for key in REQUIRED:
        if key not in row:
            problem("missing; every row names file, arm, boot and order", key)
    values: dict[str, Any] = {}
    for key in INTEGERS:
        if key in row:
            value = _integer(row[key])
            if value is None or value < 1:
                problem(f"must be an integer of 1 or more, not {row[key]!r}", key)
            values[key] = value
    role = row.get("role")
    if role is not None and role not in tuple(Role):
        problem(f"must be one of {', '.join(Role)}, not {role!r}", "role")
    method = row.get("method")
    if method is not None and method not in tuple(Method):
        problem(f"must be one of {', '.join(Method)}, not {method!r}", "method")
    for key in ("file", "arm", "workload"):
        if key in row and not isinstance(row[key], str):
            problem("must be a string", key)
    if len(problems) > count:
        return None
    spec = ArmSpec(
        arm=row["arm"],
        boot=values["boot"],
        order=values["order"],
        role=None if role is None else Role(role),
        method=None if method is None else Method(method),
        k=values.get("k"),
        workload=row.get("workload"),
        concurrency=values.get("concurrency"),
        where=Where(source, line, f"{prefix}." if prefix else ""),
    )
    return Entry(file=base / row["file"], spec=spec)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]+", value.strip()):  # ASCII digits: "²" is no number
        return int(value)
    return None


def _check_unique(
    source: str,
    rows: list[tuple[tuple[int | None, str], dict[str, Any]]],
    entries: list[Entry],
    problems: list[Problem],
) -> None:
    if len(entries) != len(rows):
        return
    orders: dict[int, str] = {}
    for (where, _), entry in zip(rows, entries, strict=True):
        line, prefix = where
        order = entry.spec.order or 0
        if order in orders and orders[order] != f"{entry.spec.arm}/{entry.spec.boot}":
            problems.append(
                Problem(
                    source,
                    f"order {order} is given to {orders[order]} already; each boot has its own place",
                    line=line,
                    key=f"{prefix}.order" if prefix else "order",
                )
            )
        orders.setdefault(order, f"{entry.spec.arm}/{entry.spec.boot}")
