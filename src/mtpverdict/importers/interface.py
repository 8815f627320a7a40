"""The importer interface: one module per tool turns its result files into a typed Campaign and records.

An importer has one method, ``run(out, entries)``. Most subclass ``importers.write.TypedImporter`` and
implement ``read``, which returns an ``Imported`` (the typed campaign it needs, the typed records, the raw
files to keep under raw/, warnings); ``write_imported`` merges that campaign with an existing
campaign.json and appends the records, so those importers write through one place. A file an
importer cannot map raises the package's input error (``EngineTextError``) with one ``Problem`` per
problem, each naming the file and the key (or line); nothing is guessed.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from mtpverdict.errors import EngineTextError, Problem
from mtpverdict.formats.results import Arm, Campaign, Method, Record, Role, Spec, Workload


@dataclass(frozen=True, slots=True)
class Where:
    """Where an arm's description was given, so a problem with it names that place: the command line
    (its keys are the options) or a manifest row (the manifest, the row's line, its boots[i] table)."""

    source: str = "command line"
    line: int | None = None
    prefix: str = "--"  # column `k` is the key `--k` on the command line, `boots[2].k` in a TOML manifest

    def error(self, message: str, key: str) -> EngineTextError:
        """The package's input error for one problem of the column `key`."""
        return EngineTextError([Problem(self.source, message, line=self.line, key=f"{self.prefix}{key}")])


COMMAND_LINE = Where()


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """What the user says about the arm a file measured: the files themselves do not know it."""

    arm: str
    boot: int = 1
    role: Role | None = None
    method: Method | None = None
    k: int | None = None
    workload: str | None = None  # None: the importer's own default
    concurrency: int | None = None  # for files that do not record it
    order: int | None = None  # boot order in the campaign; None: after every boot already imported
    where: Where = COMMAND_LINE  # where it was given, for the problems it raises

    def typed_arm(self, order: int) -> Arm:
        """The campaign arm this spec describes (a control when no method or k is given); an
        EngineTextError naming where the spec was given when it describes no arm."""
        role = self.role
        if role is None:
            role = Role.CANDIDATE if self.method is not None or self.k else Role.CONTROL
        if role is Role.CONTROL:
            if self.method is not None or self.k:
                raise self.where.error(
                    f"arm {self.arm!r}: a control arm runs with speculation off: drop the method and k",
                    "method" if self.method is not None else "k",
                )
            spec = Spec(method=None, k=0)
        else:
            if self.method is None:
                raise self.where.error(
                    f"arm {self.arm!r}: a candidate arm needs a method, one of {', '.join(Method)}", "method"
                )
            if self.k is None or self.k < 1:
                raise self.where.error(
                    f"arm {self.arm!r}: a candidate arm needs k, the draft tokens per step", "k"
                )
            spec = Spec(method=self.method, k=self.k)
        return Arm(name=self.arm, role=role, spec=spec, order=order, serve_argv=None)


@dataclass(frozen=True, slots=True)
class RawFile:
    """A file kept verbatim under raw/ (``relative`` is below raw/), so records can point at it."""

    relative: str
    text: str


@dataclass(frozen=True, slots=True)
class Imported:
    """What an importer read: the campaign it needs (merged into any existing one) and the records."""

    campaign: Campaign
    records: tuple[Record, ...]
    raw: tuple[RawFile, ...]
    warnings: tuple[str, ...]
    markers: tuple[str, ...]  # note prefixes of this import's records: a key held by another file clashes


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import wrote, what was already there, and what to know about the evidence."""

    out: str
    written: tuple[tuple[str, int], ...]  # (record kind, records written), sorted by kind
    already_present: int
    runs: int
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Entry:
    """One file to import and the boot it is (from the command line or a manifest row)."""

    file: Path
    spec: ArmSpec


class Importer(ABC):
    """One tool's result files. ``name`` is the `mtpverdict import` sub-command."""

    name: ClassVar[str]
    tool: ClassVar[str]  # the tool and the files it writes, for help text and docs

    @abstractmethod
    def run(self, out: str | os.PathLike[str], entries: Sequence[Entry]) -> ImportReport:
        """Import each entry's file as the boot its spec describes into the results directory ``out``."""


def new_campaign(
    campaign_id: str, title: str, source: str, engine: str | None, model: str | None, workload: Workload
) -> Campaign:
    """A campaign with no arms yet, for a results directory an import creates."""
    from mtpverdict.formats.results import Scope

    return Campaign(
        format="mtpverdict.results/1",
        id=campaign_id,
        title=title,
        scope=Scope(device=None, engine=engine, engine_version=None, model=model, claim=None),
        arms=(),
        workloads=(workload,),
        window_tokens=None,
        source=source,
    )
