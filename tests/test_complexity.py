"""The complexity ratchet's length half: no function body or module in src/ longer than a reader can hold.

ruff's C901 and PLR09 limits (pyproject.toml) bound branching, arguments and statements; this bounds
length. A function listed in WAITING is over the limit today and may only shrink; the list may only
lose entries.
"""

from __future__ import annotations

import ast

from .conftest import ROOT

MAX_BODY_LINES = 80  # lines from the first statement after the docstring to the last
WAITING: dict[str, int] = {}


def _bodies() -> dict[str, int]:
    out: dict[str, int] = {}
    for path in sorted((ROOT / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            body = node.body
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(body) > 1:
                body = body[1:]
            end = body[-1].end_lineno or body[-1].lineno
            name = f"{path.relative_to(ROOT / 'src').as_posix()}:{node.name}"
            out[name] = max(out.get(name, 0), end - body[0].lineno + 1)
    return out


def test_no_function_body_is_over_the_limit() -> None:
    bodies = _bodies()
    over = {name: n for name, n in bodies.items() if n > MAX_BODY_LINES and name not in WAITING}
    assert not over, f"split these (over {MAX_BODY_LINES} lines): {over}"


def test_the_waiting_list_only_shrinks() -> None:
    bodies = _bodies()
    for name, limit in WAITING.items():
        assert name in bodies, f"{name} is gone: remove it from WAITING"
        assert bodies[name] <= limit, f"{name} grew to {bodies[name]} lines (limit {limit})"


MAX_MODULE_LINES = 800  # a module past this holds several jobs: split it along its sections
RUNNER_MAX_LINES = 500  # collect/runner.py is the campaign loop only; each boot's work lives beside it


def test_no_module_is_over_the_limit() -> None:
    sizes = {
        path.relative_to(ROOT / "src").as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted((ROOT / "src").rglob("*.py"))
    }
    over = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"split these (over {MAX_MODULE_LINES} lines): {over}"
    assert sizes["mtpverdict/collect/runner.py"] <= RUNNER_MAX_LINES
