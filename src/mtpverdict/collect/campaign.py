"""Campaign files for `collect` (TOML, campaign_version 1): strict loading into a frozen plan.

A campaign file is data: the serve command is an argv list whose elements (and the env values and the
arms' serve_args) may hold placeholders ({port}, {arm}, {boot}, {results} and names from [vars] or
--var); the element "{spec}" splices the arm's speculative arguments. Nothing is passed to a shell
unless `shell = true` is set explicitly, and then every substituted value is quoted for the shell.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from mtpverdict._files import NotReadable, read_regular
from mtpverdict.collect import datasets
from mtpverdict.collect.deployment import BootDiscipline, ComposeSource
from mtpverdict.engines import registry
from mtpverdict.engines.interface import present
from mtpverdict.engines.names import ENGINES, Engine
from mtpverdict.errors import CampaignError, Problem
from mtpverdict.formats import _check
from mtpverdict.formats.campaign import (
    CAMPAIGN_VERSION,
    ArmSection,
    CampaignFile,
    ServerSection,
    WorkloadSection,
)
from mtpverdict.formats.deployment import Deployment
from mtpverdict.formats.policy import load_toml
from mtpverdict.formats.results import RESULTS_FORMAT

PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
SPEC_PLACEHOLDER = "{spec}"
BUILTIN_VARS = ("port", "arm", "boot", "results", "device", "node")
SHELL = "/bin/sh"  # what `shell = true` runs the command with, as subprocess's shell=True does
# A campaign is a few tables and prompts (the shipped ones are 3 KB); anything near this size is not one.
MAX_CAMPAIGN_BYTES = 4 << 20
MAX_NAME = 64  # a name's length (formats.results.NAME_PATTERN): a dataset workload's ID.CATEGORY too

# Flags an arm's serve_args may hold besides the speculative configuration (whose flags, per engine, are
# serveconfig.FLAGS): each engine's per-request drafting report, which only a speculating arm can turn on
REPORTING_FLAGS: dict[str, int] = {
    flag: values
    for parts in registry.ENGINES.values()
    if (fields := present(parts.server_fields)) is not None
    for flag, values in fields.report_flags
}


@dataclass(frozen=True, slots=True)
class ServerPlan:
    """How arms are served."""

    mode: str
    command: tuple[str, ...]
    shell: bool
    env: tuple[tuple[str, str], ...]
    host: str
    port: int
    health_path: str
    boot_timeout: float
    grace_seconds: float
    stall_seconds: float
    settle_seconds: float
    api_key_env: str | None
    engine: str
    secrets: tuple[str, ...]
    model: str | None
    compose: ComposeSource | None = None  # the arms' argv come from this service (collect/launch.py)
    discipline: BootDiscipline = BootDiscipline()  # what runs before every boot (collect/discipline.py)
    deployment: Deployment | None = None  # the service as resolved, once preflight resolved it


@dataclass(frozen=True, slots=True)
class ArmPlan:
    """One arm: its speculation and how to serve it."""

    name: str
    role: str
    method: str | None
    k: int | None
    serve_args: tuple[str, ...]
    base_url: str | None
    family: str
    labels: tuple[tuple[str, str], ...]
    config: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class WorkloadPlan:
    """One prompt shape: one prompt, or the drawn prompts of one category of a dataset (`drawn`)."""

    id: str
    prompt: str
    prompt_tokens: int | None
    max_tokens: int
    expect_identical: bool
    chat: bool
    ignore_eos: bool
    nonce: bool
    drawn: datasets.SampledPrompts | None = None


@dataclass(frozen=True, slots=True)
class CoherenceCase:
    """A prompt whose greedy output must contain `expected`."""

    id: str
    prompt: str
    expected: str
    max_tokens: int
    chat: bool


@dataclass(frozen=True, slots=True)
class DevicePlan:
    """One device of a blocked campaign: its name, node and what its server is told."""

    name: str
    node: str | None
    port: int | None
    vars: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class CampaignPlan:
    """A validated campaign file."""

    source: str
    sha256: str
    id: str
    title: str
    window_tokens: int | None
    notes: str | None
    concurrency: tuple[int, ...]
    reps: int
    warmup_runs: int
    boots: int
    scope: tuple[tuple[str, str | None], ...]
    server: ServerPlan
    vars: tuple[tuple[str, str], ...]
    arms: tuple[ArmPlan, ...]
    workloads: tuple[WorkloadPlan, ...]
    coherence: tuple[CoherenceCase, ...]
    likelihood_text: str | None
    likelihood_reps: int
    devices: tuple[DevicePlan, ...] = ()
    order_seed: int | None = None  # the seed of the arm order drawn per device (one device too) and round

    @property
    def device_count(self) -> int:
        """Devices the campaign is laid out over (1 for a campaign without [[devices]])."""
        return max(len(self.devices), 1)

    def port(self, device: DevicePlan | None) -> int:
        """The port of a device's server (server.port unless the device names its own)."""
        return device.port if device is not None and device.port is not None else self.server.port

    def _values(self, extra_vars: dict[str, str], device: DevicePlan | None) -> dict[str, str]:
        values = {**dict(self.vars), **(dict(device.vars) if device else {}), **extra_vars}
        values["port"] = str(self.port(device))
        if device is not None:
            values["device"] = device.name
            values["node"] = device.node or ""
        return values

    def undefined(self, variables: dict[str, str]) -> list[str]:
        """Placeholders of the serve command that neither [vars] nor `variables` define."""
        defined = set(BUILTIN_VARS) | {k for k, _ in self.vars} | set(variables) | {"spec"}
        if self.devices:  # a name every device defines counts as defined
            defined |= set.intersection(*({k for k, _ in d.vars} for d in self.devices))
        texts = [
            *self.server.command,
            *(v for _, v in self.server.env),
            *(v for d in self.devices for _, v in d.env),
            *(a for arm in self.arms for a in arm.serve_args),
        ]
        found = {name for text in texts for name in PLACEHOLDER.findall(text)}
        return sorted(found - defined)

    def serve_argv(
        self,
        arm: ArmPlan,
        extra_vars: dict[str, str],
        boot: int,
        results: str,
        device: DevicePlan | None = None,
    ) -> list[str]:
        """The argv of one boot of an arm, placeholders filled, {spec} spliced.

        In shell mode the argv is [/bin/sh, -c, LINE]: every placeholder in LINE is replaced by its
        value quoted for the shell, and {spec} (or the end of LINE) by the arm's serve_args, each
        quoted, so no value can run as a command and the arm's arguments reach the server.
        """
        values = {**self._values(extra_vars, device), "arm": arm.name, "boot": str(boot), "results": results}
        spec = [self.fill(a, values) for a in arm.serve_args]
        if self.server.shell:
            return [SHELL, "-c", self._shell_line(values, spec)]
        argv: list[str] = []
        for element in self.server.command:
            if element == SPEC_PLACEHOLDER:
                argv.extend(spec)
                continue
            argv.append(self.fill(element, values))
        if SPEC_PLACEHOLDER not in self.server.command:
            argv.extend(spec)
        return argv

    def _shell_line(self, values: dict[str, str], spec: list[str]) -> str:
        quoted = {name: shlex.quote(value) for name, value in values.items()}
        quoted["spec"] = shlex.join(spec)
        line = self.server.command[0]
        if SPEC_PLACEHOLDER not in line and spec:
            line = f"{line} {SPEC_PLACEHOLDER}"
        return self.fill(line, quoted)

    def server_env(self, extra_vars: dict[str, str], device: DevicePlan | None = None) -> dict[str, str]:
        """The server's extra environment (the device's over the server's), placeholders filled."""
        values = self._values(extra_vars, device)
        env = dict(self.server.env) | (dict(device.env) if device else {})
        return {k: self.fill(v, values) for k, v in sorted(env.items())}

    @staticmethod
    def fill(text: str, values: dict[str, str]) -> str:
        """Replace {name} placeholders (lowercase names only, so JSON braces are left alone)."""
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    def results_campaign(self, extra_vars: dict[str, str], results: str) -> dict[str, Any]:
        """The results-format campaign.json object this campaign writes."""
        arms = []
        for order, arm in enumerate(self.arms, start=1):
            entry: dict[str, Any] = {
                "name": arm.name,
                "role": arm.role,
                "spec": {"method": arm.method, "k": arm.k, "config": arm.config},
                "order": order,
                "serve_argv": (
                    self.serve_argv(arm, extra_vars, 1, results)
                    if self.server.mode == "launch"
                    else list(arm.serve_args) or None
                ),
                "family": arm.family,
            }
            if arm.labels:
                entry["labels"] = dict(arm.labels)
            arms.append(entry)
        scope = dict(self.scope)
        notes = self.notes
        if self.devices:
            names = ", ".join(d.name + (f"@{d.node}" if d.node else "") for d in self.devices)
            blocked = (
                f"Blocked over {len(self.devices)} devices ({names}), {self.boots} round(s) each; arm "
                f"order per device and round drawn with order_seed {self.order_seed}."
            )
            notes = f"{notes} {blocked}" if notes else blocked
        return {
            "format": RESULTS_FORMAT,
            "id": self.id,
            "title": self.title,
            "scope": {k: scope.get(k) for k in ("device", "engine", "engine_version", "model", "claim")},
            "arms": arms,
            "workloads": [_results_workload(w) for w in self.workloads],
            "window_tokens": self.window_tokens,
            "concurrency": list(self.concurrency),
            "notes": notes,
            "synthetic": False,
            "source": f"mtpverdict collect, campaign file sha256 {self.sha256[:16]}",
        } | ({"deployment": msgspec.to_builtins(self.server.deployment)} if self.server.deployment else {})


