"""The promotion gate: does a decision support the speculative config being proposed, on fresh evidence?

Two questions, both must pass. (1) Support: "off" is supported only by keep_mtp_disabled (keeping
speculation off is a claim that needs evidence too); a depth is supported by promote or keep_reference
selecting an arm with that method and k. (2) Freshness: the proposed serve arguments (a docker compose
service or a plain argv file) must equal the arguments the evidence was collected with, except the
speculative flags (and the listen address): model, image or engine version, batching, memory, parallelism.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict.errors import InputError, Problem

# Flags allowed to differ between the evidence and the proposal: the speculative configuration itself
# (all engines) and where the server listens, which cannot change what it computes.
LISTEN_FLAGS = ("--host", "--port")
VERSION = re.compile(r"v?(\d+\.\d+(?:\.\d+)?(?:[.\-+]?[A-Za-z0-9]+)*)")


@dataclass(frozen=True, slots=True)
class ProposedSpec:
    """What is being promoted: speculation off, or a method at a depth."""

    method: str | None
    k: int | None
    text: str

    @property
    def off(self) -> bool:
        return self.method is None and not self.k


@dataclass(frozen=True, slots=True)
class GateResult:
    """The gate's answer and its reasons (one per line)."""

    supported: bool
    reasons: tuple[str, ...]
    decision: str
    selected: str | None


def parse_spec(text: str) -> ProposedSpec:
    """`off`, `k=3`, `mtp:k=3` / `ngram:k=2`, or the JSON given to --speculative-config."""
    raw = text.strip()
    if raw.lower() in ("off", "none", "disabled", "k=0"):
        return ProposedSpec(None, None, raw)
    if raw.startswith("{"):
        try:
            obj = json.loads(raw)
        except ValueError:
            raise InputError([Problem("--proposed", f"{raw[:60]!r} is not valid JSON")]) from None
        if not isinstance(obj, dict):
            raise InputError([Problem("--proposed", "the JSON must be an object")])
        k = obj.get("num_speculative_tokens")
        method = obj.get("method") or ("draft_model" if obj.get("model") else None)
        if not isinstance(k, int) or k < 1:
            raise InputError([Problem("--proposed", "the JSON needs num_speculative_tokens >= 1")])
        return ProposedSpec(str(method) if method else None, k, raw)
    found = re.fullmatch(r"(?:([a-z_0-9]+):)?k=(\d+)", raw)
    if not found:
        raise InputError(
            [Problem("--proposed", f"{raw!r}: write off, k=N, METHOD:k=N or the speculative config JSON")]
        )
    return ProposedSpec(found.group(1), int(found.group(2)), raw)


def supports(decision: dict[str, Any], proposed: ProposedSpec) -> tuple[bool, list[str]]:
    """Whether a decision (mtpverdict.decision/1 object) supports the proposed spec, with reasons."""
    kind = decision["decision"]
    selected = decision.get("selected") or {}
    spec = selected.get("spec") or {}
    name = selected.get("arm")
    if proposed.off:
        if kind == "keep_mtp_disabled":
            return True, ["the decision keeps speculation disabled"]
        return False, [
            f"proposing speculation off, but the decision is {kind}"
            + (f" (selected {name}: {spec.get('method')} k={spec.get('k')})" if name else "")
            + "; keeping speculation off needs evidence too"
        ]
    if kind not in ("promote", "keep_reference") or not name:
        return False, [f"proposing {proposed.text}, but the decision is {kind}: no depth is supported"]
    if spec.get("k") != proposed.k:
        return False, [f"proposing k={proposed.k}, but the decision selects {name} with k={spec.get('k')}"]
    if proposed.method is not None and spec.get("method") not in (proposed.method, None):
        return False, [
            f"proposing {proposed.method}, but the decision selects {name} with {spec.get('method')}"
        ]
    return True, [f"the decision ({kind}) selects {name}: {spec.get('method')} k={spec.get('k')}"]


# --------------------------------------------------------------------------------------------------
# serve arguments


def _spec_flags() -> tuple[str, ...]:
    from mtpverdict.collect.campaign import SPEC_FLAGS

    return SPEC_FLAGS


