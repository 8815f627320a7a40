"""The `docker run` argv of one boot of a resolved compose service: what `docker compose up` would start.

The builder reads Compose's own resolved JSON (`config --format json`, long forms throughout), so
it never re-implements merging or interpolation; it translates the keys a serving container uses
(image, entrypoint and command, environment, ports, volumes, devices and GPU reservations, ipc,
shm_size, ulimits, healthcheck, ...) and refuses any other key rather than start a container that
differs from the deployment. Two keys are replaced on purpose: `container_name` (each boot runs as
its own name, so a leftover container is found and removed by name) and `restart` (a server that
dies must fail its boot, not come back). Every option with a value is written `--flag=value`, so
the argv reads back without knowing which flags take values.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mtpverdict.errors import InputError, Problem

__all__ = ["DOCKER_KEYS", "container_name", "docker_run_argv", "docker_stop_argv", "docker_remove_argv"]

_NAME_CHARACTERS = re.compile(r"[^a-zA-Z0-9_.-]+")
MAX_NAME = 128  # docker accepts longer names; a name this long is already unreadable in `docker ps`

# Keys Compose resolves that change nothing a `docker run` of one service must say: merged already
# (env_file into environment, profiles into which services run), replaced (container_name, restart),
# or metadata of the project (x- extensions, Compose's own pull and scale settings)
_IGNORED = frozenset({"env_file", "profiles", "container_name", "restart", "pull_policy", "scale"})
# scalar keys -> the docker run option each becomes
_SCALARS = {
    "ipc": "--ipc",
    "shm_size": "--shm-size",
    "network_mode": "--network",
    "runtime": "--runtime",
    "user": "--user",
    "working_dir": "--workdir",
    "hostname": "--hostname",
    "pid": "--pid",
    "platform": "--platform",
    "mem_limit": "--memory",
    "memswap_limit": "--memory-swap",
    "mem_reservation": "--memory-reservation",
    "cpus": "--cpus",
    "cpuset": "--cpuset-cpus",
    "stop_signal": "--stop-signal",
    "userns_mode": "--userns",
    "cgroup_parent": "--cgroup-parent",
}
# list keys -> the docker run option each element becomes
_LISTS = {
    "cap_add": "--cap-add",
    "cap_drop": "--cap-drop",
    "security_opt": "--security-opt",
    "group_add": "--group-add",
    "dns": "--dns",
    "extra_hosts": "--add-host",
    "tmpfs": "--tmpfs",
    "expose": "--expose",  # ports the container exposes without publishing them, as Compose starts it
}
_SWITCHES = {"init": "--init", "privileged": "--privileged", "read_only": "--read-only"}
_OTHERS = frozenset(
    {
        "image",
        "entrypoint",
        "command",
        "environment",
        "ports",
        "volumes",
        "devices",
        "gpus",
        "deploy",
        "ulimits",
        "healthcheck",
        "labels",
        "logging",
        "networks",
        "sysctls",
        "stop_grace_period",
    }
)
DOCKER_KEYS = frozenset(_IGNORED | _SCALARS.keys() | _LISTS.keys() | _SWITCHES.keys() | _OTHERS)


def container_name(campaign: str, arm: str, boot: int, device: str | None = None) -> str:
    """The container of one boot: mtpverdict-CAMPAIGN-[DEVICE-]ARM-bootN, in docker's characters."""
    parts = ["mtpverdict", campaign, *([device] if device else []), arm, f"boot{boot}"]
    name = "-".join(_NAME_CHARACTERS.sub("_", p) for p in parts)
    return name[:MAX_NAME]


def docker_remove_argv(name: str) -> list[str]:
    """Remove a container of this name, running or not (the leftover of an earlier boot)."""
    return ["docker", "rm", "--force", name]


def docker_stop_argv(name: str, grace_seconds: float) -> list[str]:
    """Stop the boot's container: SIGTERM (or its stop_signal), then SIGKILL after the grace period."""
    return ["docker", "stop", f"--time={max(int(grace_seconds), 0)}", name]


