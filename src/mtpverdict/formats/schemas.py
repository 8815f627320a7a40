"""The JSON Schemas shipped in src/mtpverdict/schemas/, each generated from its format's typed models."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtpverdict.formats._check import render_json_schema
from mtpverdict.formats.decision import decision_schema
from mtpverdict.formats.results import campaign_schema, records_schema

SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "campaign-1.schema.json": campaign_schema,
    "records-1.schema.json": records_schema,
    "decision-2.schema.json": decision_schema,
}
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


def render_schema(name: str) -> str:
    """The text of a shipped schema file, as generated from the models."""
    return render_json_schema(SCHEMAS[name]())


def write_schemas(directory: str | None = None) -> list[str]:
    """Regenerate the shipped schema files (after changing a model); return their paths."""
    target = Path(directory) if directory else SCHEMA_DIR
    written = []
    for name in SCHEMAS:
        path = target / name
        path.write_text(render_schema(name), encoding="utf-8")
        written.append(str(path))
    return written
