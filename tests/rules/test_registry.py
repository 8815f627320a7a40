"""The registry of rule kinds: a half-added kind (no docstring, evaluation, docs or tests) fails loudly."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest

from mtpverdict.evidence.model import Evidence
from mtpverdict.formats.decision import RuleStatus
from mtpverdict.formats.policy import OnMissing
from mtpverdict.formats.results import Arm
from mtpverdict.rules import registry
from mtpverdict.rules.kind import Finding, RuleKind
from mtpverdict.rules.kinds.ttft import Ttft
from mtpverdict.stats import compare as cmp

from ..conftest import ROOT
from .conftest import boot, candidate, comparison, control, make_evidence, refusals, rule

DOC = ROOT / "docs" / "rules-format.md"
TESTS = Path(__file__).resolve().parent
KINDS_TABLE = "| kind | what it checks |"
FOR_CONTROLS = "Also for controls."


# ---------------------------------------------------------------------------------------------------
# the check: every kind complete, in the code, the docs and the tests


def registry_problems(kinds: Mapping[str, RuleKind[Any, Any]], doc: str, tests: Path) -> list[str]:
    """Every way the kinds fall short of a complete kind; empty when each is whole."""
    summaries = kinds_table(doc)
    sections = key_tables(doc)
    for_controls = sections_saying(doc, FOR_CONTROLS)
    problems = [
        f"docs/rules-format.md documents {name!r}, not a kind" for name in sections if name not in kinds
    ]
    for name, kind in kinds.items():
        found = code_problems(name, kind) + doc_problems(kind, summaries, sections)
        if kind.reported_for_controls != (name in for_controls):
            must = "must" if kind.reported_for_controls else "must not"
            found.append(f"its section {must} say {FOR_CONTROLS!r} (reported_for_controls)")
        if not (tests / f"test_{name}.py").is_file():
            found.append(f"no unit tests in tests/rules/test_{name}.py")
        problems += [f"{name}: {p}" for p in found]
    return problems


def code_problems(name: str, kind: RuleKind[Any, Any]) -> list[str]:
    """Its own module holding KIND; docstrings, a summary, its own parameters, evaluation and sentence."""
    cls = type(kind)
    own = vars(cls)
    module = sys.modules[cls.__module__]
    out = []
    if kind.name != name:
        out.append(f"registered as {name!r} but named {kind.name!r}")
    if cls.__module__ != f"mtpverdict.rules.kinds.{name}" or getattr(module, "KIND", None) is not kind:
        out.append(f"not the KIND of its own module mtpverdict.rules.kinds.{name}")
    if not (module.__doc__ or "").strip():
        out.append("no module docstring")
    if not (own.get("__doc__") or "").strip():
        out.append("no class docstring")
    if not isinstance(own.get("summary"), str) or not own["summary"].strip():
        out.append("no summary")
    out += [f"no {method} of its own" for method in ("evaluate", "render") if method not in own]
    params = own.get("params_type")
    if not (isinstance(params, type) and issubclass(params, msgspec.Struct)):
        out.append("no params_type of its own (a msgspec Struct)")
    elif not (params.__struct_config__.frozen and params.__struct_config__.forbid_unknown_fields):
        out.append("params_type is not frozen with forbid_unknown_fields")
    return out


def doc_problems(
    kind: RuleKind[Any, Any], summaries: Mapping[str, str], sections: Mapping[str, dict[str, tuple[str, str]]]
) -> list[str]:
    """A row in the kinds table stating the summary, and a key table matching the parameters exactly."""
    out = []
    if kind.name not in summaries:
        out.append("no row in docs/rules-format.md's kinds table")
    elif summaries[kind.name] != kind.summary:
        out.append(f"the kinds table row differs from its summary: {kind.summary}")
    if kind.name not in sections:
        return [*out, "no section in docs/rules-format.md listing its keys"]
    documented = sections[kind.name]
    info = mi.type_info(kind.params_type)
    assert isinstance(info, mi.StructType)
    declared = {f.name: (doc_type(f.type), doc_default(f)) for f in info.fields}
    out += [f"key {key} not documented" for key in declared if key not in documented]
    out += [f"documents {key}, not a key of the kind" for key in documented if key not in declared]
    out += [
        f"key {key}: documented as {documented[key]}, declared as {declared[key]}"
        for key in declared
        if key in documented and documented[key] != declared[key]
    ]
    return out


# ---------------------------------------------------------------------------------------------------
# reading the page, and how it words the declared types and defaults


def kinds_table(doc: str) -> dict[str, str]:
    """kind -> its 'what it checks' cell, from the table under KINDS_TABLE."""
    lines = doc.splitlines()
    start = lines.index(KINDS_TABLE) + 2 if KINDS_TABLE in lines else len(lines)
    out = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, text = _cells(line)
        out[name.strip("`")] = text
    return out


def key_tables(doc: str) -> dict[str, dict[str, tuple[str, str]]]:
    """kind -> key -> (type, default), from each '### `kind`' section's key table."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    current: dict[str, tuple[str, str]] | None = None
    for line in doc.splitlines():
        heading = re.fullmatch(r"### `(\w+)`", line)
        if heading:
            current = out.setdefault(heading.group(1), {})
        elif line.startswith("#"):
            current = None
        elif current is not None and line.startswith("| `"):
            key, type_, default, _meaning = _cells(line)
            current[key.strip("`")] = (type_, default)
    return out