def docker_run_argv(
    service: Mapping[str, Any],
    argv: Sequence[str],
    *,
    name: str,
    environment: Mapping[str, str] = {},  # noqa: B006 - read only
    volume_names: Mapping[str, str] = {},  # noqa: B006 - read only
    source: str = "compose service",
) -> list[str]:
    """`docker run --rm --name=NAME ... IMAGE ARGS` for a resolved service whose entrypoint and command
    are `argv` (the arm's: the service's own with its speculative flags replaced).

    `environment` is added over the service's (the campaign's server env); `volume_names` maps the
    project's volume keys to the names Compose gives them (the resolved top-level `volumes`).
    InputError naming the key for anything the builder cannot say as `docker run` would run it.
    """
    unknown = sorted(k for k in service if k not in DOCKER_KEYS and not str(k).startswith("x-"))
    if unknown:
        listed = ", ".join(f"services.{k}" for k in unknown)
        raise InputError(
            [Problem(source, f"{listed}: not something one `docker run` can start; launch it natively")]
        )
    image = service.get("image")
    if not isinstance(image, str) or not image:
        raise InputError([Problem(source, "names no image (a build: only?); set image:", key="image")])
    out = ["docker", "run", "--rm", f"--name={name}"]
    out += _options(service, environment, volume_names, source)
    has_entrypoint = service.get("entrypoint") is not None
    if has_entrypoint:
        out.append(f"--entrypoint={argv[0] if argv else ''}")
    out.append(image)
    out += list(argv[1:] if has_entrypoint else argv)
    return out


def _options(
    service: Mapping[str, Any], environment: Mapping[str, str], volume_names: Mapping[str, str], source: str
) -> list[str]:
    out: list[str] = []
    for key, flag in _SCALARS.items():
        if service.get(key) is not None:
            out.append(f"{flag}={service[key]}")
    for key, flag in _LISTS.items():
        out += [f"{flag}={v}" for v in _as_list(service.get(key))]
    out += [flag for key, flag in _SWITCHES.items() if service.get(key) is True]
    out += list(_environment(service.get("environment"), environment))
    out += [f"--publish={p}" for p in _ports(service.get("ports"), source)]
    out += list(_volumes(service.get("volumes"), volume_names, source))
    out += [f"--device={d}" for d in _devices(service.get("devices"))]
    out += [f"--gpus={g}" for g in _gpus(service, source)]
    out += [f"--ulimit={u}" for u in _ulimits(service.get("ulimits"))]
    out += list(_healthcheck(service.get("healthcheck")))
    out += [f"--label={k}={_literal(v)}" for k, v in sorted((service.get("labels") or {}).items())]
    out += [f"--sysctl={k}={v}" for k, v in sorted((service.get("sysctls") or {}).items())]
    out += list(_logging(service.get("logging")))
    out += list(_limits(service.get("deploy"), source))
    grace = service.get("stop_grace_period")
    if grace is not None:
        out.append(f"--stop-timeout={_seconds(str(grace), source, 'stop_grace_period')}")
    networks = service.get("networks") or {}
    extra = sorted(n for n in networks if n != "default")
    if extra:
        raise InputError(
            [Problem(source, f"joins networks {', '.join(extra)}: a boot runs one container", key="networks")]
        )
    return out


