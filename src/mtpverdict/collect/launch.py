"""Arms from the seat's own compose service, and how each boot of them is launched: natively or by docker.

A campaign whose `[server] compose` names a service is resolved here, before anything runs, by the
Compose the gate uses (mtpverdict.compose): the service's entrypoint and command, with its own
speculative flags removed, become the serve command, and every arm's `serve_args` go where those
flags stood ({spec}); the service's environment joins the server's. The resolved service, its hash
and its hash without speculation go into campaign.json (`deployment`), so the gate can later say by
hash which compose service the evidence was collected from.

`launch = "native"` runs the derived argv on this host (mounts, devices and ipc are the container's
and are not reproduced); `launch = "docker"` runs `docker run` of the service (compose/docker.py) as
a container named per arm and boot, removes a leftover container of that name before the boot and
stops the container by name after it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

from mtpverdict.collect.campaign import SPEC_PLACEHOLDER, CampaignPlan, DevicePlan
from mtpverdict.collect.deployment import ComposeSource
from mtpverdict.collect.redact import Redactor
from mtpverdict.collect.server import LaunchedServer
from mtpverdict.compose import INSTALL_HINT, ComposeOptions, ResolvedService, find_resolver, resolve_service
from mtpverdict.compose.derive import base_service, deployment_record
from mtpverdict.compose.docker import container_name, docker_remove_argv, docker_run_argv, docker_stop_argv
from mtpverdict.errors import CampaignError, InputError, Problem
from mtpverdict.serveconfig import scan_speculation

__all__ = ["ContainerServer", "launched_server", "remove_container", "resolve_deployment"]

DOCKER_SECONDS = 60.0  # a `docker rm` or the margin over a `docker stop`'s own grace period


def resolve_deployment(plan: CampaignPlan) -> CampaignPlan:
    """The plan with its serve command and environment derived from its compose service (unchanged
    for a campaign without [server] compose). CampaignError without a resolver; InputError for what
    Compose refuses, what the gate could not prove about the service, or an environment conflict."""
    source = plan.server.compose
    if source is None or plan.server.deployment is not None:
        return plan
    resolver = find_resolver()
    if resolver is None:
        raise CampaignError(
            [
                Problem(
                    plan.source,
                    f"needs a Compose v2 to resolve {source.file}: {INSTALL_HINT}",
                    key="server.compose",
                )
            ]
        )
    _check_paths(plan, source)
    options = ComposeOptions(
        profiles=source.profiles, env_file=source.env_file, project_dir=source.project_dir
    )
    try:
        resolved = resolve_service(source.file, source.service, options, resolver)
    except InputError as exc:  # the campaign's key too: which setting named the project Compose refuses
        raise InputError(
            [
                Problem(
                    plan.source,
                    f"{problem}",
                    key="server.compose" if problem.key != "services" else "server.service",
                )
                for problem in exc.problems
            ]
        ) from None
    if resolved.refusals:
        raise InputError(
            [Problem(source.file, f"cannot derive the arms: {why}") for why in resolved.refusals]
        )
    _refuse_outside_speculation(resolved, source.file)
    base = base_service(resolved)
    command = (*base.argv[: base.insert_at], SPEC_PLACEHOLDER, *base.argv[base.insert_at :])
    if not base.argv:
        raise InputError(
            [
                Problem(
                    source.file,
                    "sets neither entrypoint nor command: it runs the image's own, which collect cannot "
                    "derive arms from",
                    key=f"services.{resolved.service}",
                )
            ]
        )
    if source.launch == "docker":  # what the builder refuses is refused now, before anything is written
        docker_run_argv(
            resolved.service_dict,
            base.argv,
            name=container_name(plan.id, "check", 1),
            volume_names=dict(resolved.volume_names),
            source=source.file,
        )
    merged = _environment(plan, resolved, source.file)  # a conflict is refused for either launch
    env = merged if source.launch == "native" else ()  # docker: the service's own, in its argv
    deployment = deployment_record(resolved, source.launch)
    server = dataclasses.replace(plan.server, command=command, env=env, deployment=deployment)
    return dataclasses.replace(plan, server=server)


def _check_paths(plan: CampaignPlan, source: ComposeSource) -> None:
    """The compose file, and an env_file or project_dir the campaign names, exist: Compose would
    ignore a missing env file and resolve in a missing directory, so neither is left to it."""
    problems = []
    if not os.path.basename(source.file) or not os.path.isfile(source.file):
        shown = source.file if os.path.basename(source.file) else "an empty path"
        problems.append(Problem(plan.source, f"{shown} is not a compose file here", key="server.compose"))
    if source.env_file is not None and not os.path.isfile(source.env_file):
        problems.append(Problem(plan.source, f"{source.env_file} is not a file here", key="server.env_file"))
    if source.project_dir is not None and not os.path.isdir(source.project_dir):
        problems.append(
            Problem(plan.source, f"{source.project_dir} is not a directory here", key="server.project_dir")
        )
    if problems:
        raise InputError(problems)


def _refuse_outside_speculation(resolved: ResolvedService, source: str) -> None:
    """Refuse a service whose speculation the arms could not replace, for the reasons the gate gives
    (serveconfig.scan_speculation, one check for both): speculation set in the service's environment
    (LLAMA_ARG_SPEC_TYPE, ..._MODEL_DRAFT) or in a `--config FILE`, an unknown or removed speculative
    flag. Every arm, the off control included, would run with it."""
    _, reasons = scan_speculation(resolved.argv, [name for name, _ in resolved.environment])
    if reasons:
        raise InputError(
            [
                Problem(source, f"cannot derive the arms: {why}", key=f"services.{resolved.service}")
                for why in reasons
            ]
        )


# what a device may add over the compose service: the variables that select its accelerator (recorded
# in campaign.json's devices); any other variable would run a deployment the service does not describe
DEVICE_SELECTION = frozenset(
    {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}
)


def _environment(plan: CampaignPlan, resolved: ResolvedService, source: str) -> tuple[tuple[str, str], ...]:
    """The service's environment (what a native launch must give the server too). A variable the
    campaign's [server] env or a device's env adds or sets otherwise is refused, naming its key:
    neither the evidence's deployment nor the gate's hash would hold it (a device may set the
    variables that select its accelerator, DEVICE_SELECTION)."""
    own = {k: v for k, v in resolved.environment if v is not None}  # None: the host's, as it is
    service = f"{source} service {resolved.service}"
    problems = [
        Problem(plan.source, _added(name, service, name in own), key=f"server.env.{name}")
        for name, value in plan.server.env
        if own.get(name) != value
    ]
    problems += [
        Problem(plan.source, _added(name, service, name in own), key=f"devices[{i}].env.{name}")
        for i, device in enumerate(plan.devices)
        for name, value in device.env
        if name not in DEVICE_SELECTION and own.get(name) != value
    ]
    if problems:
        raise InputError(problems)
    return tuple(sorted(own.items()))


def _added(name: str, service: str, overrides: bool) -> str:
    how = "sets otherwise than" if overrides else "adds, which is not in"
    return (
        f"{name}: the campaign {how} {service}; set it in the service (what is deployed is what is "
        "measured and what the gate compares by hash) and drop it here"
    )


class ContainerServer(LaunchedServer):
    """A boot run as `docker run --rm --name=NAME ...`: the docker client is the launched process (its
    output is the container's log); stopping it stops the container by name first."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        owner: Path,
        redactor: Redactor | None = None,
    ) -> None:
        super().__init__(argv, env, log_path, owner, redactor)
        self.name = name

    def stop(self, grace_seconds: float) -> int | None:
        if self.pid is not None:
            _docker(docker_stop_argv(self.name, grace_seconds), grace_seconds + DOCKER_SECONDS)
        return super().stop(grace_seconds)


