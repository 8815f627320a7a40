"""Writes what an importer read: merges its typed campaign into campaign.json and appends its records.

An arm already in campaign.json must agree with the imported one (role, method, k); new arms and
workloads are added. Records go through ``ResultsWriter`` (validated, durable, a present key skipped),
so re-importing a file is a no-op; a key already held by a record of another file is refused, naming
both. Every import writes one boot record per boot it read, with its position in the campaign's boot
order, so the drift check sees the order the boots ran in.
"""

from __future__ import annotations

import os
import re
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from mtpverdict.errors import Problem, ResultsError
from mtpverdict.formats import _check
from mtpverdict.formats.results import NAME_PATTERN, Arm, BootRecord, Campaign, Workload, as_builtins
from mtpverdict.formats.results_io import CAMPAIGN_FILE, ResultsWriter, campaign_from_json, record_key
from mtpverdict.importers.interface import ArmSpec, Entry, Imported, Importer, ImportReport, new_campaign

NAME_RE = re.compile(NAME_PATTERN)


def existing_campaign(out: str | os.PathLike[str]) -> Campaign | None:
    """The campaign a results directory holds, typed; None when there is none yet."""
    path = Path(out) / CAMPAIGN_FILE
    if not path.exists():
        return None
    data = _check.read_document(path, what="campaign.json", error=ResultsError)
    try:
        obj = _check.loads_strict(_check.text_of(data, str(path), ResultsError))
    except ValueError as exc:
        raise ResultsError([Problem(str(path), f"cannot be read as JSON: {exc}")]) from None
    return campaign_from_json(obj, str(path))


def campaign_id(out: str | os.PathLike[str], fallback: str) -> str:
    """A campaign id from the results directory's name."""
    name = re.sub(r"[^A-Za-z0-9_.+-]", "-", Path(out).resolve().name).lstrip("_.+-")[:64]
    return name if NAME_RE.match(name) else fallback


def check_names(spec: ArmSpec) -> None:
    """Arm and workload names as campaign.json allows them; boot, concurrency and order from 1 (an
    EngineTextError naming where the spec was given, otherwise)."""
    for label, name in (("arm", spec.arm), ("workload", spec.workload)):
        if name is not None and not NAME_RE.match(name):
            raise spec.where.error(
                f"{label} {name!r} must start with a letter or digit and hold only letters, digits and "
                "_.+- (at most 64 characters)",
                label,
            )
    for label, value in (("boot", spec.boot), ("concurrency", spec.concurrency), ("order", spec.order)):
        if value is not None and value < 1:
            raise spec.where.error(f"{label} must be 1 or more; got {value}", label)


def merged(existing: Campaign | None, imported: Campaign, source: str) -> Campaign:
    """``existing`` with the imported arms and workloads it lacks; a clashing arm is refused."""
    if existing is None:
        return imported
    held = {arm.name: arm for arm in existing.arms}
    problems = []
    arms = list(existing.arms)
    for arm in imported.arms:
        old = held.get(arm.name)
        if old is None:
            arms.append(arm)
        elif (
            old.role != arm.role
            or old.spec.method != arm.spec.method
            or (old.spec.k or 0) != (arm.spec.k or 0)
        ):
            problems.append(
                Problem(
                    source,
                    f"arm {arm.name!r} already exists as {old.role} {old.spec.label()}, not {arm.role} "
                    f"{arm.spec.label()}; give the same role, method and k or import under another arm name",
                    key="arms",
                )
            )
    if problems:
        raise ResultsError(problems)
    ids = {w.id for w in existing.workloads}
    workloads = (*existing.workloads, *(w for w in imported.workloads if w.id not in ids))
    return msgspec.structs.replace(existing, arms=tuple(arms), workloads=workloads)


def next_orders(campaign: Campaign | None, records: list[dict[str, Any]]) -> int:
    """The first free boot order: after every arm's and every boot record's."""
    orders = [arm.order for arm in campaign.arms] if campaign is not None else []
    orders += [int(r["order"]) for r in records if r.get("kind") == "boot"]
    return max(orders, default=0) + 1


def boot_record(arm: str, boot: int, order: int, note: str) -> BootRecord:
    """A boot the imported tool measured: ready (it served), nothing else known about the server."""
    return BootRecord(
        arm=arm,
        boot=boot,
        order=order,
        status="ready",
        ready_seconds=None,
        kv_cache_tokens=None,
        block_size=None,
        num_blocks=None,
        max_model_len=None,
        engine_version=None,
        argv=None,
        error=None,
        note=note,
    )


def arm_orders(specs: list[ArmSpec], first_free: int) -> tuple[list[int], dict[str, int]]:
    """Each boot's order (given, else in file order after ``first_free``) and each arm's first."""
    orders: list[int] = []
    following = first_free
    for spec in specs:
        if spec.order is not None:
            orders.append(spec.order)
        else:
            orders.append(following)
            following += 1
    firsts: dict[str, int] = {}
    for spec, order in zip(specs, orders, strict=True):
        firsts[spec.arm] = min(order, firsts.get(spec.arm, order))
    return orders, firsts


