"""Reading input files only when they are regular files: whole under a stated size, or streamed."""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotReadable(Exception):
    """The file is missing, not a regular file, too large or unreadable; the text says which."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """A regular file (symlinks followed) opened for streaming; anything else raises NotReadable.

    Opened without blocking and checked on the descriptor, as in read_regular, so a FIFO cannot hang
    the reader and a device is refused before a byte is read.
    """
    fd = _open(path)
    try:
        _require_regular(os.fstat(fd).st_mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open(path: str | os.PathLike[str]) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise NotReadable("not found") from None
    except OSError as exc:
        raise NotReadable(f"cannot be opened: {exc.strerror or type(exc).__name__}") from None


def _require_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "a special file")
        raise NotReadable(f"is {kind}, not a regular file; only a regular file is read")


def read_regular(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of a regular file (symlinks followed) of at most `limit` bytes; `what` names the
    kind of file in the error.

    The file is opened without blocking, so a FIFO cannot hang the reader, and checked on the open
    descriptor, so it cannot be swapped between the check and the read; no more than limit + 1 bytes
    are ever read, so a device or a growing file cannot exhaust memory.
    """
    fd = _open(path)
    try:
        _require_regular(os.fstat(fd).st_mode)
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise NotReadable(f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotReadable(f"is larger than {limit} bytes ({_human(limit)}), the limit for {what}")
    return data


def _human(size: int) -> str:
    return f"{size / (1 << 20):g} MiB" if size >= 1 << 20 else f"{size / 1024:g} KiB"