def remove_container(name: str) -> bool:
    """Remove a container of this name left by an earlier boot; True when there was one."""
    done = _docker(docker_remove_argv(name), DOCKER_SECONDS)
    return done is not None and done.returncode == 0


def _docker(argv: list[str], timeout: float) -> subprocess.CompletedProcess[bytes] | None:
    try:
        return subprocess.run(
            argv, capture_output=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )  # noqa: S603
    except (OSError, subprocess.SubprocessError):
        return None


def launched_server(
    plan: CampaignPlan,
    argv: list[str],
    env: dict[str, str],
    log_path: Path,
    owner: Path,
    redactor: Redactor,
    where: tuple[str, int, DevicePlan | None],
) -> LaunchedServer:
    """The server of one boot (`where`: its arm, boot and device): the argv itself, or a container of
    the compose service running it."""
    deployment = plan.server.deployment
    if deployment is None or deployment.launch != "docker":
        return LaunchedServer(argv, env, log_path, owner, redactor)
    arm, boot, device = where
    name = container_name(plan.id, arm, boot, device.name if device else None)
    run = docker_run_argv(
        deployment.service_json,
        argv,
        name=name,
        environment=env,
        volume_names=deployment.volume_names,
        source=deployment.compose_files[0],
    )
    return ContainerServer(name, run, {}, log_path, owner, redactor)