def _results_workload(w: WorkloadPlan) -> dict[str, Any]:
    """A workload as campaign.json records it; a dataset's adds its category, file hash and seed."""
    if w.drawn is not None:
        description = w.drawn.description()
    elif w.prompt_tokens:
        description = f"generated prompt of ~{w.prompt_tokens} tokens"
    else:
        description = f"prompt of {len(w.prompt)} characters"
    entry: dict[str, Any] = {
        "id": w.id,
        "prompt_tokens": w.prompt_tokens,
        "max_tokens": w.max_tokens,
        "expect_identical": w.expect_identical,
        "description": ("chat " if w.chat else "") + description,
    }
    if w.drawn is not None:
        entry.update(category=w.drawn.category, dataset_sha256=w.drawn.sha256, dataset_seed=w.drawn.seed)
    return entry


def parity_problems(arms: tuple[ArmPlan, ...]) -> list[str]:
    """Arms whose serve_args carry anything but speculative flags: they break harness parity.

    Each flag's value count comes from serveconfig's per-engine table, so a switch (llama.cpp's
    --spec-default) takes none and --spec-replace takes two.
    """
    out = []
    for arm in arms:
        other = next((tokens[0] for _, tokens, known in flag_spans(arm.serve_args) if not known), None)
        if other is not None:
            out.append(
                f"arm {arm.name}: {other!r} is not a speculative flag; arms must differ only "
                "in speculation (use --allow-argv-mismatch to record the difference anyway)"
            )
    return out


