"""The files a compose project reads, bounded and shape-checked before Compose reads any of them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from mtpverdict.compose._model import (
    _COMPOSE_SETTINGS,
    COMPOSE_MAX_BYTES,
    DEFAULT_FILES,
    MAX_EXPANDED_NODES,
    MAX_FILES,
    OVERRIDE_FILES,
    ComposeOptions,
)
from mtpverdict.errors import InputError, Problem
from mtpverdict.serveconfig import (
    MAX_DEPTH,
    check_integers,
    read_bounded,
)

# --------------------------------------------------------------------------------------------------
# bounded YAML


def check_yaml_shape(text: str, source: str) -> bool:
    """Refuse YAML nested deeper than MAX_DEPTH or whose aliases expand past MAX_EXPANDED_NODES,
    on the event stream before anything is built. True when it uses anchors or aliases."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    sizes: dict[str, int] = {}
    frames: list[list[Any]] = []  # [anchor, expanded nodes] per open collection
    total = 0
    anchored = False
    try:
        for event in yaml.parse(text, Loader=loader):
            line = event.start_mark.line + 1 if event.start_mark is not None else None
            if isinstance(event, yaml.AliasEvent):
                anchored = True
                size = sizes.get(str(event.anchor), 1)
            elif isinstance(event, yaml.ScalarEvent):
                size = 1
                if event.anchor is not None:
                    anchored, sizes[str(event.anchor)] = True, 1
            elif isinstance(event, yaml.CollectionStartEvent):
                anchored = anchored or event.anchor is not None
                frames.append([event.anchor, 1])
                if len(frames) > MAX_DEPTH:
                    raise InputError([Problem(source, f"nested deeper than {MAX_DEPTH} levels", line=line)])
                continue
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, size = frames.pop()
                if anchor is not None:
                    sizes[str(anchor)] = size
                if frames:
                    frames[-1][1] += size
                continue
            else:
                continue
            total += size
            if frames:
                frames[-1][1] += size
            if total > MAX_EXPANDED_NODES:
                raise InputError(
                    [
                        Problem(
                            source,
                            f"its aliases expand to more than {MAX_EXPANDED_NODES:,} YAML nodes "
                            "(an alias bomb?)",
                            line=line,
                        )
                    ]
                )
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise InputError(
            [
                Problem(
                    source,
                    f"not valid YAML: {exc.problem or exc.context}",
                    line=None if mark is None else mark.line + 1,
                )
            ]
        ) from None
    except yaml.YAMLError as exc:
        raise InputError([Problem(source, f"not valid YAML: {str(exc).splitlines()[0][:120]}")]) from None
    return anchored


def _safe_load(text: str, source: str) -> Any:
    """A file already shape-checked, loaded (anchors allowed: their expansion is bounded)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_integers(node, source)
        return loader.construct_document(node)
    except (yaml.YAMLError, ValueError) as exc:
        raise InputError([Problem(source, f"not valid YAML: {str(exc).splitlines()[0][:120]}")]) from None
    finally:
        loader.dispose()


# --------------------------------------------------------------------------------------------------
# the files a project reads


def _references(doc: Any) -> Iterator[tuple[str, bool]]:
    """(path, is YAML) of the files a compose document names: include, extends.file, env_file."""
    if not isinstance(doc, dict):
        return
    for entry in doc.get("include") or ():
        paths = entry.get("path") if isinstance(entry, dict) else entry
        for path in [paths] if isinstance(paths, str) else paths or ():
            if isinstance(path, str):
                yield path, True
        env = entry.get("env_file") if isinstance(entry, dict) else None
        for path in [env] if isinstance(env, str) else env or ():
            if isinstance(path, str):
                yield path, False
    services = doc.get("services")
    for service in services.values() if isinstance(services, dict) else ():
        if not isinstance(service, dict):
            continue
        extends = service.get("extends")
        if isinstance(extends, dict) and isinstance(extends.get("file"), str):
            yield extends["file"], True
        env = service.get("env_file")
        for item in [env] if isinstance(env, str | dict) else env or ():
            path = item.get("path") if isinstance(item, dict) else item
            if isinstance(path, str):
                yield path, False


def _check_files(files: Iterable[str], env_files: Iterable[str] = ()) -> None:
    """Every file the project reads, bounded and shape-checked, before Compose reads any of them."""
    queue = [(str(f), True) for f in files] + [(str(f), False) for f in env_files]
    seen: set[str] = set()
    while queue:
        path, is_yaml = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        if len(seen) > MAX_FILES:
            raise InputError([Problem(path, f"the project reads more than {MAX_FILES} files")])
        if not os.path.lexists(path):
            continue  # Compose names a missing file itself (or skips an optional env_file)
        text = read_bounded(path, COMPOSE_MAX_BYTES)
        if not is_yaml:
            continue
        check_yaml_shape(text, path)
        base = os.path.dirname(path)
        for reference, yaml_file in _references(_safe_load(text, path)):
            if "://" in reference or reference.startswith("git@"):
                raise InputError(
                    [
                        Problem(
                            path,
                            f"{reference} is a remote resource (an OCI artifact or a git repository): what "
                            "it holds where the service is deployed cannot be checked; the gate reads only "
                            "local files",
                        )
                    ]
                )
            queue.append((os.path.join(base, reference), yaml_file))


def _env_names(env_file: str | None) -> list[str]:
    """The variable names an env file sets, read as Compose's dotenv reader does: `export` and any
    whitespace before the name, `=` or `:` after it."""
    if env_file is None or not os.path.isfile(env_file):
        return []
    names = []
    for line in read_bounded(env_file).splitlines():
        text = line.strip()
        head = text.split(None, 1)
        if len(head) == 2 and head[0] == "export":
            text = head[1]
        names.append(text.replace(":", "=", 1).split("=", 1)[0].strip().strip("'\""))
    return names


def _env_settings(names: Iterable[str], source: str, options: ComposeOptions) -> list[str]:
    """Refusals for COMPOSE_* settings an env file gives that the gate's options do not."""
    given = {"--compose-file": bool(options.files), "--profile": bool(options.profiles)}
    given["--env-file"] = options.env_file is not None
    out = []
    for name in dict.fromkeys(names):
        option = _COMPOSE_SETTINGS.get(name)
        if option is not None and not given[option]:
            out.append(
                f"{source} sets {name}, which changes what Compose deploys: pass it to the gate as {option}"
            )
    return out


def default_files(path: str) -> tuple[tuple[str, ...], list[str]]:
    """The files Compose reads for a serve config given alone: it, and the override file Compose
    merges over a file of a default name in its directory; refusals where Compose would pick one
    of several."""
    directory, name = os.path.split(path)
    if name not in DEFAULT_FILES:
        return (path,), []
    here = [f for f in DEFAULT_FILES if os.path.lexists(os.path.join(directory, f))]
    overrides = [f for f in OVERRIDE_FILES if os.path.lexists(os.path.join(directory, f))]
    refusals = []
    if here and here[0] != name:
        refusals.append(f"Compose in {directory or '.'} reads {here[0]}, not {name}: pass --compose-file")
    if len(overrides) > 1:
        refusals.append(
            f"several override files in {directory or '.'} ({', '.join(overrides)}): Compose merges one "
            "of them; remove the others or pass --compose-file"
        )
    return (path, *(os.path.join(directory, f) for f in overrides[:1])), refusals
