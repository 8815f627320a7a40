"""The registry of importers: one module per tool under importers/, each exposing ``IMPORTER``.

Adding an importer is one module with its ``IMPORTER`` (an ``interface.Importer``), listed in
``IMPORTERS`` below, an `mtpverdict import NAME` command in cli/engine.py, a section in
docs/imports.md, real files the tool wrote under tests/data/imports/ and tests in
tests/importers/test_<module>.py; tests/importers/test_registry.py fails for an importer missing any.
"""

from __future__ import annotations

from mtpverdict.importers import aiperf, guidellm, vllm_bench
from mtpverdict.importers.interface import Importer

IMPORTERS: dict[str, Importer] = {
    importer.name: importer for importer in (aiperf.IMPORTER, guidellm.IMPORTER, vllm_bench.IMPORTER)
}
IMPORTER_NAMES = tuple(IMPORTERS)