def flag_spans(args: Sequence[str]) -> Iterator[tuple[str, tuple[str, ...], bool]]:
    """serve_args as (flag, the tokens it spans, whether it is a speculative or reporting flag): a known
    flag spans its values (`--flag=V` one token), any other token spans itself."""
    i = 0
    while i < len(args):
        flag, eq, _ = args[i].partition("=")
        values = _flag_values(flag)
        width = 1 if eq or values is None else 1 + values
        yield flag, tuple(args[i : i + width]), values is not None
        i += width


def depth_problems(arms: tuple[ArmPlan, ...]) -> list[str]:
    """Arms whose serve_args ask for another depth than the arm's declared k.

    The depth is read as `gate` reads a serve config (serveconfig.extract_spec); serve_args that
    cannot be read without a guess (a {var}, flags of several engines) are left to the boot check.
    """
    from mtpverdict.serveconfig import ServeSpec, extract_spec

    out = []
    for arm in arms:
        if arm.k is None or not arm.serve_args:
            continue
        spec = extract_spec(arm.serve_args)
        if isinstance(spec, ServeSpec) and spec.k is not None and spec.k != arm.k:
            out.append(
                f"arm {arm.name}: its serve_args ask for depth {spec.k} but the arm declares k = {arm.k}; "
                "make them agree (the boot check would fail every boot of it)"
            )
    return out


def _flag_values(flag: str) -> int | None:
    """How many argv tokens follow a speculative (or reporting) flag; None when it is neither."""
    from mtpverdict.serveconfig import FLAGS, is_speculative_flag, normalise_flag

    norm = normalise_flag(flag)
    if norm in REPORTING_FLAGS:
        return REPORTING_FLAGS[norm]
    if norm in FLAGS:
        return FLAGS[norm].values
    return 1 if is_speculative_flag(norm) else None