def _as_list(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _environment(value: object, extra: Mapping[str, str]) -> Iterator[str]:
    own = value.items() if isinstance(value, dict) else ()
    merged: dict[str, str | None] = {k: None if v is None else _literal(v) for k, v in own}
    merged.update(extra)  # the campaign's: not Compose's output, so not escaped
    for key in sorted(merged):
        given = merged[key]
        yield f"--env={key}" if given is None else f"--env={key}={given}"  # None: from the host


def _ports(value: object, source: str) -> Iterator[str]:
    for port in value if isinstance(value, list) else ():
        if not isinstance(port, dict) or "target" not in port:
            raise InputError([Problem(source, f"a port Compose did not resolve: {port!r}", key="ports")])
        protocol = port.get("protocol") or "tcp"
        host = port.get("host_ip")
        published = port.get("published")
        prefix = (f"{host}:" if host else "") + (f"{published}:" if published else "")
        if host and not published:
            prefix = f"{host}::"
        yield f"{prefix}{port['target']}/{protocol}"


# what each kind of mount may say (Compose's long form); anything else is refused, naming the key
_MOUNT_KEYS = {
    "bind": frozenset({"propagation", "create_host_path", "selinux"}),
    "volume": frozenset({"nocopy", "subpath"}),
    "tmpfs": frozenset({"size", "mode"}),
}
_MOUNT_COMMON = frozenset({"type", "source", "target", "read_only", "consistency", "bind", "volume", "tmpfs"})


def _volumes(value: object, names: Mapping[str, str], source: str) -> Iterator[str]:
    for i, volume in enumerate(value if isinstance(value, list) else ()):
        kind = volume.get("type") if isinstance(volume, dict) else None
        if not isinstance(volume, dict) or not volume.get("target"):
            raise InputError(
                [Problem(source, f"a volume Compose did not resolve: {volume!r}", key="volumes")]
            )
        if kind not in _MOUNT_KEYS:
            raise InputError(
                [Problem(source, f"a {kind} volume cannot be mounted by `docker run`", key=f"volumes[{i}]")]
            )
        options = volume.get(kind) or {}
        unknown = sorted(
            {
                *(k for k in volume if k not in _MOUNT_COMMON),
                *(k for k in options if k not in _MOUNT_KEYS[kind]),
            }
        )
        if unknown:
            listed = ", ".join(f"volumes[{i}].{k}" for k in unknown)
            raise InputError(
                [Problem(source, f"{listed}: a mount option the builder does not carry into `docker run`")]
            )
        yield _mount(volume, kind, options, names, f"{source}: volumes[{i}]")


def _mount(
    volume: Mapping[str, Any], kind: str, options: Mapping[str, Any], names: Mapping[str, str], where: str
) -> str:
    """One mount as `docker run` says it: -v for a bind that creates its host path or relabels it for
    SELinux (what Compose's short syntax asks for), --mount otherwise."""
    target = volume["target"]
    read_only = ",readonly" if volume.get("read_only") else ""
    if kind == "bind":
        propagation, selinux = options.get("propagation"), options.get("selinux")
        if options.get("create_host_path") or selinux:
            if not options.get("create_host_path"):
                raise InputError(
                    [
                        Problem(
                            where,
                            "relabels for SELinux without create_host_path: `docker run -v` would create a "
                            "missing host path, and --mount cannot relabel",
                            key="bind.selinux",
                        )
                    ]
                )
            flags = [m for m in ("ro" if read_only else None, selinux, propagation) if m]
            return f"--volume={volume['source']}:{target}" + (f":{','.join(flags)}" if flags else "")
        extra = f",bind-propagation={propagation}" if propagation else ""
        return f"--mount=type=bind,source={volume['source']},target={target}{read_only}{extra}"
    if kind == "volume":
        name = names.get(str(volume.get("source")), volume.get("source"))
        nocopy = ",volume-nocopy" if options.get("nocopy") else ""
        subpath = f",volume-subpath={options['subpath']}" if options.get("subpath") else ""
        head = f"type=volume,source={name}," if name else "type=volume,"
        return f"--mount={head}target={target}{read_only}{nocopy}{subpath}"
    size = f",tmpfs-size={options['size']}" if options.get("size") else ""
    # the mode in octal digits, as Compose writes it and docker reads it
    mode = f",tmpfs-mode={options['mode']}" if options.get("mode") is not None else ""
    return f"--mount=type=tmpfs,target={target}{read_only}{size}{mode}"


def _devices(value: object) -> Iterator[str]:
    for device in value if isinstance(value, list) else ():
        if isinstance(device, dict):
            permissions = device.get("permissions") or "rwm"
            yield f"{device.get('source')}:{device.get('target') or device.get('source')}:{permissions}"
        else:
            yield str(device)


def _gpus(service: Mapping[str, Any], source: str) -> Iterator[str]:
    """`gpus:` and deploy.resources.reservations.devices with the gpu capability, as --gpus values."""
    deploy = service.get("deploy") or {}
    reserved = ((deploy.get("resources") or {}).get("reservations") or {}).get("devices") or []
    for request in [*(service.get("gpus") or []), *reserved]:
        capabilities = [c for group in [request.get("capabilities") or ["gpu"]] for c in _flat(group)]
        driver = request.get("driver")
        if "gpu" not in capabilities or driver not in (None, "", "nvidia"):
            raise InputError(
                [
                    Problem(
                        source,
                        f"a device request for driver {driver!r} with capabilities {capabilities}: "
                        "`docker run --gpus` asks for NVIDIA GPUs only",
                        key="deploy.resources.reservations.devices",
                    )
                ]
            )
        others = [c for c in capabilities if c != "gpu"]
        caps = _csv_field(f"capabilities={','.join(others)}") if others else ""
        caps = f",{caps}" if caps else ""
        ids = request.get("device_ids")
        count = request.get("count")
        if ids:
            yield f'"device={",".join(map(str, ids))}"{caps}'
        elif count in (None, -1, "all"):
            yield f"all{caps}" if not caps else f"count=all{caps}"
        else:
            yield f"{count}" if not caps else f"count={count}{caps}"


def _csv_field(field: str) -> str:
    """One field of docker's CSV option values (--gpus): quoted when it holds a comma."""
    return f'"{field}"' if "," in field else field


def _literal(value: object) -> str:
    """A value as the container gets it: Compose's resolved output writes a literal `$` as `$$`."""
    return str(value).replace("$$", "$")


def _flat(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _ulimits(value: object) -> Iterator[str]:
    for name, limit in sorted((value or {}).items()) if isinstance(value, dict) else ():
        if isinstance(limit, dict):
            yield f"{name}={limit.get('soft')}:{limit.get('hard')}"
        else:
            yield f"{name}={limit}:{limit}"


def _healthcheck(value: object) -> Iterator[str]:
    if not isinstance(value, dict):
        return
    test = value.get("test")
    if value.get("disable") or (isinstance(test, list) and test[:1] == ["NONE"]):
        yield "--no-healthcheck"
        return
    if isinstance(test, list) and test:
        words = [_literal(w) for w in test[1:]]
        command = words[0] if test[0] == "CMD-SHELL" and len(words) == 1 else shlex.join(words)
        yield f"--health-cmd={command}"
    for key, flag in (
        ("interval", "--health-interval"),
        ("timeout", "--health-timeout"),
        ("start_period", "--health-start-period"),
        ("start_interval", "--health-start-interval"),
        ("retries", "--health-retries"),
    ):
        if value.get(key) is not None:
            yield f"{flag}={value[key]}"


def _logging(value: object) -> Iterator[str]:
    if not isinstance(value, dict):
        return
    if value.get("driver"):
        yield f"--log-driver={value['driver']}"
    for key, option in sorted((value.get("options") or {}).items()):
        yield f"--log-opt={key}={option}"


def _limits(deploy: object, source: str) -> Iterator[str]:
    """deploy.resources.limits (cpus, memory) as docker run's; the rest of deploy is a swarm's."""
    if not isinstance(deploy, dict):
        return
    limits = (deploy.get("resources") or {}).get("limits") or {}
    if limits.get("cpus") is not None:
        yield f"--cpus={limits['cpus']}"
    if limits.get("memory") is not None:
        yield f"--memory={limits['memory']}"
    if limits.get("pids") is not None:
        yield f"--pids-limit={limits['pids']}"
    replicas = deploy.get("replicas")
    if replicas not in (None, 1):
        raise InputError(
            [Problem(source, f"runs {replicas} replicas: a boot is one container", key="deploy")]
        )


def _seconds(text: str, source: str, key: str) -> int:
    """A Compose duration (1m30s, 10s, 2h) in whole seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    found = re.fullmatch(r"(?:(\d+(?:\.\d+)?)(h|ms|us|m|s))+", text)
    if found is None:
        raise InputError([Problem(source, f"{text!r} is not a duration", key=key)])
    total = sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(h|ms|us|m|s)", text))
    return round(total)
