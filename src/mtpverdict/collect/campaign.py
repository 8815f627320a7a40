"""Campaign files for `collect` (TOML, campaign_version 1): strict loading into a frozen plan.

A campaign file is data: the serve command is an argv list whose elements (and the env values and the
arms' serve_args) may hold placeholders ({port}, {arm}, {boot}, {results} and names from [vars] or
--var); the element "{spec}" splices the arm's speculative arguments. Nothing is passed to a shell
unless `shell = true` is set explicitly, and then every substituted value is quoted for the shell.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpverdict._files import NotReadable, read_regular
from mtpverdict.errors import CampaignError, Problem
from mtpverdict.results.spec import METHODS, RESULTS_FORMAT, Field, check_object
from mtpverdict.rules.policy import toml_error_line

CAMPAIGN_VERSION = 1
PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
SPEC_PLACEHOLDER = "{spec}"
BUILTIN_VARS = ("port", "arm", "boot", "results", "device", "node")
SHELL = "/bin/sh"  # what `shell = true` runs the command with, as subprocess's shell=True does
# A campaign is a few tables and prompts (the shipped ones are 3 KB); anything near this size is not one.
MAX_CAMPAIGN_BYTES = 4 << 20

# Flags that carry the speculative configuration, per engine; anything else in an arm's serve_args
# breaks harness parity (the arms would differ in more than speculation).
SPEC_FLAGS = (
    "--speculative-config",
    "--speculative_config",
    "--speculative-model",
    "--num-speculative-tokens",
    "--speculative-draft-tensor-parallel-size",
    "--ngram-prompt-lookup-max",
    "--ngram-prompt-lookup-min",
    "--speculative-algorithm",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-draft-model-path",
    "--speculative-token-map",
    "--model-draft",
    "-md",
    "--draft-max",
    "--draft",
    "--draft-n",
    "--draft-min",
    "--draft-p-min",
    "--spec-replace",
    "--ctx-size-draft",
    "-cd",
    "--gpu-layers-draft",
    "-ngld",
    "--device-draft",
    "-devd",
)


def _f(name: str, type_: str, description: str, **kw: Any) -> Field:
    return Field(name=name, type=type_, description=description, **kw)


TOP_FIELDS = (
    _f("campaign_version", "int", "Always 1.", minimum=1),
    _f(
        "id",
        "str",
        "Campaign id (also the results campaign id).",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$",
    ),
    _f("title", "str", "What the campaign measures."),
    _f("window_tokens", "int", "Context window for KV ceilings.", required=False, nullable=True, minimum=1),
    _f("notes", "str", "Free text.", required=False, nullable=True),
    _f("concurrency", "int_list", "Concurrency levels, each a cell.", minimum=1),
    _f("reps", "int", "Measured runs per (arm, workload, concurrency) cell and boot.", minimum=1),
    _f("warmup_runs", "int", "Warm-up runs per boot, recorded with warmup true.", required=False, minimum=0),
    _f(
        "boots",
        "int",
        "Boots per arm (rounds of the arm order; per device with [[devices]]).",
        required=False,
        minimum=1,
    ),
    _f(
        "order_seed",
        "int",
        "Seed of the arm order drawn per device and round (with [[devices]]; default from the id).",
        required=False,
        minimum=0,
    ),
    _f("devices", "obj_list", "Devices the campaign is laid out over, each a block.", required=False),
    _f("scope", "obj", "device, engine, engine_version, model, claim.", required=False),
    _f("server", "obj", "How arms are served."),
    _f("vars", "str_map", "Default values of command placeholders.", required=False),
    _f("arms", "obj_list", "Arms in boot order."),
    _f("workloads", "obj_list", "Prompt shapes."),
    _f("coherence", "obj_list", "Coherence cases.", required=False),
    _f("likelihood", "obj", "Teacher-forced likelihood text.", required=False),
)
SCOPE_FIELDS = tuple(
    _f(k, "str", f"scope {k}", required=False, nullable=True)
    for k in ("device", "engine", "engine_version", "model", "claim")
)
SERVER_FIELDS = (
    _f(
        "mode",
        "str",
        "launch (collect starts each arm) or external (arms give base_url).",
        enum=("launch", "external"),
    ),
    _f("command", "str_list", "Serve argv template (launch mode).", required=False),
    _f(
        "shell",
        "bool",
        "Run command[0] through /bin/sh -c (explicit opt-in); every substituted value is quoted.",
        required=False,
    ),
    _f("env", "str_map", "Extra environment for the server.", required=False),
    _f("host", "str", "Host collect talks to.", required=False),
    _f("port", "int", "Port for launched servers.", required=False, minimum=1, maximum=65535),
    _f("health_path", "str", "Path polled until it answers 200.", required=False),
    _f("boot_timeout", "num", "Seconds to wait for health.", required=False, minimum=1),
    _f("grace_seconds", "num", "Seconds between SIGTERM and SIGKILL.", required=False, minimum=0),
    _f(
        "stall_seconds",
        "num",
        "A stream with no bytes for this long is recorded as stalled.",
        required=False,
        minimum=1,
    ),
    _f("api_key_env", "str", "Environment variable holding the API key (never recorded).", required=False),
    _f(
        "settle_seconds",
        "num",
        "Seconds to wait after a boot's work before stopping it, so the engine logs its last stats window.",
        required=False,
        minimum=0,
    ),
    _f(
        "engine",
        "str",
        "Engine whose log and metrics to read.",
        required=False,
        enum=("vllm", "sglang", "llamacpp"),
    ),
    _f("model", "str", "Model name sent in requests (default: the first of /v1/models).", required=False),
)
ARM_FIELDS = (
    _f("name", "str", "Arm name.", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$"),
    _f("role", "str", "control or candidate.", enum=("control", "candidate")),
    _f("method", "str", "Speculative method; omit for off.", required=False, nullable=True, enum=METHODS),
    _f("k", "int", "Speculative tokens per step.", required=False, nullable=True, minimum=0),
    _f("serve_args", "str_list", "Arguments that turn the arm's speculation on.", required=False),
    _f("base_url", "str", "Server URL in external mode.", required=False),
    _f("family", "str", "Comparison family.", required=False),
    _f("labels", "str_map", "Free labels.", required=False),
    _f("config", "obj", "The engine's speculative config (recorded in the campaign).", required=False),
)
WORKLOAD_FIELDS = (
    _f("id", "str", "Workload id.", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$"),
    _f("prompt", "str", "Prompt text.", required=False),
    _f("prompt_tokens", "int", "Generate a prompt of about this many tokens.", required=False, minimum=1),
    _f("max_tokens", "int", "Completion tokens asked for.", minimum=1),
    _f("expect_identical", "bool", "Greedy outputs must match across arms.", required=False),
    _f("chat", "bool", "Use /v1/chat/completions.", required=False),
    _f(
        "ignore_eos",
        "bool",
        "Ask the server to ignore EOS (vLLM extension) so every run is max_tokens.",
        required=False,
    ),
    _f("nonce", "bool", "Prefix every timed prompt with an unseeded nonce (default true).", required=False),
)
COHERENCE_FIELDS = (
    _f("id", "str", "Case id.", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$"),
    _f("prompt", "str", "Prompt."),
    _f("expected", "str", "Text the greedy output must contain."),
    _f("max_tokens", "int", "Completion tokens.", required=False, minimum=1),
    _f("chat", "bool", "Use chat completions.", required=False),
)
DEVICE_FIELDS = (
    _f(
        "name",
        "str",
        "Device name, recorded in each boot record.",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$",
    ),
    _f(
        "node",
        "str",
        "Host the device is on, recorded in each boot record.",
        required=False,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$",
    ),
    _f(
        "port",
        "int",
        "Port of this device's server (default server.port).",
        required=False,
        minimum=1,
        maximum=65535,
    ),
    _f("vars", "str_map", "Placeholder values for this device (override [vars]).", required=False),
    _f(
        "env",
        "str_map",
        "Extra server environment for this device (e.g. CUDA_VISIBLE_DEVICES).",
        required=False,
    ),
)
LIKELIHOOD_FIELDS = (
    _f("text", "str", "Text scored teacher-forced."),
    _f("reps", "int", "Repetitions per boot.", required=False, minimum=1),
)


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
    model: str | None


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
    """One prompt shape."""

    id: str
    prompt: str
    prompt_tokens: int | None
    max_tokens: int
    expect_identical: bool
    chat: bool
    ignore_eos: bool
    nonce: bool


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
    order_seed: int | None = None  # set when devices are: the seed of the per-device arm order

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
            "workloads": [
                {
                    "id": w.id,
                    "prompt_tokens": w.prompt_tokens,
                    "max_tokens": w.max_tokens,
                    "expect_identical": w.expect_identical,
                    "description": ("chat " if w.chat else "")
                    + (
                        f"generated prompt of ~{w.prompt_tokens} tokens"
                        if w.prompt_tokens
                        else f"prompt of {len(w.prompt)} characters"
                    ),
                }
                for w in self.workloads
            ],
            "window_tokens": self.window_tokens,
            "notes": notes,
            "synthetic": False,
            "source": f"mtpverdict collect, campaign file sha256 {self.sha256[:16]}",
        }


def _problems(obj: dict[str, Any], fields: tuple[Field, ...], prefix: str, source: str) -> list[Problem]:
    return [Problem(source, message, key=key) for key, message in check_object(obj, fields, prefix)]


def parity_problems(arms: tuple[ArmPlan, ...]) -> list[str]:
    """Arms whose serve_args carry anything but speculative flags: they break harness parity."""
    out = []
    for arm in arms:
        args = list(arm.serve_args)
        i = 0
        while i < len(args):
            flag = args[i].split("=", 1)[0]
            if flag not in SPEC_FLAGS:
                out.append(
                    f"arm {arm.name}: {args[i]!r} is not a speculative flag; arms must differ only "
                    "in speculation (use --allow-argv-mismatch to record the difference anyway)"
                )
                break
            i += 1 if "=" in args[i] else 2
    return out


def generated_prompt(tokens: int) -> str:
    """A deterministic prose prompt of about `tokens` tokens (one common word is about one token)."""
    words = (
        "the model reads a long passage about rivers and mountains and cities and the people who "
        "live near them and then it writes a short summary of what it has read"
    ).split()
    return " ".join(words[i % len(words)] for i in range(tokens))


def parse_campaign(text: str, source: str, sha256: str = "") -> CampaignPlan:
    """Validate campaign text; raise CampaignError listing every problem (file and key)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line, message = toml_error_line(exc)
        raise CampaignError([Problem(source, f"not valid TOML: {message}", line=line)]) from None
    problems = _problems(data, TOP_FIELDS, "", source)
    if problems:
        raise CampaignError(problems)
    if data["campaign_version"] != CAMPAIGN_VERSION:
        raise CampaignError(
            [
                Problem(
                    source,
                    f"campaign_version {data['campaign_version']} is not supported; "
                    f"this mtpverdict reads {CAMPAIGN_VERSION}",
                    key="campaign_version",
                )
            ]
        )
    scope = data.get("scope", {})
    server = data["server"]
    problems += _problems(scope, SCOPE_FIELDS, "scope.", source)
    problems += _problems(server, SERVER_FIELDS, "server.", source)
    for i, arm in enumerate(data["arms"]):
        problems += _problems(arm, ARM_FIELDS, f"arms[{i}].", source)
    for i, wl in enumerate(data["workloads"]):
        problems += _problems(wl, WORKLOAD_FIELDS, f"workloads[{i}].", source)
        if ("prompt" in wl) == ("prompt_tokens" in wl):
            problems.append(
                Problem(source, "give prompt or prompt_tokens (one of them)", key=f"workloads[{i}]")
            )
    for i, case in enumerate(data.get("coherence", [])):
        problems += _problems(case, COHERENCE_FIELDS, f"coherence[{i}].", source)
    for i, device in enumerate(data.get("devices", [])):
        problems += _problems(device, DEVICE_FIELDS, f"devices[{i}].", source)
    if "likelihood" in data:
        problems += _problems(data["likelihood"], LIKELIHOOD_FIELDS, "likelihood.", source)
    if problems:
        raise CampaignError(problems)
    mode = server["mode"]
    if mode == "launch" and not server.get("command"):
        problems.append(
            Problem(source, "launch mode needs the serve command (an argv list)", key="server.command")
        )
    if server.get("shell") and len(server.get("command", [])) != 1:
        problems.append(
            Problem(source, "shell = true takes the command as one string element", key="server.command")
        )
    arms: list[ArmPlan] = []
    for i, raw in enumerate(data["arms"]):
        role, method, k = raw["role"], raw.get("method"), raw.get("k")
        if role == "control" and (method is not None or k):
            problems.append(
                Problem(source, "a control arm runs with speculation off: no method, no k", key=f"arms[{i}]")
            )
        if role == "candidate" and (method is None or k == 0):
            problems.append(Problem(source, "a candidate arm needs method and k >= 1", key=f"arms[{i}]"))
        if mode == "external" and not raw.get("base_url"):
            problems.append(
                Problem(source, "external mode needs base_url per arm", key=f"arms[{i}].base_url")
            )
        arms.append(
            ArmPlan(
                name=raw["name"],
                role=role,
                method=method,
                k=k,
                serve_args=tuple(raw.get("serve_args", [])),
                base_url=raw.get("base_url"),
                family=raw.get("family", "default"),
                labels=tuple(sorted(raw.get("labels", {}).items())),
                config=raw.get("config"),
            )
        )
    names = [a.name for a in arms]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(Problem(source, f"arm {dup!r} appears twice", key="arms"))
    if not any(a.role == "control" for a in arms):
        problems.append(Problem(source, "no control arm: add off_A first and off_B last", key="arms"))
    workloads = [
        WorkloadPlan(
            id=w["id"],
            prompt=w.get("prompt") or generated_prompt(w["prompt_tokens"]),
            prompt_tokens=w.get("prompt_tokens"),
            max_tokens=w["max_tokens"],
            expect_identical=w.get("expect_identical", False),
            chat=w.get("chat", False),
            ignore_eos=w.get("ignore_eos", False),
            nonce=w.get("nonce", True),
        )
        for w in data["workloads"]
    ]
    ids = [w.id for w in workloads]
    for dup in sorted({n for n in ids if ids.count(n) > 1}):
        problems.append(Problem(source, f"workload {dup!r} appears twice", key="workloads"))
    devices = _devices(data, source, problems)
    if problems:
        raise CampaignError(problems)
    likelihood = data.get("likelihood", {})
    return CampaignPlan(
        source=source,
        sha256=sha256,
        id=data["id"],
        title=data["title"],
        window_tokens=data.get("window_tokens"),
        notes=data.get("notes"),
        concurrency=tuple(data["concurrency"]),
        reps=data["reps"],
        warmup_runs=data.get("warmup_runs", 1),
        boots=data.get("boots", 1),
        scope=tuple((k, scope.get(k)) for k in ("device", "engine", "engine_version", "model", "claim")),
        server=ServerPlan(
            mode=mode,
            command=tuple(server.get("command", [])),
            shell=bool(server.get("shell", False)),
            env=tuple(sorted(server.get("env", {}).items())),
            host=server.get("host", "127.0.0.1"),
            port=server.get("port", 8000),
            health_path=server.get("health_path", "/health"),
            boot_timeout=float(server.get("boot_timeout", 600)),
            grace_seconds=float(server.get("grace_seconds", 30)),
            stall_seconds=float(server.get("stall_seconds", 120)),
            settle_seconds=float(server.get("settle_seconds", 0)),
            api_key_env=server.get("api_key_env"),
            engine=server.get("engine", "vllm"),
            model=server.get("model"),
        ),
        vars=tuple(sorted(data.get("vars", {}).items())),
        arms=tuple(arms),
        workloads=tuple(workloads),
        coherence=tuple(
            CoherenceCase(
                id=c["id"],
                prompt=c["prompt"],
                expected=c["expected"],
                max_tokens=c.get("max_tokens", 16),
                chat=c.get("chat", False),
            )
            for c in data.get("coherence", [])
        ),
        likelihood_text=likelihood.get("text"),
        likelihood_reps=likelihood.get("reps", 1),
        devices=devices,
        order_seed=(data.get("order_seed", default_order_seed(data["id"])) if devices else None),
    )


