"""One readable line for an exception: its type and a text that is never empty."""

from __future__ import annotations

CHAIN_DEPTH = 8  # causes looked through for a message; chains are short, a cycle must not loop


def _own_text(exc: BaseException) -> str:
    return str(exc).strip()


def _causes(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current = exc.__cause__ or exc.__context__
    while current is not None and len(found) < CHAIN_DEPTH and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def describe_exception(exc: BaseException) -> str:
    """`Type: text`, where text is the exception's message, else the first message among its causes
    (named with their type), else the first line of its class's docstring when a library defines it
    (httpx's network errors, raised with an empty message, say there what failed), else a plain
    statement that none was given.
    """
    name = type(exc).__name__
    text = _own_text(exc)
    if not text:
        cause = next((c for c in _causes(exc) if _own_text(c)), None)
        if cause is not None:
            text = f"{_own_text(cause)} ({type(cause).__name__})"
    if not text and type(exc).__module__ != "builtins":  # a builtin's docstring names only its class
        doc = (type(exc).__doc__ or "").strip().splitlines()
        text = doc[0].strip() if doc else ""
    return f"{name}: {text or 'raised without a message'}"