def normalise_argv(argv: list[str]) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Flags (names with _ as -, values in order) and the model positional of a serve command line.

    The program part (e.g. `python -m vllm.entrypoints.openai.api_server`, `vllm serve`) is skipped:
    comparison starts at the first `--` flag, except that a positional right after `serve` is the model
    and is compared as --model.
    """
    flags: dict[str, list[str]] = {}
    positionals: list[str] = []
    i = 0
    if "serve" in argv:
        at = argv.index("serve")
        if at + 1 < len(argv) and not argv[at + 1].startswith("-"):
            flags.setdefault("--model", []).append(argv[at + 1])
            i = at + 2
        else:
            i = at + 1
    while i < len(argv) and not argv[i].startswith("--"):  # program part, e.g. python -m MODULE
        i += 1
    while i < len(argv):
        token = argv[i]
        if token.startswith("-"):
            name, eq, value = token.partition("=")
            name = name.replace("_", "-")
            if eq:
                flags.setdefault(name, []).append(value)
                i += 1
            elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                flags.setdefault(name, []).append(argv[i + 1])
                i += 2
            else:
                flags.setdefault(name, []).append("")
                i += 1
        else:
            positionals.append(token)
            i += 1
    return {k: tuple(v) for k, v in flags.items()}, positionals


def argv_differences(evidence: list[str], proposed: list[str], ignore: tuple[str, ...] = ()) -> list[str]:
    """Arguments that differ, excluding the speculative flags, the listen address and `ignore`."""
    skip = {f.replace("_", "-") for f in (*_spec_flags(), *LISTEN_FLAGS, *ignore)}
    ev, ev_pos = normalise_argv(evidence)
    pr, pr_pos = normalise_argv(proposed)
    out = []
    for name in sorted((set(ev) | set(pr)) - skip):
        if ev.get(name) != pr.get(name):
            before = " ".join(ev[name]) if name in ev else "(absent)"
            after = " ".join(pr[name]) if name in pr else "(absent)"
            out.append(f"{name}: evidence {before or '(set)'} vs proposed {after or '(set)'}")
    if ev_pos != pr_pos:
        out.append(f"positional arguments: evidence {ev_pos} vs proposed {pr_pos}")
    return out


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """The serve arguments of the proposal, and the engine image when a compose file names one."""

    argv: tuple[str, ...]
    image: str | None
    source: str


def read_serve_config(path: str | Path, service: str | None) -> ServeConfig:
    """A docker compose file (YAML, one service) or a plain argv file (JSON list or one shell line)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError([Problem(source, f"cannot be read: {exc}")]) from None
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            argv = json.loads(stripped)
        except ValueError as exc:
            raise InputError([Problem(source, f"not a valid JSON argv list: {exc}")]) from None
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise InputError([Problem(source, "must be a JSON list of strings")])
        return ServeConfig(tuple(argv), None, source)
    if "services:" not in text:
        try:
            return ServeConfig(tuple(shlex.split(text.replace("\\\n", " "), comments=True)), None, source)
        except ValueError as exc:
            raise InputError([Problem(source, f"not a valid command line: {exc}")]) from None
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(
            [
                Problem(
                    source, f"not valid YAML: {exc}".splitlines()[0], line=None if line is None else line + 1
                )
            ]
        ) from None
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict) or not services:
        raise InputError([Problem(source, "no services in the compose file", key="services")])
    if service is None:
        if len(services) != 1:
            raise InputError(
                [
                    Problem(
                        source,
                        f"several services ({', '.join(sorted(services))}); pass --service NAME",
                        key="services",
                    )
                ]
            )
        service = next(iter(services))
    entry = services.get(service)
    if not isinstance(entry, dict):
        raise InputError([Problem(source, f"no service {service!r}", key="services")])
    command = entry.get("command", [])
    entrypoint = entry.get("entrypoint", [])
    parts: list[str] = []
    for key, value in (("entrypoint", entrypoint), ("command", command)):
        if isinstance(value, str):
            try:
                parts += shlex.split(value)
            except ValueError as exc:
                raise InputError(
                    [Problem(source, f"not a valid command line: {exc}", key=f"services.{service}.{key}")]
                ) from None
        elif isinstance(value, list):
            parts += [str(v) for v in value]
        elif value is not None:
            raise InputError([Problem(source, "must be a string or a list", key=f"services.{service}.{key}")])
    image = entry.get("image")
    return ServeConfig(tuple(parts), str(image) if image else None, f"{source} service {service}")


