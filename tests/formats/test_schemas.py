"""The shipped JSON Schemas agree with the loader's field specs and with what the tool writes."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest

from mtpverdict.formats.schemas import SCHEMAS, render_schema

from ..conftest import FIXTURES, GOLDEN


def _schema(name: str) -> dict[str, object]:
    data = json.loads(resources.files("mtpverdict").joinpath("schemas", name).read_text())
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_shipped_schema_is_generated_from_the_field_specs(name: str) -> None:
    shipped = resources.files("mtpverdict").joinpath("schemas", name).read_text()
    assert shipped == render_schema(name), (
        f"regenerate src/mtpverdict/schemas/{name} with mtpverdict.formats.schemas.write_schemas()"
    )


@pytest.mark.parametrize(
    "fixture", sorted(p.name for p in FIXTURES.iterdir() if (p / "campaign.json").exists())
)
def test_fixtures_satisfy_the_json_schemas(fixture: str) -> None:
    campaign = json.loads((FIXTURES / fixture / "campaign.json").read_text())
    jsonschema.validate(campaign, _schema("campaign-1.schema.json"))
    records_schema = _schema("records-1.schema.json")
    validator = jsonschema.Draft202012Validator(records_schema)
    for line in (FIXTURES / fixture / "records.jsonl").read_text().splitlines():
        validator.validate(json.loads(line))


@pytest.mark.parametrize("golden", sorted(p.name for p in GOLDEN.glob("*.json")))
def test_decisions_satisfy_the_decision_schema(golden: str) -> None:
    jsonschema.validate(json.loads((GOLDEN / golden).read_text()), _schema("decision-2.schema.json"))