def generated_prompt(tokens: int) -> str:
    """A deterministic prompt of about `tokens` tokens that does not repeat itself.

    Words are drawn from prompt_words.txt (about 740 common English words, one token each in most
    tokenizers) by a generator seeded with `tokens`, in sentences of 8 to 16 words. A prompt that
    repeated one sentence let n-gram drafters copy from it and inflated their acceptance; here a
    3-gram recurs only by chance.
    """
    import random
    from importlib import resources

    text = resources.files("mtpverdict.collect").joinpath("prompt_words.txt").read_text("utf-8")
    words = [w for line in text.splitlines() if not line.startswith("#") for w in line.split()]
    rng = random.Random(tokens)
    out: list[str] = []
    while len(out) < tokens:
        sentence = [rng.choice(words) for _ in range(min(rng.randint(8, 16), tokens - len(out)))]
        sentence[0] = sentence[0].capitalize()
        sentence[-1] += "."
        out.extend(sentence)
    return " ".join(out)


def parse_campaign(text: str, source: str, sha256: str = "") -> CampaignPlan:
    """Validate campaign text; raise CampaignError listing every problem (file and key)."""
    data = load_toml(text, source, CampaignError)
    located = _check.check(data, CampaignFile)
    if located:
        raise CampaignError([Problem(source, message, key=key) for key, message in located])
    file = msgspec.convert(data, CampaignFile, strict=True)
    if file.campaign_version != CAMPAIGN_VERSION:
        version = file.campaign_version
        message = f"campaign_version {version} is not supported; this mtpverdict reads {CAMPAIGN_VERSION}"
        raise CampaignError([Problem(source, message, key="campaign_version")])
    file, engine_problems = _with_scope_engine(file, "engine" in data.get("server", {}))
    problems = [Problem(source, message, key=key) for key, message in engine_problems + _file_problems(file)]
    if problems:
        raise CampaignError(problems)
    return _plan(file, source, sha256)


def _with_scope_engine(file: CampaignFile, server_named: bool) -> tuple[CampaignFile, list[_check.Located]]:
    """The file with [server] engine taken from [scope] engine when only the scope names one, or the
    problem when the scope's engine is none collect reads (a guessed engine would read the wrong log,
    metrics and flags)."""
    scope = file.scope.engine
    if server_named or scope is None:
        return file, []
    if scope not in {e.value for e in ENGINES}:
        names = ", ".join(e.value for e in ENGINES)
        message = (
            f"{scope!r} is no engine collect reads, and [server] names none: set server.engine "
            f"(one of {names}) to the engine that serves the arms"
        )
        return file, [("scope.engine", message)]
    server = msgspec.structs.replace(file.server, engine=Engine(scope))
    return msgspec.structs.replace(file, server=server), []


def _file_problems(file: CampaignFile) -> list[_check.Located]:
    """What the types cannot say: a served command, speculation by role, unique names, devices."""
    out: list[_check.Located] = []
    server = file.server
    if server.mode == "launch" and not server.command and server.compose is None:
        out.append(("server.command", "launch mode needs the serve command (an argv list) or server.compose"))
    out += _deployment_problems(server)
    if server.shell and len(server.command) != 1:
        out.append(("server.command", "shell = true takes the command as one string element"))
    for i, arm in enumerate(file.arms):
        if arm.role == "control" and (arm.method is not None or arm.k):
            out.append((f"arms[{i}]", "a control arm runs with speculation off: no method, no k"))
        if arm.role == "candidate" and (arm.method is None or arm.k == 0):
            out.append((f"arms[{i}]", "a candidate arm needs method and k >= 1"))
        if server.mode == "external" and not arm.base_url:
            out.append((f"arms[{i}].base_url", "external mode needs base_url per arm"))
    for i, wl in enumerate(file.workloads):
        out.extend((f"workloads[{i}]", message) for message in _workload_problems(wl))
    names = [a.name for a in file.arms]
    out.extend(
        ("arms", f"arm {dup!r} appears twice") for dup in sorted({n for n in names if names.count(n) > 1})
    )
    if not any(a.role == "control" for a in file.arms):
        out.append(("arms", "no control arm: add off_A first and off_B last"))
    ids = [w.id for w in file.workloads]
    out.extend(
        ("workloads", f"workload {dup!r} appears twice")
        for dup in sorted({n for n in ids if ids.count(n) > 1})
    )
    return out + _device_problems(file)


