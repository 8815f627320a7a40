"""A `docker` stand-in for collect's container lifecycle: records every call and runs containers natively.

No container runtime runs on the test machines, so `docker run` here execs the container's command
(the --entrypoint, else nothing, then the arguments after the image) on the host, with the --env
values, after writing the container's pid under $FAKE_DOCKER_DIR/NAME.pid; `docker stop` and
`docker rm --force` signal that pid and remove the file (rm exits 1, "No such container", when there
is none). Every call is appended to $FAKE_DOCKER_DIR/calls.jsonl. It reads only the `--flag=value`
form collect writes (compose/docker.py), so every option before the image is one token.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

SWITCHES = ("--rm", "--init", "--privileged", "--read-only", "--no-healthcheck")


def _home() -> Path:
    return Path(os.environ["FAKE_DOCKER_DIR"])


def _signal(name: str, sig: int) -> bool:
    """Signal the container's pid; True when there was a container of that name."""
    pidfile = _home() / f"{name}.pid"
    if not pidfile.exists():
        return False
    pid = int(pidfile.read_text())
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for _ in range(100):  # the process exits (or was gone): the container is removed with it
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            break
        time.sleep(0.05)
    pidfile.unlink(missing_ok=True)
    return True


def _run(args: list[str]) -> int:
    options: dict[str, list[str]] = {}
    i = 0
    while i < len(args) and args[i].startswith("--"):
        flag, eq, value = args[i].partition("=")
        if not eq and flag not in SWITCHES:
            print(f"fakedocker: {flag} without =VALUE", file=sys.stderr)
            return 125
        options.setdefault(flag, []).append(value)
        i += 1
    if i >= len(args):
        print("fakedocker: no image", file=sys.stderr)
        return 125
    rest = args[i + 1 :]
    argv = [*options.get("--entrypoint", [])[:1], *rest]
    env = dict(os.environ)
    for item in options.get("--env", []):
        key, eq, value = item.partition("=")
        if eq:
            env[key] = value
    name = options["--name"][0]
    (_home() / f"{name}.pid").write_text(str(os.getpid()))
    os.execvpe(argv[0], argv, env)  # noqa: S606 - the test's own command


def main() -> int:
    args = sys.argv[1:]
    with (_home() / "calls.jsonl").open("a") as fh:
        fh.write(json.dumps(args) + "\n")
    if args[:1] == ["run"]:
        return _run(args[1:])
    if args[:1] == ["stop"]:
        return 0 if _signal(args[-1], signal.SIGTERM) else 1
    if args[:2] == ["rm", "--force"]:
        if _signal(args[-1], signal.SIGKILL):
            print(args[-1])
            return 0
        print(f"Error response from daemon: No such container: {args[-1]}", file=sys.stderr)
        return 1
    print(f"fakedocker: {' '.join(args[:2])} is not something collect runs", file=sys.stderr)
    return 125


if __name__ == "__main__":
    sys.exit(main())
