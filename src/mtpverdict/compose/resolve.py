"""A compose service resolved by Compose (or read directly when it needs no resolver) into a ServeConfig."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from mtpverdict.compose._model import (
    CODE_CACHES,
    HOMES,
    INSTALL_HINT,
    MAX_OUTPUT,
    PROGRAM_PATHS,
    RESOLVE_SECONDS,
    ComposeOptions,
    ResolvedService,
    Resolver,
    _environment,
    find_resolver,
    service_sha256,
)
from mtpverdict.compose._project import (
    _check_files,
    _env_names,
    _env_settings,
    check_yaml_shape,
    default_files,
)
from mtpverdict.errors import InputError, Problem
from mtpverdict.servecommand import Command, module_path_from_cwd, split_command
from mtpverdict.serveconfig import (
    ServeConfig,
    interpolation,
    load_yaml,
    shell_metacharacter,
    shell_split,
)

# --------------------------------------------------------------------------------------------------
# resolving


def _compose_environment(resolver: Resolver, args: Sequence[str], source: str) -> list[str]:
    """The names of the variables Compose interpolates with (`config --environment`): what it read
    from the env file, as it read it."""
    done = _invoke(resolver, [*args, "config", "--environment"], source)
    return [line.split("=", 1)[0] for line in done.decode("utf-8", "replace").splitlines()]


def _invoke(resolver: Resolver, args: Sequence[str], source: str) -> bytes:
    """One run of Compose, its standard output; InputError naming the file when Compose refuses."""
    try:
        done = subprocess.run(
            [*resolver.argv, *args],
            capture_output=True,
            timeout=RESOLVE_SECONDS,
            check=False,
            env=_environment(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise InputError(
            [Problem(source, f"{resolver.name} did not resolve the project in {RESOLVE_SECONDS} s")]
        ) from None
    except OSError as exc:
        raise InputError([Problem(source, f"{resolver.name} cannot be run: {exc.strerror or exc}")]) from None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    errors = [line for line in said if "level=warning" not in line]
    if done.returncode != 0:
        why = (errors or said or [f"exit code {done.returncode}"])[-1][:300]
        raise InputError([Problem(source, f"Compose refuses the project: {why}")])
    if len(done.stdout) > MAX_OUTPUT:
        raise InputError([Problem(source, f"the resolved project is over {MAX_OUTPUT} bytes")])
    return done.stdout


def _run(resolver: Resolver, args: Sequence[str], source: str) -> dict[str, Any]:
    """One `config --format json` of Compose: its services."""
    return _services(_project(resolver, args, source))


def _project(resolver: Resolver, args: Sequence[str], source: str) -> dict[str, Any]:
    """One `config --format json` of Compose: the resolved project."""
    stdout = _invoke(resolver, args, source)
    try:
        loaded = json.loads(stdout)
    except ValueError as exc:
        raise InputError([Problem(source, f"{resolver.name} printed no JSON project: {exc}")]) from None
    return loaded if isinstance(loaded, dict) else {}


def _services(project: Mapping[str, Any]) -> dict[str, Any]:
    services = project.get("services")
    return services if isinstance(services, dict) else {}


def _volume_names(project: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The project's volume keys and the names Compose creates them under (PROJECT_KEY by default)."""
    volumes = project.get("volumes")
    found = volumes.items() if isinstance(volumes, dict) else ()
    return tuple(sorted((str(k), str(v.get("name") or k)) for k, v in found if isinstance(v, dict)))


def _unescape(value: str) -> str:
    """A value as the container gets it: Compose's `config` output writes a literal `$` as `$$`."""
    return value.replace("$$", "$")