def image_version(image: str | None) -> str | None:
    """The version in an image tag (vllm/vllm-openai:v0.32.0 -> 0.32.0), if it has one."""
    if not image or ":" not in image.rsplit("/", 1)[-1]:
        return None
    tag = image.rsplit(":", 1)[1]
    found = VERSION.fullmatch(tag)
    return found.group(1) if found else None


def evidence_argv(
    results: Any, decision: dict[str, Any], proposed: ProposedSpec
) -> tuple[list[str] | None, str]:
    """The argv the evidence for the proposal was collected with: the selected arm's (or a control's)."""
    campaign = results.campaign
    name = (decision.get("selected") or {}).get("arm")
    arm = None
    if name and not proposed.off:
        arm = campaign.arm(name)
    else:
        arm = next((a for a in campaign.arms if a.is_control), None)
    if arm is None:
        return None, "no arm"
    boots = results.boots
    recorded = boots[(boots["arm"] == arm.name) & boots["argv"].notna()]
    if len(recorded):
        return list(recorded["argv"].iloc[0]), arm.name
    return (list(arm.serve_argv) if arm.serve_argv else None), arm.name


def check_fresh(
    results: Any,
    decision: dict[str, Any],
    proposed: ProposedSpec,
    config: ServeConfig,
    ignore: tuple[str, ...] = (),
) -> list[str]:
    """Reasons the evidence is stale for this proposal (empty when it is fresh)."""
    argv, arm = evidence_argv(results, decision, proposed)
    if argv is None:
        return [f"the evidence records no serve argv for {arm}: freshness cannot be checked"]
    reasons = [f"stale evidence, {d}" for d in argv_differences(argv, list(config.argv), ignore)]
    version = image_version(config.image)
    recorded = {str(v) for v in results.boots["engine_version"].dropna()} or (
        {results.campaign.scope.engine_version} if results.campaign.scope.engine_version else set()
    )
    if version and recorded and not any(version in r or r in version for r in recorded):
        reasons.append(
            f"stale evidence, engine version: evidence {', '.join(sorted(recorded))} vs proposed "
            f"image {config.image}"
        )
    return reasons


def gate(
    results_dir: str | Path,
    rules: str | None,
    proposed_text: str,
    *,
    serve_config: str | None = None,
    service: str | None = None,
    ignore: tuple[str, ...] = (),
) -> GateResult:
    """Decide on the results with the policy, then check support and (optionally) freshness."""
    from mtpverdict.decide import decide_directory
    from mtpverdict.formats.results_io import load_results

    proposed = parse_spec(proposed_text)
    config = read_serve_config(serve_config, service) if serve_config else None
    run = decide_directory(results_dir, rules)
    decision = json.loads(run.json_text)
    ok, reasons = supports(decision, proposed)
    if config is not None:
        stale = check_fresh(load_results(results_dir), decision, proposed, config, ignore)
        if stale:
            ok = False
            reasons += stale
        else:
            reasons.append(
                f"evidence is fresh: {config.source} matches the collected serve arguments except "
                "the speculative flags"
            )
    if not ok:
        reasons += [f"decision reason: {r}" for r in decision["reasons"][:3]]
    return GateResult(
        supported=ok,
        reasons=tuple(reasons),
        decision=decision["decision"],
        selected=(decision.get("selected") or {}).get("arm"),
    )


def step_summary(result: GateResult, proposed: str) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY."""
    head = "supported" if result.supported else "refused"
    lines = [
        f"### mtpverdict gate: {proposed} {head}",
        "",
        f"decision: `{result.decision}`" + (f", selected `{result.selected}`" if result.selected else ""),
        "",
    ]
    lines += [f"- {r}" for r in result.reasons]
    return "\n".join(lines) + "\n"
