"""(3b) Freshness by hash: evidence collected from a compose service, against the proposed compose service.

A campaign whose arms were derived from a compose service ([server] compose) records the service as
Compose resolved it and `base_sha256`, its hash with the speculative flags removed (compose.derive).
The proposed service, resolved by Compose here, is hashed the same way: equal hashes mean the two
deployments differ only in speculation, which the gate says by hash. Otherwise the keys that differ
are named; a difference outside the entrypoint and command (image, environment, volumes, devices,
ipc, shm_size, ...) is stale evidence, while the command's own arguments were judged flag by flag
above (where the listen address and --ignore-arg may differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtpverdict.compose import ResolvedService
from mtpverdict.compose.derive import base_sha256, strip_speculative
from mtpverdict.formats.deployment import Deployment
from mtpverdict.serveconfig import ServeConfig

__all__ = ["COMMAND_KEYS", "NATIVE_CAVEAT", "deployment_reasons", "recorded_environment"]

COMMAND_KEYS = ("command", "entrypoint")  # judged argument by argument by gate.fresh
# what a native launch ran of the service: its argv and environment on the collecting host, not its container
NATIVE_CAVEAT = (
    "; but the evidence was launched natively: the service's argv and environment ran on the collecting "
    "host, while its image, ipc, shm_size, gpus, devices and volumes did not run, so the hash says the "
    "compose file is the same, not that its container was measured"
)


def _stripped(service: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(service)
    for key in COMMAND_KEYS:
        if isinstance(out.get(key), list):
            out[key] = list(strip_speculative([str(v) for v in out[key]])[0])
    return out


def recorded_environment(deployment: Deployment | None, config: ServeConfig) -> tuple[str, ...]:
    """The variables the proposed compose service sets as the evidence's deployment set them: the
    evidence records them (in its resolved service), so they are not the unrecorded environment
    gate.fresh refuses. A variable set otherwise, only on one side, or passed through from the
    deploying host (its value unknown) stays refused."""
    if deployment is None or not isinstance(config.compose, ResolvedService) or not config.compose.resolver:
        return ()
    ran = deployment.service_json.get("environment")
    recorded = ran if isinstance(ran, dict) else {}
    return tuple(
        name
        for name, value in config.env_values
        if value is not None
        and isinstance(recorded.get(name), str)
        and recorded[name].replace("$$", "$") == value
    )


def deployment_reasons(deployment: Deployment | None, config: ServeConfig) -> tuple[bool, list[str]]:
    """Whether the proposed compose service is the one the evidence was collected from but for its
    speculation, with what the gate says of it (nothing when the evidence names no deployment)."""
    if deployment is None:
        return True, []
    ran = (
        f"the evidence was collected from compose service {deployment.service} "
        f"({', '.join(deployment.compose_files)}; without its speculative flags sha256 "
        f"{deployment.base_sha256[:16]}, {deployment.launch} launch)"
    )
    resolved = config.compose
    if not isinstance(resolved, ResolvedService) or not resolved.resolver:
        return True, [
            f"{ran}; {config.source} was not resolved by Compose, so it is compared by its argv only"
        ]
    proposed = resolved.service_dict
    digest = base_sha256(proposed, resolved.definitions)
    if digest == deployment.base_sha256:
        caveat = NATIVE_CAVEAT if deployment.launch == "native" else ""
        return True, [
            f"{ran}: {config.source} has the same sha256 without its speculative flags, so it differs from "
            f"the evidence's deployment only in speculation{caveat}"
        ]
    before, after = _stripped(deployment.service_json), _stripped(proposed)
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    others = [k for k in keys if k not in COMMAND_KEYS]
    said = f"{ran}: {config.source} without its speculative flags has sha256 {digest[:16]}"
    alike = base_sha256(deployment.service_json, resolved.definitions) == deployment.base_sha256
    if not others and alike:
        return True, [f"{said}; they differ in {' and '.join(keys)} only, whose arguments are checked above"]
    if not others:  # the recorded service with the proposed definitions hashes otherwise
        return False, [
            f"stale evidence, compose service: {said}; it differs beyond speculation in the project's "
            f"top-level definitions of the volumes, networks, configs or secrets services.{resolved.service} "
            "uses (a named volume's driver_opts choose where its files come from)"
        ]
    shown = ", ".join(f"services.{resolved.service}.{k}" for k in others)
    return False, [f"stale evidence, compose service: {said}; it differs beyond speculation in {shown}"]