def _argv_part(value: object, source: str, key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError([Problem(source, "must be a list of strings", key=key)])
    return tuple(_unescape(v) for v in value)


def _environment_of(value: object) -> tuple[tuple[str, str | None], ...]:
    if isinstance(value, dict):
        return tuple(sorted((str(k), None if v is None else _unescape(str(v))) for k, v in value.items()))
    return ()


def _raw_refusals(raw: Mapping[str, Any], name: str) -> list[str]:
    """What the uninterpolated service shows that the deployment decides, not the file."""
    out = []
    for key in ("entrypoint", "command", "image"):
        value = raw.get(key)
        for text in [value] if isinstance(value, str) else value or ():
            found = interpolation(text) if isinstance(text, str) else None
            if found is not None:
                out.append(
                    f"services.{name}.{key} uses {found}: Compose interpolates it at deploy time, "
                    "so what runs depends on the environment and .env of the host"
                )
                break
        if key != "image" and isinstance(value, str):
            metacharacter = shell_metacharacter(value)
            if metacharacter is not None:
                out.append(
                    f"services.{name}.{key} is a string with the shell character {metacharacter!r}: "
                    "write the command as a list"
                )
    environment = raw.get("environment")
    items: list[tuple[Any, Any]] = list(environment.items()) if isinstance(environment, dict) else []
    if isinstance(environment, list):
        items = [(str(v).partition("=")[0], str(v).partition("=")[2]) for v in environment]
    for variable, text in items:
        found = interpolation(str(text)) if text is not None else None
        if found is not None:
            out.append(f"services.{name}.environment.{variable} uses {found}: set at deploy time")
    out += [
        f"services.{name}.{path} uses {found}: Compose interpolates it at deploy time, so what runs "
        "depends on the environment and .env of the host"
        for key, value in sorted(raw.items())
        if key not in _CHECKED_ABOVE
        for path, found in _interpolated(value, str(key))
    ]
    return out


_CHECKED_ABOVE = frozenset({"entrypoint", "command", "image", "environment"})


def _interpolated(value: object, path: str) -> Iterator[tuple[str, str]]:
    """(key path, the interpolation) of every string in a value that Compose interpolates."""
    if isinstance(value, str):
        found = interpolation(value)
        if found is not None:
            yield path, found
    elif isinstance(value, dict):
        for key, item in sorted(value.items(), key=lambda kv: str(kv[0])):
            yield from _interpolated(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _interpolated(item, f"{path}[{i}]")


def _own(definition: object, generated: str) -> dict[str, Any]:
    """A definition without the name Compose generated for it and without empty keys (Compose writes
    the default network as `{"ipam": {}}`)."""
    if not isinstance(definition, dict):
        return {}
    return {
        k: v
        for k, v in definition.items()
        if v not in (None, {}, [], "") and not (k == "name" and v == generated)
    }


def _definitions(project: Mapping[str, Any], service: Mapping[str, Any]) -> dict[str, Any]:
    """The project's top-level definitions of the named volumes, networks, configs and secrets the
    service uses (only the kinds it uses any of), without the names Compose makes from the project's
    (PROJECT_KEY: the same deployment in another directory is the same deployment)."""
    used: dict[str, set[str]] = {
        "volumes": {
            str(v["source"])
            for v in service.get("volumes") or ()
            if isinstance(v, dict) and v.get("type") == "volume" and v.get("source")
        },
        "networks": {str(n) for n in service.get("networks") or ()},
        "configs": {
            str(c["source"]) for c in service.get("configs") or () if isinstance(c, dict) and c.get("source")
        },
        "secrets": {
            str(c["source"]) for c in service.get("secrets") or () if isinstance(c, dict) and c.get("source")
        },
    }
    out: dict[str, Any] = {}
    for kind, names in used.items():
        table = project.get(kind)
        defined = table if isinstance(table, dict) else {}
        found = {
            name: _own(defined[name], f"{project.get('name')}_{name}")
            for name in sorted(names)
            if name in defined
        }
        found = {name: value for name, value in found.items() if value}
        if found:
            out[kind] = found
    return out


def _under(path: str, directory: str) -> bool:
    directory = directory.rstrip("/") or "/"
    return path == directory or path.startswith(directory + "/") or directory == "/"


def _mount_targets(service: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, target) of what a service mounts: volumes, configs, secrets (Compose's long form, or the
    short SOURCE:TARGET[:MODE] of a file read directly, every absolute part after the source taken
    for the target, since a Windows source has a colon of its own) and tmpfs (TARGET[:OPTIONS])."""
    for key in ("volumes", "configs", "secrets", "tmpfs"):
        value = service.get(key)
        for mount in [value] if isinstance(value, str) else value or ():
            if isinstance(mount, dict):
                targets = [str(mount.get("target") or "")]
            elif key == "tmpfs":
                targets = [str(mount).split(":", 1)[0]]
            else:
                parts = str(mount).split(":")
                targets = parts[1:] or parts
            for target in targets:
                if target.startswith("/"):  # a secret's default target (/run/secrets/NAME) is relative
                    yield key, os.path.normpath(target).replace("//", "/", 1)


def _over_user_site(target: str) -> bool:
    """A mount at a .local directory, a home directory or the homes' parent."""
    parts = target.strip("/").split("/")
    return ".local" in parts or target in HOMES or (target.startswith("/home/") and len(parts) == 2)


def _over_code_cache(target: str) -> bool:
    """A mount at or inside a compiled-code cache, or at a directory holding one (a .cache, /tmp)."""
    rest = target.strip("/")
    parts = rest.split("/")
    inside = any(f"/{c}" in f"/{rest}" for c in CODE_CACHES)
    return inside or parts[-1] == ".cache" or target == "/tmp"


def _mount_refusals(service: Mapping[str, Any], argv: Sequence[str], name: str) -> list[str]:
    """Mounts that replace what the image runs: over its program directories, a Python package or
    user site directory, a path the command itself runs, or anything at all when `python -m` takes
    its modules from the working directory first."""
    programs = [t for t in argv if t.startswith("/")]
    command = split_command(argv, names_program=True) if argv else None
    python = module_path_from_cwd(command) if isinstance(command, Command) else None
    out = []
    for key, target in _mount_targets(service):
        over = [p for p in PROGRAM_PATHS if _under(target, p)]
        over += ["a Python package directory"] if "-packages" in target else []
        over += ["a user's site directory"] if _over_user_site(target) else []
        over += ["a compiled-code cache"] if _over_code_cache(target) else []
        over += [p for p in programs if _under(p, target)]
        if over:
            out.append(
                f"services.{name}.{key} mounts {target} over {over[0]}, which replaces what the image runs"
            )
        elif python is not None and key != "tmpfs":
            out.append(
                f"{python} -m puts the working directory first on its module path, and services.{name}."
                f"{key} mounts {target}, which may be it: run {python} -P -m"
            )
    return out


def _service_refusals(resolved: Mapping[str, Any], name: str) -> list[str]:
    """What else a service runs or selects that the evidence cannot show: a service that never
    starts, post_start hooks (commands run in the container), a working directory (where relative
    paths resolve), another service's volumes, a platform (another build of the tag)."""
    out = []
    if _never_starts(resolved):
        out.append(f"service {name} does not start (scale or deploy.replicas is 0)")
    if resolved.get("post_start"):
        out.append(f"services.{name}.post_start runs commands in the container beside the server")
    if resolved.get("working_dir"):
        out.append(
            f"services.{name}.working_dir {resolved['working_dir']}: relative paths in the command and "
            "the modules python -m finds first resolve there, which the evidence does not record"
        )
    if resolved.get("volumes_from"):
        shown = ", ".join(map(str, resolved["volumes_from"]))
        out.append(
            f"services.{name}.volumes_from mounts the volumes of {shown}, which the gate does not read"
        )
    if resolved.get("platform"):
        out.append(
            f"services.{name}.platform {resolved['platform']} selects a build of the image's tag the "
            "evidence does not name"
        )
    return out


def _never_starts(resolved: Mapping[str, Any]) -> bool:
    """scale: 0, or deploy.replicas: 0."""
    deploy = resolved.get("deploy")
    replicas = deploy.get("replicas") if isinstance(deploy, dict) else None
    return resolved.get("scale") == 0 or replicas == 0


def resolve_service(
    serve_config: str, service: str | None, options: ComposeOptions, resolver: Resolver
) -> ResolvedService:
    """The service as Compose deploys it, with what the resolution used. InputError for a project
    Compose refuses, a service it does not have, or files past the limits."""
    files, refusals = (options.files, []) if options.files else default_files(serve_config)
    project = options.project_dir or os.path.dirname(files[0]) or "."
    env_file = options.env_file or os.path.join(project, ".env")
    _check_files(files, [env_file] if os.path.lexists(env_file) else [])
    args = [a for f in files for a in ("-f", f)] + ["--project-directory", project]
    if os.path.lexists(env_file):
        args += ["--env-file", env_file]
    args += [a for p in options.profiles for a in ("--profile", p)]
    names = _compose_environment(resolver, args, serve_config) if os.path.lexists(env_file) else []
    refusals += _env_settings([*names, *_env_names(env_file)], env_file, options)
    project_json = _project(resolver, [*args, "config", "--format", "json"], serve_config)
    running = _services(project_json)
    raw_all = _run(resolver, [*args, "config", "--no-interpolate", "--format", "json"], serve_config)
    if service is None:
        if len(running) != 1:
            listed = ", ".join(sorted(running)) or "none"
            raise InputError(
                [Problem(serve_config, f"services started: {listed}; pass --service NAME", key="services")]
            )
        service = next(iter(running))
    raw = raw_all.get(service)
    if not isinstance(raw, dict):
        raise InputError([Problem(serve_config, f"no service {service!r}", key="services")])
    resolved = running.get(service)
    if not isinstance(resolved, dict):
        refusals.append(
            f"service {service} does not start with the profiles {', '.join(options.profiles) or '(none)'} "
            f"(it has profiles {', '.join(map(str, raw.get('profiles') or ()))}): pass the deployment's "
            "--profile"
        )
        resolved = {}
    refusals += _raw_refusals(raw, service)
    refusals += _service_refusals(resolved, service)
    refusals += [
        f"services.{service}.env_file {path} is not here: what it sets where the service is deployed "
        "cannot be seen"
        for path in _env_file_paths(raw, project)
        if not os.path.isfile(path)
    ]
    key = f"services.{service}"
    image = resolved.get("image")
    env_files = [env_file] if os.path.lexists(env_file) else []
    env_files += [str(e.get("path")) for e in raw.get("env_file") or () if isinstance(e, dict)]
    entrypoint = _argv_part(resolved.get("entrypoint"), serve_config, f"{key}.entrypoint")
    command = _argv_part(resolved.get("command"), serve_config, f"{key}.command")
    refusals += _mount_refusals(resolved, (*(entrypoint or ()), *(command or ())), service)
    definitions = _definitions(project_json, resolved)
    return ResolvedService(
        service=service,
        entrypoint=entrypoint,
        command=command,
        image=_unescape(image) if isinstance(image, str) and image else None,
        builds=resolved.get("build") is not None,
        environment=_environment_of(resolved.get("environment")),
        files=tuple(files),
        project_dir=project,
        profiles=options.profiles,
        env_files=tuple(env_files),
        resolver=resolver.name,
        compose_version=resolver.version,
        sha256=service_sha256(resolved, definitions),
        refusals=tuple(refusals),
        service_json=json.dumps(resolved, sort_keys=True),
        volume_names=_volume_names(project_json),
        definitions_json=json.dumps(definitions, sort_keys=True),
    )


def _env_file_paths(raw: Mapping[str, Any], project: str) -> list[str]:
    """The paths of a service's env_file entries (Compose writes them absolute; relative ones are
    the project directory's)."""
    entries = raw.get("env_file")
    out = []
    for entry in [entries] if isinstance(entries, str | dict) else entries or ():
        path = entry.get("path") if isinstance(entry, dict) else entry
        if isinstance(path, str):
            out.append(os.path.join(project, path))
    return out


# --------------------------------------------------------------------------------------------------
# a compose file as the gate reads it


def _needs_resolver(
    doc: Any, service: str, files: Sequence[str], options: ComposeOptions, anchored: bool
) -> list[str]:
    """The features of a project only Compose can resolve (empty for a plain single-file service)."""
    found = []
    if len(files) > 1:
        found.append(f"several files ({', '.join(files)}; Compose merges them, an override file included)")
    if options.profiles:
        found.append("profiles (--profile)")
    if anchored:
        found.append("YAML anchors or aliases (x- fragments merged into a service)")
    if isinstance(doc, dict) and doc.get("include") is not None:
        found.append("include:")
    services = doc.get("services") if isinstance(doc, dict) else None
    entry = services.get(service) if isinstance(services, dict) else None
    if isinstance(entry, dict):
        found += [f"services.{service}.{key}" for key in ("extends", "profiles", "env_file") if key in entry]
    return found


def _scalar_text(value: object, source: str, key: str) -> str:
    """A YAML scalar as compose passes it to the container: strings as they are, numbers and booleans."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise InputError(
        [Problem(source, f"must be a string, a number or a boolean, not {type(value).__name__}", key=key)]
    )


def _plain_argv(value: object, source: str, key: str) -> tuple[str, ...] | None:
    """A plain file's entrypoint or command: a list, or a string split as Compose splits it (a string
    with shell characters is refused before this is used)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return tuple(_unescape(v) for v in shell_split(value))
        except ValueError as exc:
            raise InputError([Problem(source, f"not a valid command line: {exc}", key=key)]) from None
    if isinstance(value, list):
        return tuple(_unescape(_scalar_text(v, source, f"{key}[{i}]")) for i, v in enumerate(value))
    raise InputError([Problem(source, "must be a string or a list", key=key)])


def _plain_environment(value: object, source: str, key: str) -> tuple[tuple[str, str | None], ...]:
    if value is None:
        return ()
    if isinstance(value, dict):
        pairs = [
            (str(k), None if v is None else _scalar_text(v, source, f"{key}.{k}")) for k, v in value.items()
        ]
    elif isinstance(value, list):
        texts = [_scalar_text(v, source, key) for v in value]
        pairs = [(t.split("=", 1)[0], t.split("=", 1)[1] if "=" in t else None) for t in texts]
    else:
        raise InputError([Problem(source, "must be a mapping or a list", key=key)])
    return tuple(sorted((k, None if v is None else _unescape(v)) for k, v in pairs))


def _read_plain(source: str, text: str, service: str | None, project: str) -> ResolvedService:
    """A single-file service read as written (no resolver): only for files that need none."""
    doc = load_yaml(text, source)
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict) or not services:
        raise InputError([Problem(source, "no services in the compose file", key="services")])
    if service is None:
        if len(services) != 1:
            listed = ", ".join(sorted(str(s) for s in services))
            raise InputError(
                [Problem(source, f"several services ({listed}); pass --service NAME", key="services")]
            )
        service = str(next(iter(services)))
    entry = services.get(service)
    if not isinstance(entry, dict):
        raise InputError([Problem(source, f"no service {service!r}", key="services")])
    key = f"services.{service}"
    image = entry.get("image")
    if image is not None and not isinstance(image, str):
        raise InputError([Problem(source, "must be a string", key=f"{key}.image")])
    return ResolvedService(
        service=service,
        entrypoint=_plain_argv(entry.get("entrypoint"), source, f"{key}.entrypoint"),
        command=_plain_argv(entry.get("command"), source, f"{key}.command"),
        image=image or None,
        builds=entry.get("build") is not None,
        environment=_plain_environment(entry.get("environment"), source, f"{key}.environment"),
        files=(source,),
        project_dir=project,
        profiles=(),
        env_files=(),
        resolver="",
        compose_version="",
        sha256=hashlib.sha256(json.dumps(entry, sort_keys=True, default=str).encode()).hexdigest(),
        refusals=tuple(_plain_refusals(entry, service)),
    )