def typed_arms(specs: list[ArmSpec], firsts: dict[str, int]) -> tuple[Arm, ...]:
    """One arm per name, in first-boot order; specs of one arm must agree."""
    arms: dict[str, Arm] = {}
    for spec in specs:
        arm = spec.typed_arm(firsts[spec.arm])
        held = arms.setdefault(spec.arm, arm)
        if held != arm:
            raise spec.where.error(
                f"arm {spec.arm!r} is described twice with different role, method or k", "arm"
            )
    return tuple(sorted(arms.values(), key=lambda a: (a.order, a.name)))


def write_imported(out: str | os.PathLike[str], imported: Imported, runs: int) -> ImportReport:
    """Merge the campaign, keep the raw files, append the records; report counts and warnings."""
    root = Path(out)
    source = str(root / CAMPAIGN_FILE)
    campaign = merged(existing_campaign(root), imported.campaign, source)
    written: dict[str, int] = {}
    present = 0
    with ResultsWriter(root, msgspec.to_builtins(campaign)) as writer:
        held = {record_key(r): r for r in writer.records}
        planned = [as_builtins(record) for record in imported.records]
        _refuse_clashes(source, held, planned, imported.markers)
        for raw in imported.raw:
            target = writer.raw_path(raw.relative)
            if not target.exists():
                target.write_text(raw.text, encoding="utf-8")
        for record in planned:
            try:
                fresh = writer.append(record)
            except ValueError as exc:
                raise ResultsError(
                    [Problem(source, f"an imported record cannot be written: {exc}")]
                ) from None
            if fresh:
                written[record["kind"]] = written.get(record["kind"], 0) + 1
            else:
                present += 1
    warnings = list(imported.warnings)
    if not any(arm.is_control for arm in campaign.arms):
        warnings.append("the campaign has no control arm yet; import an unspeculated run as a control")
    return ImportReport(
        out=str(root),
        written=tuple(sorted(written.items())),
        already_present=present,
        runs=runs,
        warnings=tuple(warnings),
    )


def _refuse_clashes(
    source: str,
    held: dict[tuple[Any, ...], dict[str, Any]],
    planned: list[dict[str, Any]],
    markers: tuple[str, ...],
) -> None:
    """A key already recorded from another file (or twice in this import) is an error, before any write."""
    seen: set[tuple[Any, ...]] = set()
    problems = []
    for record in planned:
        key = record_key(record)
        if record["kind"] == "boot" and key not in seen:
            seen.add(key)
            continue  # several files may measure one boot (e.g. one per concurrency): its record is shared
        other = held.get(key)
        note = str(other.get("note") or "") if other is not None else ""
        from_us = other is not None and any(note.startswith(m) for m in markers)
        if key in seen or (other is not None and not from_us):
            where = f"arm {record.get('arm')} boot {record.get('boot')}"
            problems.append(
                Problem(
                    source,
                    f"a {record['kind']} record of {where} is already recorded from another file "
                    f"({note or 'collected'}); import this file under another boot",
                    key="records",
                )
            )
            break
        seen.add(key)
    if problems:
        raise ResultsError(problems)


class TypedImporter(Importer):
    """An importer that reads files into typed records; writing is shared (``write_imported``)."""

    @abstractmethod
    def read(self, entries: Sequence[Entry], held: Held) -> Imported:
        """The campaign and records of ``entries``; ``held`` is what the results directory holds."""

    def run(self, out: str | os.PathLike[str], entries: Sequence[Entry]) -> ImportReport:
        for entry in entries:
            check_names(entry.spec)
        held = held_in(out)
        return write_imported(out, self.read(entries, held), runs=len(entries))


@dataclass(frozen=True, slots=True)
class Held:
    """The campaign and boot orders a results directory already holds (None and empty when new)."""

    campaign: Campaign | None
    next_order: int
    out: Path


def held_in(out: str | os.PathLike[str]) -> Held:
    """What an import must know of the directory it writes into."""
    campaign = existing_campaign(out)
    records: list[dict[str, Any]] = []
    path = Path(out) / "records.jsonl"
    if path.exists():
        with path.open(encoding="utf-8") as fh:
            records = [
                r
                for r in (_check.loads_strict(line) for line in fh if '"boot"' in line)
                if r.get("kind") == "boot"
            ]
    return Held(campaign=campaign, next_order=next_orders(campaign, records), out=Path(out))


def imported_campaign(
    held: Held,
    entries: Sequence[Entry],
    firsts: dict[str, int],
    *,
    default_workload: str,
    title: str,
    source: str,
    model: str | None,
    description: str,
) -> Campaign:
    """The typed campaign an import needs: its arms in first-boot order and its workloads."""
    names = list(dict.fromkeys(e.spec.workload or default_workload for e in entries)) or [default_workload]
    workloads = tuple(
        Workload(id=w, prompt_tokens=None, max_tokens=None, expect_identical=False, description=description)
        for w in names
    )
    campaign = new_campaign(campaign_id(held.out, default_workload), title, source, None, model, workloads[0])
    return msgspec.structs.replace(
        campaign, arms=typed_arms([e.spec for e in entries], firsts), workloads=workloads
    )


def boot_records(entries: Sequence[Entry], orders: list[int], markers: list[str]) -> list[BootRecord]:
    """One boot record per (arm, boot), at its first entry's order."""
    seen: dict[tuple[str, int], BootRecord] = {}
    for entry, order, marker in zip(entries, orders, markers, strict=True):
        key = (entry.spec.arm, entry.spec.boot)
        if key not in seen:
            seen[key] = boot_record(entry.spec.arm, entry.spec.boot, order, marker)
    return list(seen.values())