def _deployment_problems(server: ServerSection) -> list[_check.Located]:
    """[server] compose against command and mode, launch without compose, shell-mode before_boot."""
    out: list[_check.Located] = []
    if server.compose is not None and server.command:
        out.append(("server.compose", "give server.command or server.compose, not both"))
    if server.compose is not None and server.mode != "launch":
        out.append(("server.compose", 'server.compose needs mode = "launch" (collect starts each arm)'))
    if server.compose is not None and server.shell:
        out.append(("server.shell", "shell = true with server.compose: the service's argv runs as it is"))
    given = [k for k in ("service", "env_file", "project_dir") if getattr(server, k) is not None]
    given += ["profiles"] if server.profiles else []
    given += ["launch"] if server.launch != "native" else []
    if server.compose is None and given:
        out.append((f"server.{given[0]}", "needs server.compose (the compose file of the service)"))
    for i, step in enumerate(server.before_boot):
        if not step or (server.shell and len(step) != 1):
            what = "one string (shell = true)" if server.shell else "a non-empty argv list"
            out.append((f"server.before_boot[{i}]", f"each command is {what}"))
    return out


def _compose_source(server: ServerSection, source: str) -> ComposeSource | None:
    """[server] compose with its paths taken from the campaign file's directory."""
    if server.compose is None:
        return None
    here = os.path.dirname(source)

    def path(value: str | None) -> str | None:
        return None if value is None else os.path.join(here, value)

    return ComposeSource(
        file=os.path.join(here, server.compose),
        service=server.service,
        profiles=server.profiles,
        env_file=path(server.env_file),
        project_dir=path(server.project_dir),
        launch=server.launch,
    )


def _workload_problems(wl: WorkloadSection) -> list[str]:
    """A workload gives one of prompt, prompt_tokens and dataset; the draw's keys need a dataset."""
    given = [key for key in ("prompt", "prompt_tokens", "dataset") if getattr(wl, key) is not None]
    out = [] if len(given) == 1 else ["give one of prompt, prompt_tokens and dataset"]
    if wl.dataset is None:
        extra = [key for key in ("category", "samples", "sample_seed") if getattr(wl, key) is not None]
        out.extend(f"{key} applies to a dataset workload only (add dataset = FILE)" for key in extra)
    return out


def _device_problems(file: CampaignFile) -> list[_check.Located]:
    """The [[devices]] checks across devices (each device was validated field by field before)."""
    out: list[_check.Located] = []
    devices = file.devices
    if devices is not None and not devices:
        out.append(("devices", "devices is empty; name at least one device or drop the key"))
    if devices and file.server.mode != "launch":
        out.append(
            ("devices", '[[devices]] needs server.mode = "launch" (collect starts each device\'s server)')
        )
    names = [d.name for d in devices or ()]
    out.extend(
        ("devices", f"device {dup!r} appears twice; names must be unique")
        for dup in sorted({n for n in names if names.count(n) > 1})
    )
    return out