def _plain_refusals(entry: Mapping[str, Any], name: str) -> list[str]:
    """_raw_refusals, mounts and a service that never starts, for a service read as written."""
    argv: list[str] = []
    for key in ("entrypoint", "command"):
        try:
            argv += _plain_argv(entry.get(key), name, key) or ()
        except InputError:
            pass  # _read_plain names it
    out = _raw_refusals(entry, name) + _mount_refusals(entry, argv, name) + _service_refusals(entry, name)
    for key in ("entrypoint", "command"):
        if isinstance(entry.get(key), str) and "\\" in entry[key]:
            out.append(
                f"services.{name}.{key} is a string with a backslash, which Compose's splitter reads "
                'otherwise than a shell ("a\\b" is ab): write the command as a list'
            )
    return out


def read_compose(
    source: str,
    text: str,
    service: str | None,
    options: ComposeOptions,
    resolver: Resolver | None | bool = True,
) -> ServeConfig:
    """A compose service as a ServeConfig: resolved by Compose (`resolver` True: find one), or read
    directly when no resolver is installed and the project needs none (else refused with the hint)."""
    found = find_resolver() if resolver is True else resolver or None
    if found is not None:
        return as_serve_config(resolve_service(source, service, options, found), source)
    files, ambiguous = (options.files, []) if options.files else default_files(source)
    anchored = check_yaml_shape(text, source)
    if not anchored:
        doc = load_yaml(text, source)
        services = doc.get("services") if isinstance(doc, dict) else None
        name = service or (next(iter(services)) if isinstance(services, dict) and len(services) == 1 else "")
    else:
        doc, name = None, service or ""
    needs = _needs_resolver(doc, str(name), files, options, anchored)
    project = options.project_dir or os.path.dirname(source) or "."
    env_file = options.env_file or os.path.join(project, ".env")
    refusals = ambiguous + _env_settings(_env_names(env_file), env_file, options)
    if needs:
        refusals.append(f"{source} uses {'; '.join(needs)}, which only Compose resolves: {INSTALL_HINT}")
        label = f"{source} service {service}" if service else source
        return ServeConfig((), None, label, names_program=False, refusals=tuple(refusals))
    resolved = _read_plain(source, text, service, project)
    config = as_serve_config(resolved, source)
    return ServeConfig(
        config.argv,
        config.image,
        config.source,
        config.environment,
        config.unpinned,
        config.env_values,
        config.names_program,
        (*refusals, *config.refusals),
        config.compose,
    )


def as_serve_config(resolved: ResolvedService, source: str) -> ServeConfig:
    """The ServeConfig of a resolved service: its one argv, image and environment."""
    unpinned = f"service {resolved.service} builds its image (build:)" if resolved.builds else None
    return ServeConfig(
        argv=resolved.argv,
        image=resolved.image,
        source=f"{source} service {resolved.service}",
        environment=tuple(name for name, _ in resolved.environment),
        unpinned=unpinned,
        env_values=resolved.environment,
        names_program=resolved.entrypoint is not None,
        refusals=resolved.refusals,
        compose=resolved,
    )