def sections_saying(doc: str, text: str) -> set[str]:
    """The kinds whose '### `kind`' section holds `text`."""
    parts = re.split(r"^### `(\w+)`$", doc, flags=re.MULTILINE)
    return {name for name, body in zip(parts[1::2], parts[2::2], strict=True) if text in body.split("\n#")[0]}


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split(" | ")]


def doc_type(t: mi.Type) -> str:
    """A declared type as the page words it."""
    if isinstance(t, mi.Metadata):
        return doc_type(t.type)
    if isinstance(t, mi.UnionType):  # T | None: None is the default "none"
        (only,) = [m for m in t.types if not isinstance(m, mi.NoneType)]
        return doc_type(only)
    if isinstance(t, mi.FloatType) and (t.ge, t.le) == (0, 1):
        return "fraction 0..1"
    if isinstance(t, mi.FloatType) and t.ge == 0 and t.le is None:
        return "number ≥ 0"
    if isinstance(t, mi.IntType) and t.ge is not None:
        return f"integer ≥ {t.ge}"
    if isinstance(t, mi.VarTupleType):
        word, _, rest = doc_type(t.item_type).partition(" ")
        return f"list of {word}s {rest}".strip()
    if isinstance(t, mi.EnumType | mi.LiteralType):
        values = (
            sorted(str(v.value) for v in t.cls) if isinstance(t, mi.EnumType) else sorted(map(str, t.values))
        )
        quoted = [f"`{v}`" for v in values]
        return ", ".join(quoted[:-1]) + f" or {quoted[-1]}"
    words = {mi.BoolType: "boolean", mi.StrType: "string"}
    if type(t) in words:
        return words[type(t)]
    raise AssertionError(f"no wording for {t!r}: add it here and to docs/rules-format.md")


def doc_default(field: mi.Field) -> str:
    """A declared default as the page words it."""
    if field.required:
        return "required"
    value = field.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"`{value}`"
    return str(value)


# ---------------------------------------------------------------------------------------------------
# the registry as shipped


def test_every_kind_is_complete() -> None:
    assert registry_problems(registry.KINDS, DOC.read_text(encoding="utf-8"), TESTS) == []


def test_every_kind_module_is_registered() -> None:
    modules = {p.stem for p in (ROOT / "src" / "mtpverdict" / "rules" / "kinds").glob("*.py")}
    assert modules - {"__init__"} == set(registry.KINDS)
    assert registry.RULE_KINDS == tuple(registry.KINDS)


@pytest.mark.parametrize("name", sorted(registry.KINDS))
def test_the_policy_reader_allows_exactly_the_kinds_keys(name: str) -> None:
    (message,) = [m for k, m in refusals(name, "bogus = 1") if k == "rules[0].bogus"]
    allowed = set(message.removeprefix("unknown key; allowed keys are ").split(", "))
    common = {"kind", "id", "severity", "on_missing", "arms", "families", "why"}
    assert allowed == common | set(registry.KINDS[name].params_type.__struct_fields__)


# ---------------------------------------------------------------------------------------------------
# the check itself fails for a half-added kind


class FakeParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Keys of a kind nobody documented."""

    depth: int = 1


@dataclass(frozen=True, slots=True)
class FakeFinding(Finding):
    """Nothing found."""


class Fake(RuleKind[FakeParams, FakeFinding]):
    """A kind whose code is whole but which has no docs or tests."""

    name = "fake"
    params_type = FakeParams
    summary = "a kind added to the registry only"

    def evaluate(self, evidence: Evidence, arm: Arm, params: FakeParams) -> FakeFinding:
        return FakeFinding(RuleStatus.PASS, None, None)

    def render(self, finding: FakeFinding, arm: Arm) -> str:
        return arm.name


class HalfAdded(Ttft):
    name = "half_added"


def test_a_kind_missing_from_the_docs_and_tests_fails() -> None:
    kinds = {**registry.KINDS, "fake": Fake()}
    assert registry_problems(kinds, DOC.read_text(encoding="utf-8"), TESTS) == [
        "fake: not the KIND of its own module mtpverdict.rules.kinds.fake",
        "fake: no row in docs/rules-format.md's kinds table",
        "fake: no section in docs/rules-format.md listing its keys",
        "fake: no unit tests in tests/rules/test_fake.py",
    ]


def test_a_kind_borrowing_another_kinds_code_fails() -> None:
    kinds: dict[str, RuleKind[Any, Any]] = {"half_added": HalfAdded()}
    problems = registry_problems(kinds, "", TESTS)
    for expected in (
        "no class docstring",
        "no summary",
        "no evaluate of its own",
        "no render of its own",
        "no params_type of its own (a msgspec Struct)",
        "no row in docs/rules-format.md's kinds table",
        "no unit tests in tests/rules/test_half_added.py",
    ):
        assert f"half_added: {expected}" in problems


def test_a_key_dropped_renamed_or_mistyped_in_the_docs_fails() -> None:
    doc = DOC.read_text(encoding="utf-8")
    drifted = (
        doc.replace("| `floor` | number ≥ 0 | none |", "| `flor` | number ≥ 0 | none |")
        .replace("| `min_pass_rate` | fraction 0..1 | 1.0 |", "| `min_pass_rate` | fraction 0..1 | 0.9 |")
        .replace("| `max_failed_boots` | integer ≥ 0 |", "| `max_failed_boots` | number ≥ 0 |")
        .replace(registry.KINDS["ttft"].summary, "time to first token")
        .replace("or request record is missing evidence. Also for controls.", "or request record is missing.")
    )
    assert drifted != doc
    assert registry_problems(registry.KINDS, drifted, TESTS) == [
        "beats_target: key floor not documented",
        "beats_target: documents flor, not a key of the kind",
        "coherence: key min_pass_rate: documented as ('fraction 0..1', '0.9'), declared as "
        "('fraction 0..1', '1.0')",
        "ttft: the kinds table row differs from its summary: time to first token stays within "
        "1 + max_regression of off's",
        "boot_ok: key max_failed_boots: documented as ('number ≥ 0', '0'), declared as ('integer ≥ 0', '0')",
        "boot_ok: its section must say 'Also for controls.' (reported_for_controls)",
    ]


def test_a_documented_kind_the_registry_lacks_fails() -> None:
    doc = DOC.read_text(encoding="utf-8") + "\n### `retired`\n\n| key | type | default | meaning |\n"
    assert registry_problems(registry.KINDS, doc, TESTS) == [
        "docs/rules-format.md documents 'retired', not a kind"
    ]


# ---------------------------------------------------------------------------------------------------
# applying a rule: the kind's numbers and sentence, and what on_missing does (only) to missing evidence


def test_evaluate_carries_the_findings_numbers_and_sentence() -> None:
    arm = candidate()
    ev = make_evidence([control(), arm], boots={"k2": (boot(1, "failed", error="OOM"),)})
    result = registry.evaluate(ev, arm, rule("boot_ok", 'id = "boots"\nseverity = "warn"'))
    assert (result.rule, result.kind, result.severity, result.status) == ("boots", "boot_ok", "warn", "fail")
    assert (result.passed, result.value, result.threshold) == (False, 1, 0)
    assert result.detail == "k2: 1 of 1 boots failed (OOM)"


@pytest.mark.parametrize("mode", list(OnMissing))
def test_on_missing_leaves_settled_and_unresolved_findings_alone(mode: OnMissing) -> None:
    arm = candidate()
    ev = make_evidence(
        [control(), arm],
        boots={"k2": (boot(1),), "off_A": (boot(1, "failed", error="OOM"),)},
        comparisons={("k2", "short", 1, "decode_tps"): comparison(1.02, cmp.INCONCLUSIVE)},
    )
    passing = registry.evaluate(ev, arm, rule("boot_ok", on_missing=mode))
    failing = registry.evaluate(ev, control(), rule("boot_ok", on_missing=mode))
    open_ = registry.evaluate(ev, arm, rule("context_regime", 'workloads = ["short"]', on_missing=mode))
    assert [(r.status, r.passed) for r in (passing, failing, open_)] == [
        (RuleStatus.PASS, True),
        (RuleStatus.FAIL, False),
        (RuleStatus.INCONCLUSIVE, None),
    ]
    assert not any("on_missing" in r.detail or "rejected" in r.detail for r in (passing, failing, open_))