def _plan(file: CampaignFile, source: str, sha256: str) -> CampaignPlan:
    """The run plan of a validated campaign file."""
    server = file.server
    devices = tuple(
        DevicePlan(
            name=d.name,
            node=d.node,
            port=d.port,
            vars=tuple(sorted(d.vars.items())),
            env=tuple(sorted(d.env.items())),
        )
        for d in file.devices or ()
    )
    likelihood = file.likelihood
    workloads = tuple(p for w in file.workloads for p in _workloads(w, source))
    ids = [w.id for w in workloads]
    if len(set(ids)) < len(ids):
        dup = sorted({n for n in ids if ids.count(n) > 1})[0]
        raise CampaignError(
            [
                Problem(
                    source,
                    f"workload {dup!r} appears twice (a dataset's ID.CATEGORY names its category workloads)",
                    key="workloads",
                )
            ]
        )
    return CampaignPlan(
        source=source,
        sha256=sha256,
        id=file.id,
        title=file.title,
        window_tokens=file.window_tokens,
        notes=file.notes,
        concurrency=file.concurrency,
        reps=file.reps,
        warmup_runs=file.warmup_runs,
        boots=file.boots,
        scope=tuple(
            (k, getattr(file.scope, k)) for k in ("device", "engine", "engine_version", "model", "claim")
        ),
        server=ServerPlan(
            mode=server.mode,
            command=server.command,
            shell=server.shell,
            env=tuple(sorted(server.env.items())),
            host=server.host,
            port=server.port,
            health_path=server.health_path,
            boot_timeout=server.boot_timeout,
            grace_seconds=server.grace_seconds,
            stall_seconds=server.stall_seconds,
            settle_seconds=server.settle_seconds,
            api_key_env=server.api_key_env,
            engine=server.engine,
            secrets=server.secrets,
            model=server.model,
            compose=_compose_source(server, source),
            discipline=BootDiscipline(
                server.before_boot,
                server.before_boot_timeout,
                server.min_available_memory_gib,
                server.memory_wait_seconds,
            ),
        ),
        vars=tuple(sorted(file.vars.items())),
        arms=tuple(_arm(a) for a in file.arms),
        workloads=workloads,
        coherence=tuple(
            CoherenceCase(c.id, c.prompt, c.expected, c.max_tokens, c.chat) for c in file.coherence
        ),
        likelihood_text=None if likelihood is None else likelihood.text,
        likelihood_reps=1 if likelihood is None else likelihood.reps,
        devices=devices,
        order_seed=default_order_seed(file.id) if file.order_seed is None else file.order_seed,
    )


def _arm(arm: ArmSection) -> ArmPlan:
    return ArmPlan(
        name=arm.name,
        role=str(arm.role),
        method=None if arm.method is None else str(arm.method),
        k=arm.k,
        serve_args=arm.serve_args,
        base_url=arm.base_url,
        family=arm.family,
        labels=tuple(sorted(arm.labels.items())),
        config=arm.config,
    )


def _workloads(w: WorkloadSection, source: str) -> tuple[WorkloadPlan, ...]:
    """The workload a section names, or, for a dataset, one per category (ID.CATEGORY)."""
    prompt = w.prompt if w.prompt is not None else generated_prompt(w.prompt_tokens or 0)
    plan = WorkloadPlan(
        id=w.id,
        prompt=prompt if w.dataset is None else "",
        prompt_tokens=w.prompt_tokens,
        max_tokens=w.max_tokens,
        expect_identical=w.expect_identical,
        chat=w.chat,
        ignore_eos=w.ignore_eos,
        nonce=w.nonce,
    )
    if w.dataset is None:
        return (plan,)
    key = f"workloads.{w.id}.dataset"
    sha, prompts = datasets.load_dataset(Path(source).parent / w.dataset, source, key, w.category)
    seed = datasets.default_sample_seed(w.id) if w.sample_seed is None else w.sample_seed
    out = []
    for drawn in datasets.sample(prompts, w.dataset, sha, seed, w.samples):
        workload_id = f"{w.id}.{drawn.category}"
        if len(workload_id) > MAX_NAME:
            message = f"workload id {workload_id!r} is longer than {MAX_NAME} characters; shorten the id"
            raise CampaignError([Problem(source, message, key=key)])
        first = drawn.prompts[0].as_text  # the identity probe's prompt
        out.append(replace(plan, id=workload_id, prompt=first, chat=w.chat or drawn.chat, drawn=drawn))
    return tuple(out)


def default_order_seed(campaign_id: str) -> int:
    """The order seed of a campaign that names none: from its id, so every shard draws the same order."""
    return int.from_bytes(hashlib.sha256(campaign_id.encode("utf-8")).digest()[:4], "big")


def load_campaign_file(path: str | Path) -> CampaignPlan:
    """Read and validate a campaign file (a regular file of at most MAX_CAMPAIGN_BYTES)."""
    source = str(path)
    try:
        data = read_regular(path, MAX_CAMPAIGN_BYTES, "a campaign file")
    except NotReadable as exc:
        hint = "; pass a campaign TOML (see docs/campaign-format.md)" if str(exc) == "not found" else ""
        raise CampaignError([Problem(source, f"{exc}{hint}")]) from None
    text = _check.text_of(data, source, CampaignError)  # a byte order mark or bad UTF-8 is named
    return parse_campaign(text, source, hashlib.sha256(data).hexdigest())