def default_order_seed(campaign_id: str) -> int:
    """The order seed of a campaign that names none: from its id, so every shard draws the same order."""
    return int.from_bytes(hashlib.sha256(campaign_id.encode("utf-8")).digest()[:4], "big")


def _devices(data: dict[str, Any], source: str, problems: list[Problem]) -> tuple[DevicePlan, ...]:
    """The [[devices]] of a campaign (validated field by field before), with the checks across them."""
    raw = data.get("devices", [])
    if "devices" in data and not raw:
        problems.append(
            Problem(source, "devices is empty; name at least one device or drop the key", key="devices")
        )
    if "order_seed" in data and not raw:
        problems.append(
            Problem(
                source, "order_seed needs [[devices]] (one device keeps the file's order)", key="order_seed"
            )
        )
    if raw and data["server"].get("mode") != "launch":
        problems.append(
            Problem(
                source,
                '[[devices]] needs server.mode = "launch" (collect starts each device\'s server)',
                key="devices",
            )
        )
    devices = tuple(
        DevicePlan(
            name=d["name"],
            node=d.get("node"),
            port=d.get("port"),
            vars=tuple(sorted(d.get("vars", {}).items())),
            env=tuple(sorted(d.get("env", {}).items())),
        )
        for d in raw
    )
    names = [d.name for d in devices]
    problems.extend(
        Problem(source, f"device {dup!r} appears twice; names must be unique", key="devices")
        for dup in sorted({n for n in names if names.count(n) > 1})
    )
    return devices


def load_campaign_file(path: str | Path) -> CampaignPlan:
    """Read and validate a campaign file (a regular file of at most MAX_CAMPAIGN_BYTES)."""
    source = str(path)
    try:
        data = read_regular(path, MAX_CAMPAIGN_BYTES, "a campaign file")
    except NotReadable as exc:
        hint = "; pass a campaign TOML (see docs/campaign-format.md)" if str(exc) == "not found" else ""
        raise CampaignError([Problem(source, f"{exc}{hint}")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CampaignError([Problem(source, f"not valid UTF-8 at byte {exc.start}")]) from None
    return parse_campaign(text, source, hashlib.sha256(data).hexdigest())
