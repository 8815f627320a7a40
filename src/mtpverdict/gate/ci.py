"""What CI sees: the step summary, the step outputs and the errors of bad input."""

from __future__ import annotations

import re
from collections.abc import Mapping

from mtpverdict._text import markdown_safe
from mtpverdict.errors import InputError, Problem
from mtpverdict.gate.run import GateResult

__all__ = ["bad_input_summary", "step_summary", "write_ci_error", "write_ci_files"]

_OUTPUT_VALUE = re.compile(r"[^A-Za-z0-9_.:=+ ()-]")


def step_summary(result: GateResult) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY."""
    head = "supported" if result.supported else "refused"
    lines = [
        f"### mtpverdict gate: {markdown_safe(result.label)} {head}",
        "",
        f"decision: {markdown_safe(result.decision)}"
        + (f", selected {markdown_safe(result.selected)}" if result.selected else ""),
        "",
    ]
    lines += [f"- {markdown_safe(r.strip(), starts_line=True)}" for r in result.reasons]
    return "\n".join(lines) + "\n"


def bad_input_summary(exc: InputError) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY when the gate could not run (exit 2)."""
    return "### mtpverdict gate: bad input\n\n" + "".join(
        f"- {markdown_safe(str(p), starts_line=True)}\n" for p in exc.problems
    )


def _append(path: str | None, text: str) -> None:
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError([Problem(path, f"cannot be written: {exc.strerror or exc}")]) from None


def write_ci_files(result: GateResult, environ: Mapping[str, str]) -> None:
    """The step summary, and `supported`, `decision`, `selected`, `spec` as step outputs."""
    _append(environ.get("GITHUB_STEP_SUMMARY"), step_summary(result))
    outputs = {
        "supported": "true" if result.supported else "false",
        "decision": result.decision,
        "selected": result.selected or "",
        "spec": result.spec,
    }
    # values from closed vocabularies; anything else is dropped so no value can forge another line
    _append(
        environ.get("GITHUB_OUTPUT"), "".join(f"{k}={_OUTPUT_VALUE.sub('', v)}\n" for k, v in outputs.items())
    )


def write_ci_error(exc: InputError, environ: Mapping[str, str]) -> None:
    """The one-line errors of bad input, in the step summary."""
    _append(environ.get("GITHUB_STEP_SUMMARY"), bad_input_summary(exc))
