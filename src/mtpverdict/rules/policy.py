"""Policy files (TOML, policy_version 1): load, validate strictly, and expose as frozen values.

A policy is data only: nothing in it is evaluated, imported or expanded. Each rule names one of a
fixed set of kinds; unknown kinds, unknown keys, wrong types and contradictory thresholds are errors
that name the file, the rule and the key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from mtpverdict.errors import PolicyError, Problem

POLICY_VERSION = 1
SEVERITIES = ("veto", "warn")
ON_MISSING = ("inconclusive", "reject", "accept")
METRIC_NAMES = ("decode_tps", "aggregate_tps", "ttft_ms")
SELECTION_MODES = ("fastest", "boring", "reference")
FLOOR_MODES = ("inconclusive", "within_boot", "assume")
CONTROL_ACTIONS = ("inconclusive", "warn")
COLD_MODES = ("include", "exclude")

# key -> (type, default); a default of REQUIRED means the key must be given
REQUIRED = object()
_NUM = "number"
_INT = "integer"
_STR = "string"
_BOOL = "boolean"
_STRS = "list of strings"
_INTS = "list of integers"

_COMMON: dict[str, tuple[str, object]] = {
    "kind": (_STR, REQUIRED),
    "id": (_STR, None),
    "severity": (_STR, "veto"),
    "on_missing": (_STR, "inconclusive"),
    "arms": (_STRS, None),
    "families": (_STRS, None),
    "why": (_STR, None),
}
RULE_KEYS: dict[str, dict[str, tuple[str, object]]] = {
    "beats_target": {
        "metric": (_STR, "decode_tps"),
        "workloads": (_STRS, None),
        "concurrency": (_INTS, None),
        "target": (_NUM, REQUIRED),
        "floor": (_NUM, None),
        "statistic": (_STR, "median"),
    },
    "faster_than_off": {
        "metric": (_STR, "decode_tps"),
        "workloads": (_STRS, None),
        "concurrency": (_INTS, None),
        "min_effect": (_NUM, 0.0),
    },
    "stable_acceptance": {
        "min_drafted_tokens": (_INT, None),
        "min_rate": (_NUM, None),
        "min_lower_bound": (_NUM, None),
        "min_last_position_rate": (_NUM, None),
        "max_wasted_fraction": (_NUM, None),
    },
    "kv_ceiling": {
        "min_concurrency": (_NUM, None),
        "window_tokens": (_INT, None),
        "workload": (_STR, None),
        "max_loss": (_NUM, None),
    },
    "coherence": {
        "min_pass_rate": (_NUM, 1.0),
        "identical_outputs": (_BOOL, True),
    },
    "identity": {
        "workloads": (_STRS, None),
    },
    "likelihood": {
        "max_delta": (_NUM, None),
        "max_delta_vs_spread": (_NUM, None),
    },
    "context_regime": {
        "metric": (_STR, "decode_tps"),
        "workloads": (_STRS, REQUIRED),
        "concurrency": (_INTS, None),
    },
    "ttft": {
        "workloads": (_STRS, None),
        "concurrency": (_INTS, None),
        "max_regression": (_NUM, REQUIRED),
    },
    "round_economics": {
        "workloads": (_STRS, None),
        "concurrency": (_INTS, None),
    },
    "boot_ok": {
        "max_failed_boots": (_INT, 0),
        "max_error_rate": (_NUM, 0.0),
        "check_observed_k": (_BOOL, True),
    },
}
RULE_KINDS = tuple(RULE_KEYS)

TOP_KEYS: dict[str, tuple[str, object]] = {
    "policy_version": (_INT, REQUIRED),
    "name": (_STR, REQUIRED),
    "description": (_STR, ""),
    "alpha": (_NUM, 0.05),
    "equivalence_margin": (_NUM, 0.03),
    "seed": (_INT, 20260910),
}
SECTION_KEYS: dict[str, dict[str, tuple[str, object]]] = {
    "runs": {"cold": (_STR, "include")},
    "floor": {"when_unknown": (_STR, "inconclusive"), "assumed": (_NUM, None)},
    "controls": {
        "void_max_acceptance": (_NUM, 0.05),
        "void_min_drafted": (_INT, 50),
        "blind_min_gain": (_NUM, 0.10),
        "max_drift": (_NUM, 0.05),
        "on_drift": (_STR, "inconclusive"),
        "on_blind": (_STR, "inconclusive"),
    },
    "selection": {
        "mode": (_STR, "fastest"),
        "metric": (_STR, "decode_tps"),
        "workload": (_STR, None),
        "concurrency": (_INT, None),
        "tolerance": (_NUM, 0.10),
        "reference": (_STR, None),
        "fallback": (_STR, "fastest"),
    },
}
_ENUMS: dict[str, tuple[str, ...]] = {
    "severity": SEVERITIES,
    "on_missing": ON_MISSING,
    "metric": METRIC_NAMES,
    "statistic": ("median", "lower_bound"),
    "cold": COLD_MODES,
    "when_unknown": FLOOR_MODES,
    "on_drift": CONTROL_ACTIONS,
    "on_blind": CONTROL_ACTIONS,
    "mode": SELECTION_MODES,
    "fallback": (*SELECTION_MODES[:2], "inconclusive"),
    "kind": RULE_KINDS,
}
_FRACTIONS = {
    "alpha",
    "equivalence_margin",
    "min_rate",
    "min_lower_bound",
    "min_last_position_rate",
    "max_wasted_fraction",
    "void_max_acceptance",
    "max_drift",
    "max_loss",
    "min_pass_rate",
    "tolerance",
    "max_error_rate",
    "assumed",
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: its kind, severity, what to do when evidence is missing, selectors and parameters."""

    id: str
    kind: str
    severity: str
    on_missing: str
    arms: tuple[str, ...] | None
    families: tuple[str, ...] | None
    why: str | None
    params: tuple[tuple[str, Any], ...]

    def get(self, key: str) -> Any:
        for name, value in self.params:
            if name == key:
                return value
        raise KeyError(key)

    def applies_to(self, arm: str, family: str) -> bool:
        if self.arms is not None and arm not in self.arms:
            return False
        return self.families is None or family in self.families


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated policy file."""

    name: str
    description: str
    source: str
    sha256: str
    alpha: float
    equivalence_margin: float
    seed: int
    cold: str
    floor_when_unknown: str
    floor_assumed: float | None
    void_max_acceptance: float
    void_min_drafted: int
    blind_min_gain: float
    max_drift: float
    on_drift: str
    on_blind: str
    selection_mode: str
    selection_metric: str
    selection_workload: str | None
    selection_concurrency: int | None
    selection_tolerance: float
    selection_reference: str | None
    selection_fallback: str
    rules: tuple[Rule, ...] = field(default=())

    @property
    def include_cold(self) -> bool:
        return self.cold == "include"


def _type_ok(kind: str, value: object) -> bool:
    if kind == _NUM:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _STR:
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _STRS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == _INTS:
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    raise AssertionError(kind)


def _read_table(
    table: dict[str, Any],
    keys: dict[str, tuple[str, object]],
    where: str,
    source: str,
    problems: list[Problem],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    allowed = ", ".join(sorted(keys))
    problems.extend(
        Problem(source, f"unknown key; allowed: {allowed}", key=f"{where}{key}")
        for key in table
        if key not in keys
    )
    for key, (kind, default) in keys.items():
        if key not in table:
            if default is REQUIRED:
                problems.append(Problem(source, f"missing; it must be a {kind}", key=f"{where}{key}"))
            else:
                out[key] = default
            continue
        value = table[key]
        if not _type_ok(kind, value):
            problems.append(
                Problem(source, f"must be a {kind}, got {type(value).__name__}", key=f"{where}{key}")
            )
            continue
        if key in _ENUMS and value not in _ENUMS[key]:
            problems.append(
                Problem(source, f"{value!r} is not one of {', '.join(_ENUMS[key])}", key=f"{where}{key}")
            )
            continue
        if key in _FRACTIONS and not 0.0 <= float(value) <= 1.0:
            problems.append(
                Problem(source, f"{value} must lie between 0 and 1 (a fraction)", key=f"{where}{key}")
            )
            continue
        if kind == _NUM and float(value) < 0:
            problems.append(Problem(source, f"{value} must not be negative", key=f"{where}{key}"))
            continue
        out[key] = tuple(value) if isinstance(value, list) else value
    return out


def _rule_problems(params: dict[str, Any], kind: str, where: str, source: str) -> list[Problem]:
    """Contradictions and empty rules that the types alone cannot catch."""
    out: list[Problem] = []
    if kind == "beats_target" and params.get("floor") is not None and params["floor"] > params["target"]:
        out.append(
            Problem(
                source,
                f"floor {params['floor']} exceeds target {params['target']}; the floor is the lower bar",
                key=f"{where}floor",
            )
        )
    if kind == "stable_acceptance":
        checks = (
            "min_drafted_tokens",
            "min_rate",
            "min_lower_bound",
            "min_last_position_rate",
            "max_wasted_fraction",
        )
        if all(params.get(k) is None for k in checks):
            out.append(
                Problem(
                    source,
                    f"sets no threshold; give at least one of {', '.join(checks)}",
                    key=where.rstrip("."),
                )
            )
        rate, wasted = params.get("min_rate"), params.get("max_wasted_fraction")
        if rate is not None and wasted is not None and rate > 1.0 - wasted + 1e-12:
            pass  # consistent: a higher min rate implies less waste
        if rate is not None and wasted is not None and 1.0 - wasted < rate - 1e-12:
            out.append(
                Problem(
                    source,
                    f"max_wasted_fraction {wasted} allows less than min_rate {rate} does; they contradict",
                    key=f"{where}max_wasted_fraction",
                )
            )
        if (
            params.get("min_lower_bound") is not None
            and params.get("min_rate") is not None
            and params["min_lower_bound"] > params["min_rate"]
        ):
            pass
    if kind == "kv_ceiling":
        if params.get("min_concurrency") is None and params.get("max_loss") is None:
            out.append(
                Problem(source, "sets no threshold; give min_concurrency or max_loss", key=where.rstrip("."))
            )
        if params.get("window_tokens") is not None and params.get("workload") is not None:
            out.append(
                Problem(source, "give window_tokens or workload, not both", key=f"{where}window_tokens")
            )
    if kind == "likelihood" and params.get("max_delta") is None and params.get("max_delta_vs_spread") is None:
        out.append(
            Problem(source, "sets no threshold; give max_delta or max_delta_vs_spread", key=where.rstrip("."))
        )
    if kind in ("faster_than_off", "context_regime", "beats_target") and params.get("metric") == "ttft_ms":
        out.append(
            Problem(source, "ttft_ms is lower-is-better; use a ttft rule for latency", key=f"{where}metric")
        )
    return out


def toml_error_line(exc: tomllib.TOMLDecodeError) -> tuple[int | None, str]:
    """(line, message) of a TOML error; Python 3.11 keeps the line only in the message text."""
    text = str(exc)
    found = re.search(r" \(at line (\d+), column \d+\)", text)
    if found:
        return int(found.group(1)), text[: found.start()]
    return getattr(exc, "lineno", None), text.split(" (at ")[0]


def parse_policy(text: str, source: str, sha256: str = "") -> Policy:
    """Validate policy text; raise PolicyError listing every problem (file, rule and key)."""
    problems: list[Problem] = []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, message = toml_error_line(exc)
        raise PolicyError([Problem(source, f"not valid TOML: {message}", line=line)]) from None
    top_table = {k: v for k, v in data.items() if k not in SECTION_KEYS and k != "rules"}
    top = _read_table(top_table, TOP_KEYS, "", source, problems)
    if "policy_version" in top and top["policy_version"] != POLICY_VERSION:
        problems.append(
            Problem(
                source,
                f"policy_version {top['policy_version']} is not supported; this "
                f"mtpverdict reads policy_version {POLICY_VERSION}",
                key="policy_version",
            )
        )
    sections: dict[str, dict[str, Any]] = {}
    for name, keys in SECTION_KEYS.items():
        raw = data.get(name, {})
        if not isinstance(raw, dict):
            problems.append(Problem(source, "must be a table", key=name))
            raw = {}
        sections[name] = _read_table(raw, keys, f"{name}.", source, problems)
    raw_rules = data.get("rules", [])
    if not isinstance(raw_rules, list) or not all(isinstance(r, dict) for r in raw_rules):
        problems.append(Problem(source, "must be an array of tables ([[rules]])", key="rules"))
        raw_rules = []
    rules: list[Rule] = []
    ids: set[str] = set()
    for i, raw in enumerate(raw_rules):
        kind = raw.get("kind")
        where = f"rules[{i}]" + (f" ({raw['id']})" if isinstance(raw.get("id"), str) else "") + "."
        if kind not in RULE_KEYS:
            problems.append(
                Problem(
                    source,
                    f"unknown rule kind {kind!r}; kinds are {', '.join(RULE_KINDS)}",
                    key=f"{where}kind",
                )
            )
            continue
        keys = {**_COMMON, **RULE_KEYS[kind]}
        before = len(problems)
        params = _read_table(raw, keys, where, source, problems)
        if len(problems) > before:
            continue
        problems.extend(_rule_problems(params, kind, where, source))
        rule_id = params.pop("id") or kind
        if rule_id in ids:
            problems.append(
                Problem(
                    source, f"rule id {rule_id!r} is used twice; give each rule its own id", key=f"{where}id"
                )
            )
        ids.add(rule_id)
        common = {k: params.pop(k) for k in ("kind", "severity", "on_missing", "arms", "families", "why")}
        rules.append(
            Rule(
                id=rule_id,
                kind=common["kind"],
                severity=common["severity"],
                on_missing=common["on_missing"],
                arms=common["arms"],
                families=common["families"],
                why=common["why"],
                params=tuple(sorted(params.items())),
            )
        )
    sel = sections["selection"]
    if sel.get("mode") == "reference" and not sel.get("reference"):
        problems.append(
            Problem(
                source,
                "mode reference needs selection.reference (the arm to keep)",
                key="selection.reference",
            )
        )
    flo = sections["floor"]
    if flo.get("when_unknown") == "assume" and flo.get("assumed") is None:
        problems.append(
            Problem(
                source,
                'when_unknown = "assume" needs floor.assumed (a fraction, e.g. 0.05)',
                key="floor.assumed",
            )
        )
    if problems:
        raise PolicyError(problems)
    ctl = sections["controls"]
    return Policy(
        name=top["name"],
        description=top["description"],
        source=source,
        sha256=sha256,
        alpha=float(top["alpha"]),
        equivalence_margin=float(top["equivalence_margin"]),
        seed=int(top["seed"]),
        cold=sections["runs"]["cold"],
        floor_when_unknown=flo["when_unknown"],
        floor_assumed=None if flo["assumed"] is None else float(flo["assumed"]),
        void_max_acceptance=float(ctl["void_max_acceptance"]),
        void_min_drafted=int(ctl["void_min_drafted"]),
        blind_min_gain=float(ctl["blind_min_gain"]),
        max_drift=float(ctl["max_drift"]),
        on_drift=ctl["on_drift"],
        on_blind=ctl["on_blind"],
        selection_mode=sel["mode"],
        selection_metric=sel["metric"],
        selection_workload=sel["workload"],
        selection_concurrency=sel["concurrency"],
        selection_tolerance=float(sel["tolerance"]),
        selection_reference=sel["reference"],
        selection_fallback=sel["fallback"],
        rules=tuple(rules),
    )


SHIPPED_PACKAGE = "mtpverdict.rules"
SHIPPED_DIR = "policies"


def shipped_policies() -> list[str]:
    """Names of the policies shipped in the package (rules/*.toml), sorted."""
    folder = resources.files(SHIPPED_PACKAGE).joinpath(SHIPPED_DIR)
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_policy(name_or_path: str | Path | None = None) -> Policy:
    """Load a policy file, or a shipped policy by name (default: the embedded 'default')."""
    import hashlib

    if name_or_path is None:
        name_or_path = "default"
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists() or "/" in str(name_or_path):
        source = str(candidate)
        try:
            data = candidate.read_bytes()
        except FileNotFoundError:
            raise PolicyError(
                [
                    Problem(
                        source,
                        "not found; give a rules file or a shipped policy name "
                        f"({', '.join(shipped_policies())})",
                    )
                ]
            ) from None
        except OSError as exc:
            raise PolicyError([Problem(source, f"cannot be read: {exc.strerror}")]) from None
    else:
        name = str(name_or_path)
        if name not in shipped_policies():
            raise PolicyError(
                [
                    Problem(
                        name,
                        "no such shipped policy; choose one of "
                        f"{', '.join(shipped_policies())} or give a .toml path",
                    )
                ]
            )
        source = f"rules/{name}.toml"
        data = resources.files(SHIPPED_PACKAGE).joinpath(SHIPPED_DIR, f"{name}.toml").read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError([Problem(source, f"not valid UTF-8 at byte {exc.start}")]) from None
    return parse_policy(text, source, hashlib.sha256(data).hexdigest())
