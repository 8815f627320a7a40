"""Importers: other tools' result files (AIPerf, GuideLLM, vllm bench serve) into results format v1.

Each tool has one module exposing ``IMPORTER`` (``interface.Importer``), listed in ``registry.IMPORTERS``;
``import_files`` runs one by name. ``read_manifest`` reads a TOML or CSV manifest naming each file's arm,
boot and boot order.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mtpverdict.importers.interface import ArmSpec, Entry, Importer, ImportReport
from mtpverdict.importers.manifest import read_manifest
from mtpverdict.importers.vllm_bench import import_vllm_bench, import_vllm_bench_entries


def import_files(name: str, out: str | os.PathLike[str], entries: Sequence[Entry]) -> ImportReport:
    """Run the importer ``name`` (aiperf, guidellm, vllm-bench) over ``entries`` into ``out``; an
    unknown name is an InputError (and a ValueError, as before) naming the choices."""
    from mtpverdict.errors import Problem, UnknownImporterError
    from mtpverdict.importers.registry import IMPORTERS

    if name not in IMPORTERS:
        choices = ", ".join(IMPORTERS)
        raise UnknownImporterError([Problem("import", f"no importer {name!r}; choose one of {choices}")])
    return IMPORTERS[name].run(out, entries)


__all__ = [
    "ArmSpec",
    "Entry",
    "ImportReport",
    "Importer",
    "import_files",
    "import_vllm_bench",
    "import_vllm_bench_entries",
    "read_manifest",
]
