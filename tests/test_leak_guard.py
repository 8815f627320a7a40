"""The suite's leak guard (tests/conftest.py `no_leaks`): a test that leaves a file open or a child
process running fails itself, and the tests after it do not inherit the leak."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, child_processes, open_descriptors

INNER_TESTS = """
import subprocess
import sys

HELD = []


def test_clean(tmp_path):
    with open(tmp_path / "f", "w") as fh:
        fh.write("closed in time")
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_leaves_a_file_open(tmp_path):
    HELD.append(open(tmp_path / "f", "w"))


def test_leaves_a_child_running():
    HELD.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))


def test_after_the_leaks():
    pass
"""


def test_a_test_that_leaks_fails_and_the_next_one_passes(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import no_leaks  # noqa: F401\n")
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "-rA", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "4 passed, 2 errors" in out, out  # two tests passed, then failed at teardown
    assert "PASSED test_inner.py::test_clean" in out and "PASSED test_inner.py::test_after_the_leaks" in out
    parts = re.split(r"\n_{3,} (.+?) _{3,}\n", out)  # [before, title, body, title, body, ...]
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    file_part = sections["ERROR at teardown of test_leaves_a_file_open"]
    assert "the test left behind: file descriptor" in file_part and "test_leaves_a_file_open0/f)" in file_part
    child_part = sections["ERROR at teardown of test_leaves_a_child_running"]
    assert "the test left behind: child process" in child_part and "python" in child_part


def test_the_guard_sees_this_process_open_a_file_and_start_a_child(tmp_path: Path) -> None:
    if not Path("/proc/self/task").is_dir():
        pytest.skip("reads /proc (Linux)")
    before_files, before_children = open_descriptors(), child_processes()
    with (
        (tmp_path / "f").open("w"),
        subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
        ) as child,
    ):
        assert str(tmp_path / "f") in set(open_descriptors().values()) - set(before_files.values())
        assert child.pid in child_processes() and child.pid not in before_children
        assert child.stdin is not None
        child.stdin.close()
    assert open_descriptors() == before_files
